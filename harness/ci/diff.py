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

from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.aggregate.diff import CATEGORIES, Diff, Side, as_reported
from harness.spec.entries import Entry
from harness.store.changes import UnreadableRecords, records_at
from harness.store.jsonl import latest
from harness.store.records import Record

__all__ = ["DiffError", "format_diff", "load_side"]

DiffError = UnreadableRecords  # a side cannot be read: str() says which and why


def load_side(
    spec: str, repo: Path, machine: str | None = None, entries: Sequence[Entry] = ()
) -> Side:
    """The records ``spec`` names (a path, or a git revision), one machine's if given,
    read against ``entries`` as the report reads them."""
    loaded = records_at(spec, repo)
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
