"""Write-back: fill the marked blocks of an entry's own document with measured results.

A document holds three blocks, each once, in any order:

    <!-- harness:measured-versions:begin -->
    ...replaced...
    <!-- harness:measured-versions:end -->

(``measured-rates`` and ``verification`` alike). Only the text between a begin and its
end marker is replaced; every byte outside, the markers included, stays as it was. The
generated text depends only on the records (the date is that of the newest record), so
writing back twice changes nothing. A missing, repeated, unknown, nested or unbalanced
marker is an error naming the file and the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.aggregate import EntryAggregate
from harness.atomic import Staged, write_atomically
from harness.errors import HarnessError
from harness.report.render.markdown import (
    measured_rates_block,
    measured_versions_block,
    verification_block,
)

__all__ = [
    "BLOCKS",
    "OPTIONAL_BLOCKS",
    "WritebackError",
    "WritebackResult",
    "blocks_for",
    "fill",
    "write_back",
    "write_blocks",
]

BLOCKS = ("measured-versions", "measured-rates", "verification")
# filled where the document carries it: a Markdown entry's (the seeds' format) suggested
# corrections to its own fields (harness/catalogue/corrections.py, markdown_suggestions)
OPTIONAL_BLOCKS = ("suggested-corrections",)
_MARKER = re.compile(r"<!--\s*harness:([A-Za-z0-9_-]+):(begin|end)\s*-->")


class WritebackError(HarnessError):
    """An entry document whose marked blocks cannot be filled."""


@dataclass(frozen=True)
class WritebackResult:
    path: Path
    changed: bool  # the document differs (or, in check mode, would differ) from its new text
    written: bool


def blocks_for(agg: EntryAggregate) -> dict[str, str]:
    return {
        "measured-versions": measured_versions_block(agg),
        "measured-rates": measured_rates_block(agg),
        "verification": verification_block(agg),
    }


def fill(text: str, blocks: Mapping[str, str], path: str | os.PathLike[str] = "<document>") -> str:
    """``text`` with each block's inside replaced by ``blocks[name]``; pure."""
    newline = "\r\n" if "\r\n" in text else "\n"
    spans: dict[str, tuple[int, int]] = {}
    open_name: str | None = None
    open_at = 0
    open_line = 0
    for m in _MARKER.finditer(text):
        name, edge = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if name not in BLOCKS and name not in OPTIONAL_BLOCKS:
            known = ", ".join((*BLOCKS, *OPTIONAL_BLOCKS))
            raise WritebackError(path, line, f"unknown block {name!r}; known blocks: {known}")
        if edge == "begin":
            if open_name is not None:
                raise WritebackError(
                    path,
                    line,
                    f"'{name}:begin' inside the open block {open_name!r} (begun at line {open_line})",
                )
            if name in spans:
                raise WritebackError(path, line, f"block {name!r} appears twice")
            open_name, open_at, open_line = name, m.end(), line
        else:
            if open_name != name:
                what = (
                    f"block {open_name!r} (begun at line {open_line}) is still open"
                    if open_name
                    else "no block is open"
                )
                raise WritebackError(path, line, f"'{name}:end' without its begin: {what}")
            spans[name] = (open_at, m.start())
            open_name = None
    if open_name is not None:
        raise WritebackError(
            path, open_line, f"block {open_name!r} has no '<!-- harness:{open_name}:end -->'"
        )
    missing = [b for b in BLOCKS if b in blocks and b not in spans]
    if missing:
        raise WritebackError(
            path,
            None,
            "missing block(s) "
            + ", ".join(
                f"'<!-- harness:{b}:begin -->' … '<!-- harness:{b}:end -->'" for b in missing
            ),
        )
    out: list[str] = []
    pos = 0
    for name, (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        out.append(text[pos:start])
        body = blocks.get(name)
        if body is None:
            out.append(text[start:end])
        else:
            out.append(newline + body.replace("\n", newline).rstrip() + newline)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def write_back(
    agg: EntryAggregate, document: str | os.PathLike[str], *, check: bool = False
) -> WritebackResult:
    return write_blocks(blocks_for(agg), document, check=check)


def write_blocks(
    blocks: Mapping[str, str],
    document: str | os.PathLike[str],
    *,
    check: bool = False,
    staged: Staged | None = None,
) -> WritebackResult:
    """Fill ``document``'s marked blocks with ``blocks`` (``blocks_for``'s texts)."""
    path = Path(document)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise WritebackError(path, None, f"cannot read: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise WritebackError(path, line, "not valid UTF-8") from exc
    new = fill(text, blocks, path)
    changed = new != text
    if changed and not check:
        if staged is not None:
            staged.put(path, new.encode("utf-8"), keep_mode=True)
        else:
            write_atomically(path, new.encode("utf-8"), keep_mode=True)
    return WritebackResult(path, changed, changed and not check)
