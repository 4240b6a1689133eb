"""The report step: records -> aggregates -> every output under results/, and write-back.

    results/compat/<entry id, / as __>.md   compatibility page per entry
    results/compat/<entry id, / as __>.png  heatmap per entry
    results/index.html                      the page: every entry's heatmaps and verdicts
    results/cells/NNNN.js                   the details of each cell's trials, which the
                                            page loads when a cell is looked at (64
                                            entries a file)
    results/compat.json                     the aggregates, for machines

Every entry is aggregated at once by the columnar engine (harness/aggregate/cells.py).
Entries are then independent until index.html and compat.json are put together, so the
entries are split into runs of consecutive ids (shards), one per worker process: each
renders its entries' files, its share of index.html and of compat.json; the parent puts
those two together in entry order. The bytes do not depend on the split.

A file is written only when its bytes change, so a rerun on the same records touches
nothing. With ``check=True`` nothing is written anywhere: the summary lists what is stale
(for CI).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

from harness.aggregate import EntryAggregate, aggregate_table
from harness.atomic import write_atomically
from harness.report.cache import (
    CachedEntry,
    RenderCache,
    entry_definition,
    entry_key,
    record_digests,
    sha256,
)
from harness.report.findings import fill_findings, render_findings
from harness.report.render import entry_slug
from harness.report.render.html import (
    assemble_html,
    cell_file_name,
    data_files,
    html_part,
    render_cell_data,
)
from harness.report.render.jsonout import entry_json, json_document
from harness.report.render.kbdomain import (
    DomainSummary,
    domain_name,
    render_domain_html,
    render_domain_markdown,
    summarize_domain,
)
from harness.report.render.markdown import render_entry
from harness.report.render.plots import render_png
from harness.report.writeback import WritebackResult, blocks_for, write_blocks
from harness.spec.entries import Entry
from harness.spec.triage import Triage
from harness.store.columnar import RecordTable
from harness.store.records import Record

__all__ = ["ReportSummary", "render_all"]


@dataclass(frozen=True)
class ReportSummary:
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
        write_atomically(path, data)
        return True, True
    return stale, False


# -- one shard: a run of consecutive entries -------------------------------------------


@dataclass(frozen=True)
class _Job:
    items: Sequence[tuple[int, EntryAggregate]]  # (its index among all entries, aggregate)
    entries: Sequence[Entry]
    results: Path
    check: bool


@dataclass(frozen=True)
class _Rendered:
    shares: list[CachedEntry]  # per entry: what the parent puts together, and caches
    pages: list[tuple[Path, bytes]]  # the entries' pages and PNGs


Flags = tuple[Path, bool, bool]  # a file: (path, stale, written)


def _render_entry(
    i: int, a: EntryAggregate, entry: Entry | None, results: Path
) -> tuple[CachedEntry, list[tuple[Path, bytes]]]:
    stem = entry_slug(a.id)
    pages = [
        (results / "compat" / f"{stem}.md", render_entry(a).encode("utf-8")),
        (results / "compat" / f"{stem}.png", render_png(a)),
    ]
    share = CachedEntry(
        html=html_part([a], i),
        json=entry_json(a).encode("utf-8"),
        cell_data=render_cell_data(a),
        verdicts=tuple(v.verdict for v in a.verdicts),
        pages=tuple((path.relative_to(results).as_posix(), sha256(blob)) for path, blob in pages),
        documents=((str(entry.document), blocks_for(a)),) if entry is not None else (),
    )
    return share, pages


def _render(job: _Job) -> _Rendered:
    known = {e.id: e for e in job.entries}
    shares: list[CachedEntry] = []
    pages: list[tuple[Path, bytes]] = []
    for i, a in job.items:
        share, files = _render_entry(i, a, known.get(a.id), job.results)
        shares.append(share)
        pages += files
    return _Rendered(shares, pages)


def _write(rendered: _Rendered, check: bool) -> list[Flags]:
    return [(path, *_put(path, blob, check)) for path, blob in rendered.pages]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while rendering: its passes would walk (and,
    in a forked child, copy) every object of the aggregates again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# below this many entries a child process costs more than it saves
_FORK_MIN_ENTRIES = 200


def _workers(workers: int | None, n_entries: int) -> int:
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if n_entries >= _FORK_MIN_ENTRIES else 1
    workers = max(1, min(workers, n_entries))
    # fork copies only the calling thread: with other threads alive (a run's pool winding
    # down) a lock they hold could stay held in the child, so render here instead
    if (
        workers > 1
        and sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    ):
        return workers
    return 1


def _use_fork(workers: int | None, n_entries: int) -> bool:
    return _workers(workers, n_entries) > 1


Item = tuple[int, EntryAggregate]  # an entry to render: (its index among all, aggregate)


def _shards(items: Sequence[Item], n: int) -> list[list[Item]]:
    """The entries cut into at most ``n`` runs of consecutive entries with about as many
    runs each (an entry without runs counts as one)."""
    weights = [max(1, a.n_runs) for _, a in items]
    total = sum(weights)
    cuts = [0]
    acc = 0
    for i, weight in enumerate(weights):
        # cut before this entry if that comes nearer the next share than after it
        if i and len(cuts) < n and acc + weight / 2 > total * len(cuts) / n:
            cuts.append(i)
        acc += weight
    cuts.append(len(items))
    return [list(items[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _end_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux
    PR_SET_PDEATHSIG); where that is not available the pipe's EOF ends it instead."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


class _Child:
    """One shard rendered in a forked child, in two steps like the parent's own: render
    everything, then (once every shard is rendered) write. The child shares the records
    as they are (nothing pickled); the garbage collector stays off there too, so it does
    not touch (and copy) every object. When the child fails or dies, the parent does the
    step itself, so that the error is raised there."""

    # the parent's ends of every child's pipe: a child closes its siblings' ends, so that
    # once the parent is gone (even SIGKILLed) its own pipe reads EOF and it ends
    _parent_ends: ClassVar[list[Connection]] = []

    def __init__(self, job: _Job) -> None:
        self.job = job
        self.rendered: _Rendered | None = None  # set when the parent renders the shard itself
        ctx = multiprocessing.get_context("fork")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(
            target=self._main, args=(child_conn, os.getpid()), name="render-shard", daemon=True
        )
        self.proc.start()
        child_conn.close()
        _Child._parent_ends.append(self.conn)

    def _main(self, conn: Connection, parent: int) -> None:
        _end_with_parent(parent)
        for end in _Child._parent_ends:
            with contextlib.suppress(OSError):
                end.close()
        try:
            rendered = _render(self.job)
        except BaseException:
            conn.send(None)
            return
        try:
            conn.send(rendered.shares)
            if conn.recv() != "write":
                return
        except (OSError, EOFError):  # the parent gave up on us
            return
        try:
            written = _write(rendered, self.job.check)
        except BaseException:
            conn.send(None)
            return
        conn.send(written)

    def _reply(self) -> Any:
        try:
            return self.conn.recv()
        except EOFError:  # the child died without a word
            return None

    def shares(self) -> list[CachedEntry]:
        shares = self._reply()
        if isinstance(shares, list):
            return shares
        self.close()
        self.rendered = _render(self.job)
        return self.rendered.shares

    def start_writing(self) -> None:
        if self.rendered is None:
            self.conn.send("write")

    def written(self) -> list[Flags]:
        if self.rendered is not None:
            return _write(self.rendered, self.job.check)
        written = self._reply()
        self.close()
        if not isinstance(written, list):
            return _write(_render(self.job), self.job.check)
        return written

    def close(self) -> None:
        # called once the child has answered its last message, or to abandon it while it
        # renders (never while it writes)
        with contextlib.suppress(ValueError):
            _Child._parent_ends.remove(self.conn)
        self.conn.close()
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()


def _domain_pages(
    results: Path, compat: Mapping[str, Any], domains: Sequence[tuple[Triage, Mapping[str, Any]]]
) -> tuple[list[tuple[Path, bytes]], str, list[DomainSummary]]:
    """Each knowledge-base domain's summary page (results/domains/<name>.md), its section of
    the front page and its summary, from the aggregates just rendered (``compat``: the
    compat.json document; harness/report/render/kbdomain.py)."""
    if not domains:
        return [], "", []
    by_id = {e["id"]: e for e in compat["entries"]}
    pages, sections, summaries = [], [], []
    for triage, found in domains:
        summary = summarize_domain(triage, by_id, found)
        page = f"domains/{domain_name(triage)}.md"
        pages.append((results / page, render_domain_markdown(summary).encode("utf-8")))
        sections.append(render_domain_html(summary, page))
        summaries.append(summary)
    return pages, "".join(sections), summaries


def _findings(
    readme: Path | None,
    results: Path,
    compat: Mapping[str, Any],
    summaries: Sequence[DomainSummary],
    check: bool,
) -> list[WritebackResult]:
    """The README's findings block (harness/report/findings.py) written from the records;
    nothing where there is no README or it holds no findings markers."""
    if readme is None or not readme.is_file():
        return []
    text = readme.read_bytes().decode("utf-8")
    pages = [
        Path(os.path.relpath(results / "domains" / f"{s.name}.md", readme.parent)).as_posix()
        for s in summaries
    ]
    new = fill_findings(text, render_findings(compat, summaries, pages), readme)
    if new is None:
        return []
    changed = new != text
    if changed and not check:
        write_atomically(readme, new.encode("utf-8"), keep_mode=True)
    return [WritebackResult(readme, changed, changed and not check)]


def render_all(
    records: RecordTable | Iterable[Record],
    entries: Sequence[Entry],
    results_dir: str | os.PathLike[str],
    *,
    check: bool = False,
    workers: int | None = None,
    prelude: str = "",
    domains: Sequence[tuple[Triage, Mapping[str, Any]]] = (),
    cache: bool = True,
    readme: str | os.PathLike[str] | None = None,
) -> ReportSummary:
    """``records``: the records to report (the store's newest, as the engine holds them:
    harness/store/columnar.py), or Records in hand. ``workers``: how many processes render (the
    others forked from this one, once everything is aggregated); None chooses up to 4, as
    many as there are CPUs, for large results where forking is safe, else 1. ``cache``:
    take an entry whose inputs have not changed from results/.cache/render
    (harness/report/cache.py), and keep what is rendered there (not in check mode). The
    bytes and the summary depend on none of these. ``readme``: the README whose findings
    block (harness/report/findings.py) is written from the records, like an entry's
    document."""
    results = Path(results_dir)
    table = records if isinstance(records, RecordTable) else RecordTable.of(records)
    n_records = len(table)
    known = {e.id: e for e in entries}
    stored = table.con.execute("SELECT DISTINCT entry FROM records").fetchall()
    ids = sorted({row[0] for row in stored} | set(known))

    store = RenderCache(results) if cache else None
    keys: list[str] = []
    shares: dict[int, CachedEntry] = {}
    if store is not None:
        digests = record_digests(table)
        for i, eid in enumerate(ids):
            keys.append(
                entry_key(
                    eid,
                    digests.get(eid, ""),
                    entry_definition(known.get(eid)),
                    cell_file_name(i),
                )
            )
            hit = store.get(keys[i])
            if hit is not None:
                shares[i] = hit
    cached = set(shares)
    missed = [i for i in range(len(ids)) if i not in cached]
    if missed:
        wanted = [ids[i] for i in missed] if cached else None
        aggs = aggregate_table(table, entries, ids=wanted)
    else:
        aggs = []
    items: list[Item] = list(zip(missed, aggs, strict=True))

    with _gc_paused():
        jobs = [
            _Job(part, entries, results, check)
            for part in _shards(items, _workers(workers, len(items)))
        ]
        children: list[_Child] = []
        try:
            children = [_Child(job) for job in jobs[1:]]
            mine = _render(jobs[0]) if jobs else _Rendered([], [])
            rendered = [mine.shares, *(c.shares() for c in children)] if jobs else []
            for job, job_shares in zip(jobs, rendered, strict=True):
                for (i, _), share in zip(job.items, job_shares, strict=True):
                    shares[i] = share
            ordered = [shares[i] for i in range(len(ids))]
            data = [
                (results / name, text.encode("utf-8"))
                for name, text in data_files([s.cell_data for s in ordered])
            ]
            compat = json_document(n_records, b",".join(s.json for s in ordered))
            compat_doc = json.loads(compat) if domains or readme is not None else {}
            pages, sections, summaries = _domain_pages(results, compat_doc, domains)
            whole = [
                *data,
                (
                    results / "index.html",
                    assemble_html([s.html for s in ordered], prelude + sections).encode("utf-8"),
                ),
                (results / "compat.json", compat),
                *pages,
            ]
        except BaseException:
            for c in children:
                c.close()
            raise
        # everything rendered: write, each shard's files in its process, then the whole files
        for c in children:
            c.start_writing()
        writes = [_write(mine, check), *(c.written() for c in children)] if jobs else []
        whole_flags = [_put(path, blob, check) for path, blob in whole]
        documents = [
            write_blocks(texts, document, check=check)
            for s in ordered
            for document, texts in s.documents
        ]
        documents += _findings(
            Path(readme) if readme is not None else None, results, compat_doc, summaries, check
        )

    # in an order that does not depend on the shards or the cache: the entries' files (in
    # entry order), the data files, the whole files
    page_flags: dict[int, list[Flags]] = {
        i: [(results / name, False, False) for name, _ in shares[i].pages] for i in cached
    }
    for job, flags in zip(jobs, writes, strict=True):
        per_entry = iter(flags)
        for i, _ in job.items:
            page_flags[i] = [next(per_entry) for _ in shares[i].pages]
    files = [f for i in range(len(ids)) for f in page_flags[i]]
    files += [(path, *flags) for (path, _), flags in zip(whole, whole_flags, strict=True)]
    outputs = [path for path, _, _ in files]
    written_paths = [path for path, _, was_written in files if was_written]
    stale = [path for path, is_stale, _ in files if is_stale]

    if store is not None and not check:
        for i in missed:
            store.put(keys[i], shares[i])
        store.prune(set(keys))

    verdicts: dict[str, int] = {}
    for s in ordered:
        for v in s.verdicts:
            verdicts[v] = verdicts.get(v, 0) + 1
    return ReportSummary(
        outputs=tuple(outputs),
        written=tuple(written_paths),
        stale_outputs=tuple(stale),
        documents_updated=tuple(d.path for d in documents if d.written),
        stale_documents=tuple(d.path for d in documents if d.changed),
        verdicts=dict(sorted(verdicts.items())),
    )
