"""What changed between two sets of records: ``python -m harness diff OLD NEW``.

OLD and NEW are each a record store (a folder of ``.jsonl`` files, or one file), or a git
revision of ``results/records/`` (``HEAD~1``, a tag; ``REV:path/to/file.jsonl`` for one
file), read with ``git show`` without touching the work tree. ``--machine`` (both sides),
``--old-machine`` and ``--new-machine`` keep one machine's records (its name, or its id).

The unit is a cell of a variant (entry, variant, cell): its set of outcome kinds over its
trials and machines (each machine's newest record per trial), so more trials of the same
outcome are no change, and a cell that turned flaky is. Changed cells are sorted into:

- newly reproduced: a baseline whose documented error now appears, and did not before;
- no longer reproduced: the reverse;
- workarounds (and dead ends) newly working: now every run ``ok``, before not;
- workarounds (and dead ends) newly failing: before every run ``ok``, now a run failed;
- other changes (controls, a cell that became unsupported or skipped, ...).

Each line names the versions on both sides where they differ. Cells only one side has are
counted, and those new in NEW listed. Records are read as the report reads them: against
the entries as they are now (``aggregate.reread``: a variant's own expected error is
``related``, whatever schema recorded it), so a diff shows what the report would change.
"""

from __future__ import annotations

import html
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InputError
from harness.outcomes import Outcome
from harness.spec.entries import Entry
from harness.store.jsonl import LoadResult, Store, latest, parse_bytes
from harness.store.records import Record

__all__ = [
    "CATEGORIES",
    "Change",
    "Diff",
    "DiffError",
    "Side",
    "as_reported",
    "diff_records",
    "format_diff",
    "html_changes",
    "load_side",
]

RECORDS = "results/records"


class DiffError(InputError):
    """A side cannot be read: str() says which and why."""


@dataclass(frozen=True)
class Side:
    label: str  # what the user named, e.g. "HEAD~1" or "results/records"
    records: tuple[Record, ...]  # each machine's newest record per key
    warnings: tuple[str, ...] = ()

    @property
    def machines(self) -> tuple[str, ...]:
        return tuple(sorted({str(r.machine_key) for r in self.records}))


CellId = tuple[str, str, str]  # entry, variant, cell

CATEGORIES = (
    ("newly_reproduced", "newly reproduced"),
    ("no_longer_reproduced", "no longer reproduced"),
    ("newly_working", "workarounds and dead ends newly working"),
    ("newly_failing", "workarounds and dead ends newly failing"),
    ("other", "other outcome changes"),
)
_NOT_MEASURED = {Outcome.UNSUPPORTED, Outcome.SKIPPED, Outcome.ENV_FAILED}


@dataclass(frozen=True)
class Change:
    category: str  # a key of CATEGORIES, or "new" (a cell only NEW has)
    entry: str
    variant: str
    kind: str
    cell: str
    old: tuple[str, ...]  # outcome kinds, sorted ("" side: none)
    new: tuple[str, ...]
    old_versions: str
    new_versions: str

    def line(self) -> str:
        was = ", ".join(self.old) or "-"
        now = ", ".join(self.new) or "-"
        versions = self.new_versions
        if self.old and self.old_versions != self.new_versions:
            versions = f"{self.old_versions} -> {self.new_versions}"
        return f"{self.entry} :: {self.variant} @ {self.cell}: {was} -> {now} ({versions})"


@dataclass(frozen=True)
class Diff:
    old: Side
    new: Side
    changes: tuple[Change, ...]
    unchanged: int
    only_old: int
    only_new: tuple[Change, ...] = field(default=())

    def by_category(self, category: str) -> list[Change]:
        return [c for c in self.changes if c.category == category]


def _versions(records: Sequence[Record]) -> str:
    def one(name: str) -> str:
        seen = sorted({r.versions.get(name, "") for r in records} - {""})
        return "/".join(seen) or "?"

    return f"torch {one('torch')}, lightning {one('lightning')}"


def _category(kind: str, old: set[Outcome], new: set[Outcome]) -> str:
    if kind == "baseline":
        if Outcome.REPRODUCED in new and Outcome.REPRODUCED not in old:
            return "newly_reproduced"
        if Outcome.REPRODUCED in old and Outcome.REPRODUCED not in new:
            return "no_longer_reproduced"
    if kind in ("workaround", "dead_end"):
        old_works, new_works = old == {Outcome.OK}, new == {Outcome.OK}
        failed = new - _NOT_MEASURED - {Outcome.OK}
        if new_works and not old_works:
            return "newly_working"
        if old_works and failed:
            return "newly_failing"
    return "other"


def diff_records(old: Side, new: Side) -> Diff:
    def cells(side: Side) -> dict[CellId, list[Record]]:
        out: dict[CellId, list[Record]] = {}
        for r in side.records:
            out.setdefault((r.entry, r.variant, r.cell), []).append(r)
        return out

    before, after = cells(old), cells(new)
    changes: list[Change] = []
    only_new: list[Change] = []
    unchanged = 0
    for cid in sorted(after):
        now_records = after[cid]
        now = {r.outcome for r in now_records}
        kind = now_records[0].kind
        if cid not in before:
            only_new.append(
                Change(
                    "new",
                    *cid[:2],
                    kind,
                    cid[2],
                    (),
                    tuple(sorted(o.value for o in now)),
                    "",
                    _versions(now_records),
                )
            )
            continue
        was = {r.outcome for r in before[cid]}
        if was == now:
            unchanged += 1
            continue
        changes.append(
            Change(
                _category(kind, was, now),
                *cid[:2],
                kind,
                cid[2],
                tuple(sorted(o.value for o in was)),
                tuple(sorted(o.value for o in now)),
                _versions(before[cid]),
                _versions(now_records),
            )
        )
    return Diff(
        old=old,
        new=new,
        changes=tuple(changes),
        unchanged=unchanged,
        only_old=len(set(before) - set(after)),
        only_new=tuple(only_new),
    )


def _git(repo: Path, *args: str) -> bytes:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiffError(f"git {' '.join(args)}: {exc}") from exc
    if out.returncode != 0:
        raise DiffError(
            f"git {' '.join(args)}: {out.stderr.decode('utf-8', 'replace').strip() or 'failed'}"
        )
    return out.stdout


def _from_git(spec: str, repo: Path) -> LoadResult:
    rev, _, path = spec.partition(":")
    try:
        _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except DiffError:
        raise DiffError(
            f"{spec!r} is neither a record file or folder nor a git revision of {repo}"
        ) from None
    if path:
        paths = [path]
    else:
        listing = _git(repo, "ls-tree", "-r", "--name-only", rev, "--", RECORDS + "/")
        paths = [p for p in listing.decode().splitlines() if p.endswith(".jsonl")]
    result = LoadResult()
    for p in paths:
        parse_bytes(_git(repo, "show", f"{rev}:{p}"), Path(p), result, label=f"{rev}:{p}")
    return result


def as_reported(records: Iterable[Record], entries: Sequence[Entry]) -> list[Record]:
    """``records`` re-read against ``entries`` as the report does (aggregate.reread)."""
    from harness.aggregate import reread

    known = {e.id: e for e in entries}
    by_entry: dict[str, list[Record]] = {}
    for r in records:
        by_entry.setdefault(r.entry, []).append(r)
    out: list[Record] = []
    for entry_id, rs in by_entry.items():
        out += reread(rs, known[entry_id]) if entry_id in known else rs
    return out


def load_side(
    spec: str, repo: Path, machine: str | None = None, entries: Sequence[Entry] = ()
) -> Side:
    """The records ``spec`` names (a path, or a git revision), one machine's if given,
    read against ``entries`` as the report reads them."""
    path = Path(spec)
    if not path.is_absolute() and not path.exists():
        path = repo / spec
    if path.is_dir():
        loaded = Store(path).load()
    elif path.is_file():
        loaded = LoadResult()
        parse_bytes(path.read_bytes(), path, loaded)
    else:
        loaded = _from_git(spec, repo)
    records: Iterable[Record] = loaded.records
    if machine:
        records = [r for r in records if machine in (r.machine, r.machine_id)]
        if not records:
            found = sorted({str(r.machine_key) for r in loaded.records})
            raise DiffError(
                f"{spec}: no records of machine {machine!r} (machines there: "
                f"{', '.join(found) or 'none'})"
            )
    label = spec + (f" (machine {machine})" if machine else "")
    return Side(label, tuple(as_reported(latest(records), entries)), tuple(loaded.warnings))


def format_diff(d: Diff, limit: int = 50) -> list[str]:
    """The diff for a terminal or a CI log, most important first."""

    def about(side: Side) -> str:
        return f"{side.label}: {len(side.records)} records, machines {', '.join(side.machines) or 'none'}"

    lines = [
        f"old  {about(d.old)}",
        f"new  {about(d.new)}",
        f"{len(d.changes)} cells changed, {d.unchanged} unchanged; {len(d.only_new)} only in new, "
        f"{d.only_old} only in old",
    ]
    groups = [(title, d.by_category(key)) for key, title in CATEGORIES]
    groups.append(("only in new", list(d.only_new)))
    for title, changes in groups:
        lines.append(f"{title} ({len(changes)}){':' if changes else ''}")
        lines += [f"  {c.line()}" for c in changes[:limit]]
        if len(changes) > limit:
            lines.append(f"  ... and {len(changes) - limit} more")
    return lines


def html_changes(d: Diff, since: str) -> str:
    """A self-contained <section> for the top of index.html: "changed since <rev>"."""
    e = html.escape
    out = [
        '<section id="changed-since"><h2>Changed since ' + e(since) + "</h2>",
        f"<p>{len(d.changes)} cells changed, {d.unchanged} unchanged, {len(d.only_new)} new.</p>",
    ]
    for key, title in CATEGORIES:
        changes = d.by_category(key)
        if not changes:
            continue
        out.append(f"<h3>{e(title)} ({len(changes)})</h3><ul>")
        out += [f"<li><code>{e(c.line())}</code></li>" for c in changes]
        out.append("</ul>")
    out.append("</section>")
    return "".join(out)
