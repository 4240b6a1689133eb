"""The report of the stored records, as `python -m harness report` and the end of a run make
it: the shortcut when nothing it reads or writes changed (harness/report/uptodate.py), the
store's load (harness/store/columnar.py), then every output under results/ and the entries'
documents (harness/report/outputs.py). Apart from the run's steps (harness/execute/steps.py)
so that a report imports what it uses, not the runner's environments, plans and budgets."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from harness.config import Config
from harness.errors import InputError
from harness.spec.entries import load_entries, rewritten_since
from harness.store.jsonl import Store

if TYPE_CHECKING:
    from harness.report.progress import ReportProgress
    from harness.report.uptodate import ReportState

__all__ = ["render_reports"]


def _size(files: list[Path]) -> str:
    """The files' size, for the phase that reads them."""
    size = 0
    for path in files:
        with contextlib.suppress(OSError):  # (gone since the listing: the load says so)
            size += path.stat().st_size
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size:,} bytes"


def _domains(cfg: Config, console: Console) -> list[tuple[Any, dict[str, Any]]]:
    """The knowledge-base domains to summarise: each triage file under repros/ with the
    message-existence answers of results/msgsearch.json ({} where none were searched)."""
    from harness.catalogue.msgsearch import load_results
    from harness.spec.triage import find_triages

    try:
        found = load_results(cfg.results_dir / "msgsearch.json")
    except ValueError as exc:
        console.print(f"[yellow]warning:[/] {escape(str(exc))}; messages shown as not searched")
        found = {}
    return [(t, found) for t in find_triages(cfg.repros_dir)]


def render_reports(
    cfg: Config,
    console: Console,
    check: bool = False,
    since: str | None = None,
    cache: bool = True,
) -> int:
    """``since``: a git revision; index.html then opens with what changed since its records.
    ``cache``: use results/.cache (the store's snapshots, harness/store/snapshot.py; the rendered
    entries, harness/report/cache.py); without it everything is read and rendered anew."""
    from harness.report import uptodate

    # nothing read or written changed since the last report: its outputs stand as they are
    # (harness/report/uptodate.py); --check, --since and --no-cache always read and render
    vouch = cache and not check and since is None
    code = uptodate.code_digest() if vouch else ""
    last = uptodate.load_state(cfg.results_dir) if vouch else None
    if (
        vouch
        and last is not None
        and uptodate.unchanged(last, code, cfg.repo, cfg.repros_dir, cfg.results_dir)
    ):
        console.print(last.said, markup=False)
        console.print(
            "  (nothing the report reads or writes has changed since the last report: its "
            "outputs stand; `report --no-cache` reads and renders everything again)",
            markup=False,
        )
        return 0
    # a report that reads and renders shows its phases as it goes (harness/report/progress.py;
    # imported here: the report with nothing to do above need not)
    from harness.report.progress import ReportProgress

    with ReportProgress(console) as progress:
        return _read_and_render(cfg, console, progress, check, since, cache, code, last)


def _read_and_render(
    cfg: Config,
    console: Console,
    progress: ReportProgress,
    check: bool,
    since: str | None,
    cache: bool,
    code: str,
    last: ReportState | None,
) -> int:
    """``render_reports`` past its shortcut: ``code`` the harness's digest and ``last`` the
    last report's state (harness/report/uptodate.py), where the shortcut applies."""
    from harness.report import uptodate

    vouch = cache and not check and since is None
    # what this report reads, as it is before reading it (kept only where the shortcut is)
    read = (
        {
            p: uptodate.signature(p)
            for p in uptodate.files_read(cfg.repo, cfg.repros_dir, cfg.results_dir)
        }
        if vouch
        else {}
    )

    from harness.report.assembly import forget_assembly, load_assembly, save_assembly
    from harness.report.cache import RenderCache, code_fingerprint
    from harness.report.outputs import NeedsEveryEntry, Previous, owned_folders, render_all
    from harness.report.writeback import WritebackError
    from harness.store.columnar import load_latest
    from harness.store.snapshot import cache_dir

    entries = load_entries(cfg.repros_dir)
    store = Store(cfg.records_dir)
    # a rerun of a job appends a newer record under the same key: per machine, it replaces
    # the older one; the records of other machines stay (read by the columnar engine: what
    # latest(store.load().records) gives, see harness/store/columnar.py), from the snapshots of
    # the record files where they hold (--check writes none: harness/store/snapshot.py)
    # a report whose records were all read last time reads only the entries appended to
    basis = uptodate.load_basis(cfg.results_dir, code) if vouch else None

    def last_assembly() -> Previous | None:
        """The whole files are spliced where the last report's assembly and state allow
        (harness/report/assembly.py)."""
        if not (vouch and last is not None and last.code == code and last.token):
            return None
        vouched = last.vouched(cfg.repo)
        kept = load_assembly(cfg.results_dir, code_fingerprint(), last.token, vouched)
        return Previous(kept, vouched) if kept is not None else None

    # read beside the store's load, which waits on the engine and on hashing (neither holds
    # the GIL); the thread is gone before any renderer is forked
    with (
        progress.phase(f"reading the store ({_size(store.files())})"),
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        assembling = pool.submit(last_assembly)
        loaded = load_latest(
            store,
            cache_dir(cfg.records_dir) if cache else None,
            update=not check,
            since=basis.files if basis is not None else None,
        )
        previous = assembling.result()
    # --check writes nothing, not even the quarantine; the warnings still name every line
    problems = [] if check else store.quarantine(loaded.refused)
    refused = RenderCache(cfg.results_dir).refused if cache else None  # a linked folder
    if refused:
        problems.append(f"{refused}; the rendered entries are neither read nor written")
    for warning in (*loaded.warnings, *problems):
        console.print(f"[yellow]warning:[/] {escape(str(warning))}")
    prelude = ""
    if since is not None:
        from harness.ci.diff import (
            DiffError,
            Side,
            as_reported,
            diff_records,
            html_changes,
            load_side,
        )

        try:
            old = load_side(since, cfg.repo, entries=entries)
        except DiffError as exc:
            raise InputError(f"--since: {exc}") from exc
        now = Side("now", tuple(as_reported(loaded.records(), entries)))
        prelude = html_changes(diff_records(old, now), since)
    from harness.report.lead import html_lead, latest_snapshot

    prelude = html_lead(latest_snapshot(cfg.results_dir, rewritten_since(entries))) + prelude
    domains = _domains(cfg, console)

    def render(table: Any) -> Any:
        return render_all(
            table,
            entries,
            cfg.results_dir,
            check=check,
            prelude=prelude,
            domains=domains,
            cache=cache,
            readme=cfg.repo / "README.md",
            basis=basis.entries if basis is not None and table.touched is not None else None,
            previous=previous,
            progress=progress,
        )

    try:
        try:
            summary = render(loaded)
        except NeedsEveryEntry:  # an entry not appended to is not in the render cache
            with progress.phase(f"reading the store again, every entry ({_size(store.files())})"):
                loaded = load_latest(store, cache_dir(cfg.records_dir))
            summary = render(loaded)
    except WritebackError as exc:  # an entry document without its marked blocks
        raise WritebackError(
            exc.path,
            exc.line,
            f"{exc.problem}; the records are stored: fix the document and run "
            "`python -m harness report`",
        ) from exc
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items()))

    def said(rewritten: int, updated: int, gone: int = 0) -> str:
        removed = f", {gone} files of removed entries deleted" if gone else ""
        return (
            f"report: {summary.records} records -> {len(summary.outputs)} outputs under "
            f"{cfg.results_dir} ({rewritten} rewritten{removed}), "
            f"{updated} entry documents updated; verdicts: {verdicts}"
        )

    gone = 0 if check else len(summary.leftovers)
    console.print(said(len(summary.written), len(summary.documents_updated), gone), markup=False)
    if vouch:
        uptodate.save_basis(cfg.results_dir, code, loaded.covered, summary.entries)
    # the state and the assembly are kept together, after a report without a warning
    keep = vouch and not loaded.warnings and not problems
    token = secrets.token_hex(16) if keep and summary.assembly is not None else ""
    if token:
        save_assembly(cfg.results_dir, dataclasses.replace(summary.assembly, token=token))
    elif vouch:  # (--check writes nothing)
        forget_assembly(cfg.results_dir)
    if keep:
        uptodate.save_state(
            cfg.results_dir,
            cfg.repo,
            code,
            read,
            written=summary.documents_updated,
            outputs=(*summary.outputs, *owned_folders(cfg.results_dir)),
            said=said(0, 0),
            token=token,
        )
    if check and not summary.up_to_date:
        for path in (*summary.stale_outputs, *summary.stale_documents):
            console.print(f"[bold red]stale:[/] {escape(str(path))}")
        for path in summary.leftovers:
            console.print(f"[bold red]left by removed entries:[/] {escape(str(path))}")
        console.print("run `nox -s report` and commit the result")
        return 1
    return 0
