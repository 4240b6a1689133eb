"""The report step: records -> aggregates -> every output under results/, and write-back.

    results/compat/<entry id, / as __>.md   compatibility page per entry
    results/compat/<entry id, / as __>.png  heatmap per entry
    results/index.html                      one self-contained page
    results/compat.json                     the aggregates, for machines

A file is written only when its bytes change, so a rerun on the same records touches
nothing. With ``check=True`` nothing is written anywhere: the summary lists what is stale
(for CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.aggregate import Aggregates, aggregate
from harness.entries import Entry
from harness.records import Record
from harness.render import entry_slug
from harness.render.html import render_html
from harness.render.jsonout import render_json
from harness.render.markdown import render_entry
from harness.render.plots import render_png
from harness.writeback import write_back

__all__ = ["ReportSummary", "render_all"]


@dataclass(frozen=True)
class ReportSummary:
    aggregates: Aggregates = field(repr=False)
    outputs: tuple[Path, ...]  # every output path, written or not
    written: tuple[Path, ...]  # outputs whose bytes changed (in check mode: none)
    stale_outputs: tuple[Path, ...]  # outputs that differ from what the records give
    documents_updated: tuple[Path, ...]
    stale_documents: tuple[Path, ...]  # documents whose blocks differ from the records
    verdicts: dict[str, int]  # verdict -> count, over all entries

    @property
    def up_to_date(self) -> bool:
        return not self.stale_outputs and not self.stale_documents


def _put(path: Path, data: bytes, check: bool) -> tuple[bool, bool]:
    """(stale, written)"""
    try:
        stale = path.read_bytes() != data
    except FileNotFoundError:
        stale = True
    if stale and not check:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return True, True
    return stale, False


def render_all(
    records: Iterable[Record],
    entries: Sequence[Entry],
    results_dir: str | os.PathLike[str],
    *,
    check: bool = False,
) -> ReportSummary:
    results = Path(results_dir)
    aggs = aggregate(records, entries)
    outputs: list[tuple[Path, bytes]] = []
    compat = results / "compat"
    for a in aggs.entries:
        stem = entry_slug(a.id)
        outputs.append((compat / f"{stem}.md", render_entry(a).encode("utf-8")))
        outputs.append((compat / f"{stem}.png", render_png(a)))
    outputs.append((results / "index.html", render_html(aggs).encode("utf-8")))
    outputs.append((results / "compat.json", render_json(aggs).encode("utf-8")))

    written: list[Path] = []
    stale: list[Path] = []
    for path, data in outputs:
        is_stale, was_written = _put(path, data, check)
        if is_stale:
            stale.append(path)
        if was_written:
            written.append(path)

    known = {e.id: e for e in entries}
    updated: list[Path] = []
    stale_docs: list[Path] = []
    for a in aggs.entries:
        entry = known.get(a.id)
        if entry is None:
            continue
        result = write_back(a, entry.document, check=check)
        if result.changed:
            stale_docs.append(result.path)
        if result.written:
            updated.append(result.path)

    verdicts: dict[str, int] = {}
    for a in aggs.entries:
        for v in a.verdicts:
            verdicts[v.verdict] = verdicts.get(v.verdict, 0) + 1
    return ReportSummary(
        aggregates=aggs,
        outputs=tuple(p for p, _ in outputs),
        written=tuple(written),
        stale_outputs=tuple(stale),
        documents_updated=tuple(updated),
        stale_documents=tuple(stale_docs),
        verdicts=dict(sorted(verdicts.items())),
    )
