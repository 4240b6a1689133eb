"""What changed between two sets of records, cell by cell: the core of ``python -m harness
diff`` (harness/ci/diff.py) and of ``report --since`` (harness/report/pipeline.py).

The unit is a cell of a variant (entry, variant, cell): its set of outcome kinds over its
trials and machines (each machine's newest record per trial), so more trials of the same
outcome are no change, and a cell that turned flaky is. Changed cells are sorted into the
CATEGORIES; cells only one side has are counted, and those new in NEW listed. Records are
read as the report reads them (``as_reported``: against the entries as they are now,
``aggregate.reread``), so a diff shows what the report would change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.outcomes import Outcome
from harness.spec.entries import Entry
from harness.store.records import Record

__all__ = ["CATEGORIES", "Change", "Diff", "Side", "as_reported", "diff_records"]


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
