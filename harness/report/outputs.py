"""The report step: records -> aggregates -> every output under results/, and write-back.

    results/compat/<entry id, / as __>.md   compatibility page per entry
    results/compat/<entry id, / as __>.png  heatmap per entry
    results/index.html                      the page: a row per entry, and the counts
    results/sections/NNNN.js                each entry's section of the page (heatmaps,
                                            rates, verdicts), which the page loads when
                                            the entry is opened (16 entries a file)
    results/cells/NNNN.js                   the details of each cell's trials, which the
                                            page loads when a cell is looked at (64
                                            entries a file)
    results/answers.js                      what the page's "paste your error" box
                                            matches an error against, and answers/NNNN.js
                                            its entries' variants, loaded for the entries
                                            it answers with (render/answers.py)
    results/aggregates/NNNN.jsonl           the aggregates, for machines: an entry a
                                            line (16 entries a file), and
    results/compat.json                     their index (render/jsonout.py)

Every entry is aggregated at once by the columnar engine (harness/aggregate/cells.py).
Entries are then independent until index.html and compat.json are put together, so the
entries are split into runs of consecutive ids (shards), one per process: the first is
rendered here, the others by a pool of workers forked from this process (``_pool``). Each
renders its entries' files, its share of index.html and of compat.json; this process puts
those two together in entry order and, once every shard is rendered, writes everything.
The bytes do not depend on the split.

A file is written only when its bytes change, so a rerun on the same records touches
nothing. The files that entries removed since leave (their pages and PNGs, the files of a
few entries numbered past the last) are removed (``_leftovers``). With ``check=True`` nothing is
written or removed anywhere: the summary lists what is stale or left over (for CI).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.aggregate import EntryAggregate, aggregate_table
from harness.aggregate.smells import Smell, find_smells
from harness.atomic import Staged, write_atomically
from harness.errors import HarnessError
from harness.gcpause import gc_paused
from harness.paths import remove_files
from harness.report.assembly import (
    Assembly,
    Kept,
    part_variants,
    split_lines,
)
from harness.report.cache import (
    CachedEntry,
    RenderCache,
    code_fingerprint,
    entry_definition,
    entry_key,
    record_digests,
    sha256,
)
from harness.report.findings import fill_findings, render_findings
from harness.report.lead import latest_snapshot, markdown_lead
from harness.report.progress import ReportProgress
from harness.report.render import answers as answers_module
from harness.report.render import entry_slug
from harness.report.render import html as html_module
from harness.report.render import jsonout as jsonout_module
from harness.report.render.answers import (
    AnswersText,
    answers_bytes,
    answers_head,
    answers_index,
    answers_layout,
    answers_part,
    answers_part_name,
    answers_spliced,
    entry_answers,
    named_heads,
)
from harness.report.render.html import (
    ANSWERS_FILE,
    assemble_html,
    cell_file_name,
    html_part,
    render_cell_data,
    section_file_name,
)
from harness.report.render.jsonout import COMPAT_FILE, SCHEMA, compat_index, entry_json, part_name
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
from harness.spec.entries import Entry, rewritten_since
from harness.spec.triage import Triage
from harness.store.columnar import RecordTable
from harness.store.records import Record

__all__ = ["NeedsEveryEntry", "Previous", "ReportSummary", "ReportWriteError", "render_all"]


class ReportWriteError(HarnessError):
    """An output the report could not write (a full disk, a read-only folder): nothing was
    changed, every output is as it was."""

    def __init__(self, exc: OSError) -> None:
        where = exc.filename or "results/"
        super().__init__(
            where,
            None,
            f"cannot write: {exc.strerror or exc}; no output was changed (the report writes "
            "all its files or none)",
        )


@dataclass(frozen=True)
class ReportSummary:
    outputs: tuple[Path, ...]  # every output path, written or not
    written: tuple[Path, ...]  # outputs whose bytes changed (in check mode: none)
    stale_outputs: tuple[Path, ...]  # outputs that differ from what the records give
    documents_updated: tuple[Path, ...]
    stale_documents: tuple[Path, ...]  # documents whose blocks differ from the records
    verdicts: dict[str, int]  # verdict -> count, over all entries
    # per entry: the digest of its records and how many (the basis of a later report that
    # reads only the entries appended to: see render_all's ``basis``)
    entries: Mapping[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    records: int = 0  # how many records the report is of
    # what the whole files were put together from (harness/report/assembly.py; None in check
    # mode and without the render cache)
    assembly: Assembly | None = None
    # files of entries not reported any more (pages, numbered files past the last: see
    # ``_leftovers``): removed (in check mode: left, and the report is not up to date)
    leftovers: tuple[Path, ...] = ()

    @property
    def up_to_date(self) -> bool:
        return not self.stale_outputs and not self.stale_documents and not self.leftovers


def _put(
    path: Path, data: bytes, check: bool, staged: Staged | None = None, old: bytes | None = None
) -> tuple[bool, bool]:
    """(stale, written): written into ``staged`` where given (renamed with the others at the
    end), else at once. ``old``: the file's bytes, where the caller has just read them."""
    try:
        stale = (path.read_bytes() if old is None else old) != data
    except FileNotFoundError:
        stale = True
    if stale and not check:
        if staged is not None:
            staged.put(path, data)
        else:
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
    smells: Mapping[str, Sequence[Smell]]  # per entry id rendered (harness/aggregate/smells.py)


@dataclass(frozen=True)
class _Rendered:
    shares: list[CachedEntry]  # per entry: what the parent puts together, and caches
    pages: list[tuple[Path, bytes]]  # the entries' pages and PNGs


Flags = tuple[Path, bool, bool]  # a file: (path, stale, written)


def _render_entry(
    a: EntryAggregate, entry: Entry | None, results: Path, smells: Sequence[Smell] = ()
) -> tuple[CachedEntry, list[tuple[Path, bytes]]]:
    stem = entry_slug(a.id)
    correction = None
    if entry is not None and entry.origin.get("record") and entry.origin.get("domain"):
        correction = (str(entry.origin.get("id")), str(entry.origin["domain"]))
    pages = [
        (results / "compat" / f"{stem}.md", render_entry(a, smells, correction).encode("utf-8")),
        (results / "compat" / f"{stem}.png", render_png(a)),
    ]
    torch_only = [a.id] if entry is not None and not entry.uses_lightning else []
    share = CachedEntry(
        html=html_part(
            [a], torch_only=torch_only, corrections={a.id: correction} if correction else None
        ),
        json=entry_json(a).encode("utf-8"),
        cell_data=render_cell_data(a),
        answers=entry_answers(a, entry),
        verdicts=tuple(v.verdict for v in a.verdicts),
        pages=tuple((path.relative_to(results).as_posix(), sha256(blob)) for path, blob in pages),
        documents=((str(entry.document), _document_blocks(a, entry)),) if entry is not None else (),
    )
    return share, pages


def _document_blocks(a: EntryAggregate, entry: Entry) -> dict[str, str]:
    """The entry document's blocks; a Markdown entry's (the seeds' format) also its
    suggested corrections, filled where the document carries that block."""
    blocks = blocks_for(a)
    if entry.origin.get("format") == "markdown":
        from harness.catalogue.corrections import markdown_suggestions

        blocks["suggested-corrections"] = markdown_suggestions(entry, a)
    return blocks


def _render(job: _Job) -> _Rendered:
    known = {e.id: e for e in job.entries}
    shares: list[CachedEntry] = []
    pages: list[tuple[Path, bytes]] = []
    for _, a in job.items:
        share, files = _render_entry(a, known.get(a.id), job.results, job.smells.get(a.id, ()))
        shares.append(share)
        pages += files
    return _Rendered(shares, pages)


def _write(rendered: _Rendered, check: bool, staged: Staged | None = None) -> list[Flags]:
    return [(path, *_put(path, blob, check, staged)) for path, blob in rendered.pages]


# below this many entries a child process costs more than it saves
_FORK_MIN_ENTRIES = 200
# shards per process: small enough that the processes finish together (the caller takes
# the next shard that no worker has begun), few enough that each costs little to hand over
_SHARDS_PER_PROCESS = 32


def _can_fork() -> bool:
    # fork copies only the calling thread: with other threads alive (a run's pool winding
    # down) a lock they hold could stay held in the child, so render here instead
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


def _workers(workers: int | None, n_entries: int) -> int:
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if n_entries >= _FORK_MIN_ENTRIES else 1
    workers = max(1, min(workers, n_entries))
    return workers if workers > 1 and _can_fork() else 1


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


# -- the shards after the first, rendered by a pool of forked workers ---------------------

_jobs: Sequence[_Job] = ()  # in a worker: every shard, as the parent held them when it forked
_PARENT_POLL_S = 0.2


def _start_worker(jobs: Sequence[_Job], parent: int) -> None:
    """A worker's initializer. ``jobs`` come by fork, not pickled: the worker reads the
    parent's aggregates as they are. The garbage collector stays off as the parent left it,
    so that it does not walk (and copy) every object. Ctrl-C is the parent's to handle (it
    stops the workers). A thread ends the worker when its parent is gone (even SIGKILLed):
    the pool's queues never tell a worker blocked on them, since its siblings hold their
    other ends."""
    global _jobs
    _jobs = jobs
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _render_shard(k: int) -> _Rendered:
    return _render(_jobs[k])


@contextlib.contextmanager
def _pool(jobs: Sequence[_Job], workers: int) -> Iterator[dict[int, Future[_Rendered]]]:
    """The shards ``jobs[1:]`` offered to ``workers`` forked workers, last shard first, while
    the caller renders ``jobs[0]`` and then takes the next shards no worker has begun
    (``_share_out``): a future per shard offered, by its index. A worker sends back each
    shard's texts and files as it finishes it (while the caller still renders); the caller
    writes them once every shard is rendered (so that a failure anywhere writes nothing)."""
    if len(jobs) < 2 or workers < 1:
        yield {}
        return
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs) - 1),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(jobs, os.getpid()),
    )
    try:
        yield {k: pool.submit(_render_shard, k) for k in reversed(range(1, len(jobs)))}
    except BaseException:
        # a failure or Ctrl-C here: the shards are not wanted, so the workers stop now
        # rather than when they are done
        _terminate(pool)
        raise
    pool.shutdown(wait=True)


def _entries(n: int) -> str:
    return f"{n:,} {'entry' if n == 1 else 'entries'}"


def _share_out(
    jobs: Sequence[_Job],
    futures: Mapping[int, Future[_Rendered]],
    advance: Callable[[int], None] = lambda n: None,
) -> list[_Rendered]:
    """Every shard rendered, in order: the first here, then here each next one that no
    worker has begun (its future cancelled before it started; the workers take the shards
    from the last), the rest as the workers rendered them. So the processes finish
    together whatever each shard costs. ``advance`` is told the entries of each shard done,
    wherever it was rendered."""
    for k, future in futures.items():
        future.add_done_callback(functools.partial(_done, advance, len(jobs[k].items)))
    done: dict[int, _Rendered] = {}
    for k in range(len(jobs)):
        if k in futures and not futures[k].cancel():
            break  # a worker has begun it, and every shard after it
        done[k] = _render(jobs[k])
        advance(len(jobs[k].items))
    return [
        done[k] if k in done else _rendered(jobs[k], futures[k], advance) for k in range(len(jobs))
    ]


def _done(advance: Callable[[int], None], n: int, future: Future[_Rendered]) -> None:
    """A worker's shard done (not one cancelled to be rendered here, nor lost with its
    worker: ``_rendered`` renders that one and counts it)."""
    if not future.cancelled() and future.exception() is None:
        advance(n)


def _terminate(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    # before 3.14, what terminate_workers does, with the pool's table of its processes
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.terminate()
    for w in workers:
        w.join()


def _rendered(
    job: _Job, future: Future[_Rendered], advance: Callable[[int], None] = lambda n: None
) -> _Rendered:
    """The worker's result; a worker that died (killed, out of memory) loses nothing: its
    shard is rendered here. An error in rendering is raised here, as the worker's."""
    try:
        return future.result()
    except BrokenProcessPool:
        rendered = _render(job)
        advance(len(job.items))
        return rendered


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
    staged: Staged | None = None,
    rewritten: Mapping[tuple[str, str], str] | None = None,
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
    snapshot = latest_snapshot(results, rewritten)
    link = ""
    if snapshot is not None:
        where = results / "nightly" / f"{snapshot['night']}.json"
        link = Path(os.path.relpath(where, readme.parent)).as_posix()
    block = markdown_lead(snapshot, link) + render_findings(compat, summaries, pages)
    new = fill_findings(text, block, readme)
    if new is None:
        return []
    changed = new != text
    if changed and not check:
        if staged is not None:
            staged.put(readme, new.encode("utf-8"), keep_mode=True)
        else:
            write_atomically(readme, new.encode("utf-8"), keep_mode=True)
    return [WritebackResult(readme, changed, changed and not check)]


class NeedsEveryEntry(Exception):
    """A report of the entries appended to (render_all's ``basis``) that must render an
    entry it does not hold the records of: the caller loads every entry and reports again
    (never the user's problem, so not a HarnessError)."""


def _entry_records(
    table: RecordTable, basis: Mapping[str, tuple[str, int]] | None, digest: bool
) -> dict[str, tuple[str, int]]:
    """Per entry with records: the digest of its records (``digest``; else "") and how
    many: from the table, and where it holds only the entries appended to, from ``basis``
    for the others."""
    counts = dict(
        table.con.execute("SELECT entry, count(*) FROM records GROUP BY entry").fetchall()
    )
    digests = record_digests(table) if digest else {}
    found = {e: (digests.get(e, ""), counts[e]) for e in counts}
    if table.touched is None:
        return found
    if basis is None:
        raise ValueError("a table of the entries appended to needs the basis it was read since")
    return {**{e: v for e, v in basis.items() if e not in table.touched}, **found}


def _keys(
    digests: Mapping[str, tuple[str, int]], ids: Sequence[str], known: Mapping[str, Entry]
) -> list[str]:
    """Each entry's render key (harness/report/cache.py), in ``ids`` order."""
    return [
        entry_key(eid, digests.get(eid, ("", 0))[0], entry_definition(known.get(eid)))
        for eid in ids
    ]


@dataclass(frozen=True)
class Previous:
    """The last report's assembly (harness/report/assembly.py) and the files the report state
    vouches for as that report left them (absolute paths: its outputs, the documents)."""

    assembly: Assembly
    vouched: frozenset[str]


def _groups() -> dict[str, tuple[int, Callable[[int], str]]]:
    """The whole files of a few entries each: (entries a file, its name from an entry's
    index), as the renderers number them now."""
    return {
        "cells": (html_module.CELL_FILE_ENTRIES, cell_file_name),
        "sections": (html_module.SECTION_FILE_ENTRIES, section_file_name),
        "answers": (answers_module.ANSWERS_PART_ENTRIES, answers_part_name),
        "aggregates": (jsonout_module.PART_ENTRIES, part_name),
    }


@dataclass
class _Plan:
    """What a report keeps of the last one's whole files: per entry, what it takes from the
    assembly (``kept``); the files of a few entries left as they are (``unchanged``) or put
    together from their entries' old lines (``lines``: per entry of the file, its line as
    the last report wrote it, b"" where its share is needed) or old variants (``variants``:
    (id, variants) of the entries whose part gives them); and the entries whose whole share
    is needed. Entries are numbered by their place now; an entry kept from the last report
    may have stood elsewhere then (entries added or removed before it)."""

    kept: dict[int, Kept] = dataclasses.field(default_factory=dict)
    unchanged: set[str] = dataclasses.field(default_factory=set)
    lines: dict[str, list[bytes]] = dataclasses.field(default_factory=dict)
    variants: dict[str, list[tuple[str, list[Any]]]] = dataclasses.field(default_factory=dict)
    need: set[int] = dataclasses.field(default_factory=set)
    previous: Assembly | None = None  # the last report's (answers.js: its tables, its texts)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _plan(results: Path, ids: Sequence[str], keys: Sequence[str], previous: Previous) -> _Plan:
    """Which entries the last report's assembly gives and which files it spares (see
    harness/report/assembly.py)."""
    n = len(keys)
    a, vouched = previous.assembly, previous.vouched
    plan = _Plan(previous=a)
    root = os.path.abspath(results)
    old_n = len(a.ids)
    at = {eid: j for j, eid in enumerate(a.ids)}
    was: dict[int, int] = {}  # an entry kept: its place in the last report

    def holds(name: str) -> bool:  # a name under results/, as the renderers write it
        return f"{root}/{name}" in vouched

    for i, (eid, key) in enumerate(zip(ids, keys, strict=True)):
        j = at.get(eid)
        if j is None or key != a.keys[j]:
            continue
        kept = a.kept[j]
        if all(holds(name) for name, _ in kept.pages) and all(
            os.path.abspath(d) in vouched for d in kept.documents
        ):
            plan.kept[i] = kept
            was[i] = j
    plan.need = set(range(n)) - plan.kept.keys()
    # the last report's files, taken apart as needed (by kind and first entry there): each
    # entry's line, or (id, variants) in a part of the answers file; None where a file
    # gives none (not vouched for, or not what it should hold)
    apart: dict[tuple[str, int], list[Any] | None] = {}

    def old_piece(kind: str, per: int, name_of: Callable[[int], str], j: int) -> Any:
        first = j - j % per
        if (kind, first) not in apart:
            members = range(first, min(old_n, first + per))
            name = name_of(first)
            old = _read(results / name) if holds(name) else None
            if old is None:
                apart[kind, first] = None
            elif kind == "answers":
                apart[kind, first] = part_variants(old, [a.ids[k] for k in members])
            else:
                apart[kind, first] = split_lines(old, len(members))
        pieces = apart[kind, first]
        return None if pieces is None else pieces[j - first]

    for kind, (per, name_of) in _groups().items():
        for first in range(0, n, per):
            members = range(first, min(n, first + per))
            name = name_of(first)
            if (
                all(was.get(i) == i for i in members)
                and min(old_n, first + per) == members.stop
                and holds(name)
            ):
                plan.unchanged.add(name)  # the same entries, none changed
                continue
            pieces = [old_piece(kind, per, name_of, was[i]) if i in was else None for i in members]
            plan.need.update(i for i, piece in zip(members, pieces, strict=True) if piece is None)
            if kind == "answers":
                plan.variants[name] = [piece for piece in pieces if piece is not None]
            else:
                plan.lines[name] = [piece or b"" for piece in pieces]
    return plan


class StaleAssembly(Exception):
    """answers.js is not what the last report's assembly says of it."""


def _answers(
    shares: Mapping[int, CachedEntry], plan: _Plan, ids: Sequence[str]
) -> tuple[bytes, list[AnswersText], dict[int, tuple[str, list[Any]]]]:
    """answers.js (its bytes), each entry's text in it, and the changed entries' variants
    (by position). The changed entries' texts are spliced among the others' where the
    numbering stands (render/answers.py: ``answers_spliced``), else every entry is
    numbered again, the kept ones named again from their texts."""
    heads: dict[int, Mapping[str, Any]] = {}
    own: dict[int, tuple[str, list[Any]]] = {}
    for i, share in shares.items():
        heads[i], own[i] = answers_head(share.answers)
    a = plan.previous
    if a is not None and set(a.ids) <= set(ids):
        # each entry's old text where the last answers.js held it (an entry added: none)
        at = {eid: k.answers for eid, k in zip(a.ids, a.kept, strict=True)}
        texts = answers_spliced(a.tables, [at.get(eid) for eid in ids], heads)
        if texts is not None:
            return answers_bytes(a.answers_tables, texts), texts, own
    kept = sorted(plan.kept.keys() - heads.keys())
    if kept:
        if a is None:
            raise StaleAssembly("entries kept without the last report's assembly")
        try:
            named = named_heads(a.tables, [plan.kept[i].answers.text for i in kept])
        except ValueError as exc:
            raise StaleAssembly(str(exc)) from None
        heads.update(zip(kept, named, strict=True))
    tables, texts = answers_layout(answers_index([heads[i] for i in range(len(ids))]))
    return answers_bytes(tables, texts), texts, own


def _whole_files(
    results: Path,
    ids: Sequence[str],
    shares: Mapping[int, CachedEntry],
    plan: _Plan,
    n_records: int,
    prelude: str,
    domains: Sequence[tuple[Triage, Mapping[str, Any]]],
    findings: bool,
) -> tuple[list[tuple[Path, bytes | None]], dict[str, Any], list[DomainSummary], list[Kept]]:
    """The files put together from every entry's share (``shares``) or what the last
    report's assembly keeps of it (``plan.kept``), in entry order: the data files, the
    answers files, the section files, index.html, the aggregates' parts and compat.json,
    and the domains' pages (bytes; None: a file left as it is); what the README's findings
    are written from (``findings``: there is a README): compat.json's whole document and
    the domains' summaries; and what the next report's assembly keeps of each entry."""
    n = len(shares.keys() | plan.kept.keys())
    answers_js, texts, own = _answers(shares, plan, ids)
    kept: list[Kept] = []
    for i in range(n):
        share = shares.get(i)
        if share is None:
            k = plan.kept[i]
            kept.append(k if k.answers is texts[i] else dataclasses.replace(k, answers=texts[i]))
            continue
        kept.append(
            Kept(
                html=dataclasses.replace(share.html, sections=""),
                answers=texts[i],
                verdicts=share.verdicts,
                pages=share.pages,
                documents=tuple(path for path, _ in share.documents),
            )
        )
    grouped: dict[str, list[tuple[Path, bytes | None]]] = {}
    for kind, (per, name_of) in _groups().items():
        whole = grouped[kind] = []
        for first in range(0, n, per):
            name = name_of(first)
            members = range(first, min(n, first + per))
            if name in plan.unchanged:
                whole.append((results / name, None))
            elif kind == "answers":
                old = dict(plan.variants.get(name, []))
                part = [own.get(i) or (ids[i], old[ids[i]]) for i in members]
                whole.append((results / name, answers_part(part).encode("utf-8")))
            else:  # the old lines, or none where every entry's share is here
                lines = plan.lines.get(name) or [b""] * len(members)
                for i in members:
                    share = shares.get(i)
                    if share is not None:
                        lines[i - first] = _line(kind, share)
                whole.append((results / name, b"".join(lines)))
    compat = compat_index(n_records, list(ids))
    compat_doc: dict[str, Any] = {}
    if domains or findings:
        compat_doc = {
            "schema": SCHEMA,
            "records": n_records,
            "entries": [
                json.loads(line)
                for path, blob in grouped["aggregates"]
                for line in (path.read_bytes() if blob is None else blob).split(b"\n")
                if line
            ],
        }
    pages, sections, summaries = _domain_pages(results, compat_doc, domains)
    page = assemble_html([k.html for k in kept], prelude + sections)
    whole = [
        *grouped["cells"],
        (results / ANSWERS_FILE, answers_js),
        *grouped["answers"],
        *grouped["sections"],
        (results / "index.html", page.encode("utf-8")),
        *grouped["aggregates"],
        (results / COMPAT_FILE, compat),
        *pages,
    ]
    return whole, compat_doc, summaries, kept


# an entry's page or PNG: its id with "/" as "__" (an id always holds a "/"), perhaps a
# number after it where two ids make one name (render/__init__.py: entry_slug)
_PAGE = re.compile(r"[^/]*__[^/]*\.(md|png)")


def _owned() -> list[tuple[str, re.Pattern[str]]]:
    """The report's folders under results/ whose files each belong to some entries: (the
    folder, the pattern of the names it writes there)."""
    folders = [("compat", _PAGE)]
    for _, name_of in _groups().values():
        first = Path(name_of(0))  # NNNN and the kind's suffix
        folders.append((first.parent.as_posix(), re.compile("[0-9]{4,}" + re.escape(first.suffix))))
    return folders


def owned_folders(results: Path) -> list[Path]:
    """The folders whose files each belong to some entries (entries' pages, files of a few
    entries): the report state keeps their identity too, so that a file added to one (one
    ``_leftovers`` would remove) makes the next report run."""
    return [results / folder for folder, _ in _owned()]


def _leftovers(results: Path, ours: Collection[str]) -> list[Path]:
    """The files of entries that are not reported any more, as removed entries leave them:
    an entry's page and PNG in results/compat/, a file of a few entries numbered past the
    last; named as the report names them and not among this report's outputs (``ours``:
    their names under results/, as "compat/x.md").
    Any other file there (one a person put there, a folder) is not the report's."""
    out: list[Path] = []
    for folder, pattern in _owned():
        try:
            names = sorted(os.listdir(results / folder))
        except OSError:  # no such folder (yet)
            continue
        out += [
            results / folder / name
            for name in names
            if f"{folder}/{name}" not in ours
            and pattern.fullmatch(name)
            and (results / folder / name).is_file()
        ]
    return out


def _line(kind: str, share: CachedEntry) -> bytes:
    """The entry's line in a file of ``kind`` (see ``_groups``), its newline included."""
    if kind == "cells":
        return share.cell_data.encode("utf-8")
    if kind == "sections":
        return share.html.sections.encode("utf-8")
    return share.json + b"\n"


def _entry_files(
    results: Path,
    pages: Mapping[int, Sequence[tuple[str, str]]],
    jobs: Sequence[_Job],
    writes: Sequence[list[Flags]],
) -> list[Flags]:
    """Every entry's files (page, PNG) in entry order, an order that depends neither on the
    shards nor on the caches: those not rendered (``pages``: from the render cache or the
    assembly) unwritten, the others as written."""
    flags: dict[int, list[Flags]] = {
        i: [(results / name, False, False) for name, _ in named] for i, named in pages.items()
    }
    for job, written in zip(jobs, writes, strict=True):
        per_entry = iter(written)
        for i, _ in job.items:
            flags[i] = [next(per_entry) for _ in pages[i]]
    return [f for i in range(len(pages)) for f in flags[i]]


def _summary(
    files: Sequence[Flags],
    documents: Sequence[WritebackResult],
    kept: Sequence[Kept],
    entries: Mapping[str, tuple[str, int]],
    n_records: int,
    assembly: Assembly | None,
) -> ReportSummary:
    verdicts: dict[str, int] = {}
    for k in kept:
        for v in k.verdicts:
            verdicts[v] = verdicts.get(v, 0) + 1
    return ReportSummary(
        outputs=tuple(path for path, _, _ in files),
        written=tuple(path for path, _, was_written in files if was_written),
        stale_outputs=tuple(path for path, is_stale, _ in files if is_stale),
        documents_updated=tuple(d.path for d in documents if d.written),
        stale_documents=tuple(d.path for d in documents if d.changed),
        verdicts=dict(sorted(verdicts.items())),
        entries=entries,
        records=n_records,
        assembly=assembly,
    )


def _smells(entries: Sequence[Entry], table: RecordTable) -> dict[str, list[Smell]]:
    """The smells of the entries to render, from their records in the table."""
    if not entries:
        return {}
    by_entry: dict[str, list[Record]] = {e.id: [] for e in entries}
    for r in table.records([e.id for e in entries]):
        by_entry[r.entry].append(r)
    return {e.id: find_smells(e, by_entry[e.id]) for e in entries}


@gc_paused()  # (the aggregation and the rendering: millions of objects, no cycles)
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
    basis: Mapping[str, tuple[str, int]] | None = None,
    previous: Previous | None = None,
    progress: ReportProgress | None = None,
) -> ReportSummary:
    """``records``: the records to report (the store's newest, as the engine holds them:
    harness/store/columnar.py), or Records in hand. ``workers``: how many processes render (the
    others a pool forked from this one once everything is aggregated, see ``_pool``); None
    chooses up to 4, as many as there are CPUs, for large results where forking is safe,
    else 1. ``cache``:
    take an entry whose inputs have not changed from results/.cache/render
    (harness/report/cache.py), and keep what is rendered there (not in check mode). The
    bytes and the summary depend on none of these. ``readme``: the README whose findings
    block (harness/report/findings.py) is written from the records, like an entry's
    document. ``basis``: where the table holds only the entries appended to since an
    earlier report (RecordTable.touched), that report's ``entries``: every other entry's
    records are as they were then, and are taken from the cache; where one is not there,
    NeedsEveryEntry. ``progress``: where the report shows its phases (none: nowhere)."""
    if progress is None:
        progress = ReportProgress(Console(quiet=True), quiet=True)
    table = records if isinstance(records, RecordTable) else RecordTable.of(records)
    ask = _Ask(entries, Path(results_dir), check, workers, prelude, domains, readme, progress)
    store = RenderCache(ask.results) if cache else None
    try:
        return _render_once(table, ask, store, basis, previous if store is not None else None)
    except StaleAssembly:  # answers.js is not what the last assembly says: without it
        return _render_once(table, ask, store, basis, None)


@dataclass(frozen=True)
class _Ask:
    """What ``render_all`` was asked to render, and how."""

    entries: Sequence[Entry]
    results: Path
    check: bool
    workers: int | None
    prelude: str
    domains: Sequence[tuple[Triage, Mapping[str, Any]]]
    readme: str | os.PathLike[str] | None
    progress: ReportProgress


def _render_once(
    table: RecordTable,
    ask: _Ask,
    store: RenderCache | None,
    basis: Mapping[str, tuple[str, int]] | None,
    previous: Previous | None,
) -> ReportSummary:
    """``render_all`` with the last report's assembly (``previous``) or without it."""
    entries, results, check, progress = ask.entries, ask.results, ask.check, ask.progress
    known = {e.id: e for e in entries}
    with progress.phase("finding the entries whose records changed"):
        digests = _entry_records(table, basis, digest=store is not None)
    ids = sorted(set(digests) | set(known))
    n_records = sum(n for _, n in digests.values())
    keys = _keys(digests, ids, known) if store is not None else []
    # without the last report's assembly, every entry's share is needed
    plan = (
        _plan(results, ids, keys, previous)
        if previous is not None
        else _Plan(need=set(range(len(ids))))
    )
    shares = _cached_shares(store, keys, plan)
    missed = sorted(plan.need - shares.keys())
    if table.touched is not None and any(
        ids[i] in digests and ids[i] not in table.touched for i in missed
    ):
        raise NeedsEveryEntry("an entry not appended to is not in the cache")
    items = _aggregated(table, entries, ids, missed, progress)
    smells = _smells([known[ids[i]] for i in missed if ids[i] in known], table)
    jobs, rendered = _render_items(items, entries, results, check, smells, ask.workers, progress)
    for job, done in zip(jobs, rendered, strict=True):
        for (i, _), share in zip(job.items, done.shares, strict=True):
            shares[i] = share
    readme = Path(ask.readme) if ask.readme is not None else None
    findings = readme is not None and readme.is_file()
    whole, compat_doc, summaries, kept = _whole_files(
        results, ids, shares, plan, n_records, ask.prelude, ask.domains, findings
    )
    with progress.phase("writing the outputs and the caches"):
        files, documents, leftovers = _write_outputs(
            results,
            entries,
            rendered,
            jobs,
            whole,
            shares,
            kept,
            (compat_doc, summaries),
            readme,
            check,
        )
        assembly = None
        if store is not None and not check:
            for i in missed:
                store.put(keys[i], shares[i])
            store.prune(set(keys))
            assembly = Assembly(
                "", code_fingerprint(), tuple(ids), tuple(keys), tuple(kept), n_records
            )
    return dataclasses.replace(
        _summary(files, documents, kept, digests, n_records, assembly),
        leftovers=tuple(leftovers),
    )


def _cached_shares(
    store: RenderCache | None, keys: Sequence[str], plan: _Plan
) -> dict[int, CachedEntry]:
    """The shares the plan needs that the render cache holds (pages too, unless kept)."""
    shares: dict[int, CachedEntry] = {}
    if store is not None:
        for i in sorted(plan.need):
            hit = store.get(keys[i], pages=i not in plan.kept)
            if hit is not None:
                shares[i] = hit
    return shares


def _aggregated(
    table: RecordTable,
    entries: Sequence[Entry],
    ids: Sequence[str],
    missed: Sequence[int],
    progress: ReportProgress,
) -> list[Item]:
    """The aggregates of the entries at ``missed`` (their places in ``ids``)."""
    if not missed:
        return []
    wanted = [ids[i] for i in missed] if len(missed) < len(ids) else None
    with progress.phase(f"aggregating {_entries(len(missed))}"):
        aggs = aggregate_table(table, entries, ids=wanted)
    return list(zip(missed, aggs, strict=True))


def _render_items(
    items: list[Item],
    entries: Sequence[Entry],
    results: Path,
    check: bool,
    smells: dict[str, list[Smell]],
    workers: int | None,
    progress: ReportProgress,
) -> tuple[list[_Job], list[_Rendered]]:
    """Every item rendered, in shards shared out among this process and forked workers."""
    n = _workers(workers, len(items))
    jobs = [
        _Job(part, entries, results, check, smells)
        for part in _shards(items, n * _SHARDS_PER_PROCESS if n > 1 else 1)
    ]
    # what every entry's page words alike, once, before any worker is forked (the entries'
    # trials share one pool of texts; one without trials has the empty one: word_pool keeps
    # each pool it worded)
    for _, a in items[:1] + items[-1:]:
        html_module.word_pool(a.trials.texts)
    with (
        progress.phase(f"rendering {_entries(len(items))}", len(items), forks=n > 1) as advance,
        _pool(jobs, n - 1) as futures,
    ):
        return jobs, _share_out(jobs, futures, advance)


def _write_outputs(
    results: Path,
    entries: Sequence[Entry],
    rendered: list[_Rendered],
    jobs: list[_Job],
    whole: list[tuple[Path, bytes | None]],
    shares: dict[int, CachedEntry],
    kept: list[Kept],
    compat: tuple[dict[str, Any], list[DomainSummary]],
    readme: Path | None,
    check: bool,
) -> tuple[list[Flags], list[WritebackResult], list[Path]]:
    """Everything rendered: the entries' files, the whole files, the documents and the
    README staged together and renamed at the end, or none of them (a full disk, a
    read-only folder: every output stays as it was, and the error names the file).
    Returns the files with their flags, the documents and the leftovers of removed entries."""
    compat_doc, summaries = compat
    staged = Staged()
    try:
        writes = [_write(done, check, staged) for done in rendered]
        whole_flags = [
            (False, False) if blob is None else _put(path, blob, check, staged)
            for path, blob in whole
        ]
        documents = [
            write_blocks(texts, document, check=check, staged=staged)
            for i in sorted(shares)
            for document, texts in shares[i].documents
        ]
        documents += _findings(
            readme, results, compat_doc, summaries, check, staged, rewritten_since(entries)
        )
        leftovers = _leftovers(
            results,
            {path.relative_to(results).as_posix() for path, _ in whole}
            | {name for k in kept for name, _ in k.pages},
        )
    except OSError as exc:
        staged.discard()
        raise ReportWriteError(exc) from exc
    except BaseException:
        staged.discard()
        raise
    try:
        staged.commit()
        if not check:
            _remove(leftovers)
    except OSError as exc:
        raise ReportWriteError(exc) from exc
    files = _entry_files(results, {i: k.pages for i, k in enumerate(kept)}, jobs, writes)
    files += [(path, *flags) for (path, _), flags in zip(whole, whole_flags, strict=True)]
    return files, documents, leftovers


def _remove(paths: Sequence[Path]) -> None:
    """Unlink ``paths`` (files of the report's folders) through their folder, opened
    without following a link (harness/paths.py)."""
    by_folder: dict[Path, set[str]] = {}
    for path in paths:
        by_folder.setdefault(path.parent, set()).add(path.name)
    for folder, names in by_folder.items():
        remove_files(folder, lambda entry, names=names: entry.name in names)
