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

import multiprocessing
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from harness.aggregate import Aggregates, aggregate, gc_paused
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


def _render_pages(aggs: Aggregates, compat: Path) -> list[tuple[Path, bytes]]:
    """Each entry's Markdown page and PNG heatmap."""
    out: list[tuple[Path, bytes]] = []
    for a in aggs.entries:
        stem = entry_slug(a.id)
        out.append((compat / f"{stem}.md", render_entry(a).encode("utf-8")))
        out.append((compat / f"{stem}.png", render_png(a)))
    return out


# below this many entries a child process costs more than it saves
_FORK_MIN_ENTRIES = 200


def _use_fork(workers: int | None, n_entries: int) -> bool:
    if workers is None:
        workers = 2 if n_entries >= _FORK_MIN_ENTRIES else 1
    # fork copies only the calling thread: with other threads alive (a run's pool winding
    # down) a lock they hold could stay held in the child, so render here instead
    return (
        workers > 1
        and sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


class _PagesChild:
    """The pages rendered in a forked child, in two steps like the serial path: render
    everything, then (once the parent has rendered its part too) write. The child shares
    the aggregates as they are (nothing pickled); the garbage collector stays off there
    too, so it does not touch (and copy) every object. When the child fails or dies, the
    parent does the step itself, so that the error is raised there."""

    def __init__(self, aggs: Aggregates, compat: Path, check: bool) -> None:
        self.aggs, self.compat, self.check = aggs, compat, check
        ctx = multiprocessing.get_context("fork")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=self._main, args=(child_conn,), name="render-pages", daemon=True)
        self.proc.start()
        child_conn.close()

    def _main(self, conn: Connection) -> None:
        try:
            pages = _render_pages(self.aggs, self.compat)
        except BaseException:
            conn.send(None)
            return
        try:
            conn.send(True)
            if conn.recv() != "write":
                return
        except (OSError, EOFError):  # the parent gave up on us
            return
        try:
            flags = [_put(path, data, self.check) for path, data in pages]
        except BaseException:
            conn.send(None)
            return
        conn.send(flags)

    def _reply(self) -> Any:
        try:
            return self.conn.recv()
        except EOFError:  # the child died without a word
            return None

    def rendered(self) -> list[tuple[Path, bytes]] | None:
        """None when the pages are rendered in the child, else the pages rendered here."""
        if self._reply() is True:
            return None
        self.close()
        return _render_pages(self.aggs, self.compat)

    def write(self) -> list[tuple[bool, bool]]:
        self.conn.send("write")
        flags = self._reply()
        self.close()
        if flags is None:
            flags = [_put(path, data, self.check) for path, data in _render_pages(self.aggs, self.compat)]
        return flags

    def close(self) -> None:
        # called once the child has answered its last message, or to abandon it while it
        # renders (never while it writes)
        self.conn.close()
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()


def render_all(
    records: Iterable[Record],
    entries: Sequence[Entry],
    results_dir: str | os.PathLike[str],
    *,
    check: bool = False,
    workers: int | None = None,
) -> ReportSummary:
    """``workers``: 2 renders the per-entry pages (Markdown, PNG) in a forked child while
    this process renders index.html and compat.json; None chooses 2 for large results
    where forking is safe, else 1. The bytes and the summary do not depend on it."""
    results = Path(results_dir)
    with gc_paused():
        aggs = aggregate(records, entries)
        compat = results / "compat"
        child = _PagesChild(aggs, compat, check) if _use_fork(workers, len(aggs.entries)) else None
        try:
            pages = _render_pages(aggs, compat) if child is None else None
            whole = [
                (results / "index.html", render_html(aggs).encode("utf-8")),
                (results / "compat.json", render_json(aggs).encode("utf-8")),
            ]
            if child is not None:
                pages = child.rendered()
                if pages is not None:
                    child = None
        except BaseException:
            if child is not None:
                child.close()
            raise
        # everything rendered: write, pages first
        if child is not None:
            page_flags = child.write()
        else:
            assert pages is not None
            page_flags = [_put(path, data, check) for path, data in pages]
        whole_flags = [_put(path, data, check) for path, data in whole]

    outputs = [compat / f"{entry_slug(a.id)}.{ext}" for a in aggs.entries for ext in ("md", "png")]
    outputs += [path for path, _ in whole]
    written: list[Path] = []
    stale: list[Path] = []
    for path, (is_stale, was_written) in zip(outputs, [*page_flags, *whole_flags], strict=True):
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
        outputs=tuple(outputs),
        written=tuple(written),
        stale_outputs=tuple(stale),
        documents_updated=tuple(updated),
        stale_documents=tuple(stale_docs),
        verdicts=dict(sorted(verdicts.items())),
    )
