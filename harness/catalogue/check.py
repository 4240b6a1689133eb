"""`harness check [ENTRY]`: validate entries without building or running anything.

Per entry: entry.yaml loads (schema, signatures compile, claims parse: entries.py), its
variants and repro.py's VARIANTS agree both ways, document.md has
every write-back block, the reproducer parses as Python 3.7 (the oldest target). Problems
are errors with file:line (exit 2); what is still to write (NOT_WRITTEN variants, TODO
lines) is listed as to-do and does not fail the check.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.spec.declared import parse_source
from harness.spec.entries import Entry, EntryError, load_entry

__all__ = ["EntryCheck", "check_entries", "check_entry"]

_TODO = re.compile(r"\bTODO\b")


@dataclass
class EntryCheck:
    dir: Path
    entry: Entry | None = None
    errors: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _todo_lines(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [f"{path}:{n}: {ln.strip()[:100]}" for n, ln in enumerate(lines, 1) if _TODO.search(ln)]


def check_entry(entry_dir: Path, repros_dir: Path) -> EntryCheck:
    from harness.report.writeback import BLOCKS, WritebackError, fill

    result = EntryCheck(entry_dir)
    try:
        entry = load_entry(entry_dir, repros_dir)
    except EntryError as exc:
        result.errors.append(str(exc))
        return result
    result.entry = entry
    yaml_path = entry_dir / "entry.yaml"
    try:
        fill(entry.document.read_text(encoding="utf-8"), dict.fromkeys(BLOCKS, ""), entry.document)
    except WritebackError as exc:
        result.errors.append(str(exc))
    try:
        parse_source(
            entry.repro.read_text(encoding="utf-8"), str(entry.repro), feature_version=(3, 7)
        )
    except SyntaxError as exc:
        result.errors.append(
            f"{entry.repro}:{exc.lineno}: not valid Python 3.7 (the oldest target): {exc.msg}"
        )
    unwritten = [v.name for v in entry.variants if not v.written]
    if unwritten:
        result.todos.append(
            f"{entry.repro}: {len(unwritten)} of {len(entry.variants)} variants not written "
            f"(NOT_WRITTEN; never run): {', '.join(unwritten)}"
        )
    for path in (yaml_path, entry.repro, entry.document):
        result.todos += _todo_lines(path)
    return result


def check_entries(repros_dir: Path, patterns: Sequence[str] = ()) -> list[EntryCheck]:
    """Every entry folder under repros/ (matched by id glob), each checked on its own."""
    results = []
    for yaml_path in sorted(repros_dir.rglob("entry.yaml")):
        entry_id = yaml_path.parent.relative_to(repros_dir).as_posix()
        if patterns and not any(fnmatch.fnmatchcase(entry_id, p) for p in patterns):
            continue
        results.append(check_entry(yaml_path.parent, repros_dir))
    return results
