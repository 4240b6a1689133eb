"""The report of the stored records, as `python -m harness report` and the end of a run make
it, in steps a reader follows top to bottom:

1. the shortcut: nothing it reads or writes changed since the last report, so its outputs
   stand (harness/report/uptodate.py);
2. the store's one door (harness/store/changes.py): the newest records of the entries that
   changed since the last report's state, with their warnings; beside it, the last report's
   assembly of the whole files (harness/report/assembly.py);
3. the page's opening: the latest night, and with ``--since`` the cells changed since a
   revision, whose records come through the same door (harness/report/lead.py);
4. every output under results/ and the entries' documents (harness/report/outputs.py, with
   its render cache, harness/report/cache.py);
5. what the next report starts from: its state, basis and assembly.

Apart from the run's steps (harness/execute/steps.py) so that a report imports what it uses,
not the runner's environments, plans and budgets."""

from __future__ import annotations

import dataclasses
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from harness.config import Config
from harness.errors import InputError
from harness.spec.entries import Entry, load_entries, rewritten_since

if TYPE_CHECKING:
    from harness.report.outputs import Previous, ReportSummary
    from harness.report.progress import ReportProgress
    from harness.report.uptodate import Basis, ReportState, Signature
    from harness.store.changes import Changes

__all__ = ["render_reports"]


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

    # --check, --since and --no-cache always read and render
    vouch = cache and not check and since is None
    code = uptodate.code_digest() if vouch else ""
    last = uptodate.load_state(cfg.results_dir) if vouch else None
    if last is not None and _outputs_stand(cfg, console, last, code):
        return 0
    # a report that reads and renders shows its phases as it goes (harness/report/progress.py;
    # imported here: the report with nothing to do above need not)
    from harness.report.progress import ReportProgress

    with ReportProgress(console) as progress:
        run = _Report(cfg, console, progress, check, since, cache, vouch, code, last)
        return _read_and_render(run)


def _outputs_stand(cfg: Config, console: Console, last: ReportState, code: str) -> bool:
    """Whether nothing read or written changed since the last report (then it says so)."""
    from harness.report import uptodate

    if not uptodate.unchanged(last, code, cfg.repo, cfg.repros_dir, cfg.results_dir):
        return False
    console.print(last.said, markup=False)
    console.print(
        "  (nothing the report reads or writes has changed since the last report: its "
        "outputs stand; `report --no-cache` reads and renders everything again)",
        markup=False,
    )
    return True


@dataclass(frozen=True)
class _Report:
    """One report past its shortcut: what was asked, and ``code`` the harness's digest and
    ``last`` the last report's state (harness/report/uptodate.py) where ``vouch``: the
    report may keep and use what vouches for its outputs (not --check, --since, --no-cache)."""

    cfg: Config
    console: Console
    progress: ReportProgress
    check: bool
    since: str | None
    cache: bool
    vouch: bool
    code: str
    last: ReportState | None


def _read_and_render(r: _Report) -> int:
    from harness.report import uptodate

    read = _inputs_as_they_are(r)
    entries = load_entries(r.cfg.repros_dir)
    basis = uptodate.load_basis(r.cfg.results_dir, r.code) if r.vouch else None
    changes, previous = _read_the_store(r, basis)
    problems = _warn(r, changes)
    prelude = _opening(r, entries, changes)
    changes, summary = _render(r, entries, changes, basis, previous, prelude)
    said = _say(r, summary)
    if r.vouch:
        _keep(r, read, changes, summary, said, keep=not changes.warnings and not problems)
    return _stale(r, summary)


def _inputs_as_they_are(r: _Report) -> dict[Path, Signature | None]:
    """What this report reads, as it is before reading it (kept only where it may vouch)."""
    from harness.report import uptodate

    if not r.vouch:
        return {}
    cfg = r.cfg
    return {
        p: uptodate.signature(p)
        for p in uptodate.files_read(cfg.repo, cfg.repros_dir, cfg.results_dir)
    }


def _read_the_store(r: _Report, basis: Basis | None) -> tuple[Changes, Previous | None]:
    """The newest records through the store's door: only the entries appended to since the
    last report where its basis holds. The last report's assembly is read beside it, while
    the store's read waits on the engine and on hashing (neither holds the GIL); the thread
    is gone before any renderer is forked."""
    from harness.store.changes import changed_since, stored_size

    cfg = r.cfg
    with (
        r.progress.phase(f"reading the store ({stored_size(cfg.records_dir)})"),
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        assembling = pool.submit(_last_assembly, r)
        changes = changed_since(
            cfg.records_dir,
            basis.files if basis is not None else None,
            snapshots=r.cache,
            write=not r.check,  # --check writes nothing, not even the quarantine
        )
        return changes, assembling.result()


def _last_assembly(r: _Report) -> Previous | None:
    """The whole files are spliced where the last report's assembly and state allow
    (harness/report/assembly.py)."""
    from harness.report.assembly import load_assembly
    from harness.report.cache import code_fingerprint
    from harness.report.outputs import Previous

    last = r.last
    if not (r.vouch and last is not None and last.code == r.code and last.token):
        return None
    vouched = last.vouched(r.cfg.repo)
    kept = load_assembly(r.cfg.results_dir, code_fingerprint(), last.token, vouched)
    return Previous(kept, vouched) if kept is not None else None


def _warn(r: _Report, changes: Changes) -> list[str]:
    """Print the store's warnings, and the render cache's where it is a link; those of the
    report's own that keep it from vouching for its outputs."""
    from harness.report.cache import RenderCache

    refused = RenderCache(r.cfg.results_dir).refused if r.cache else None  # a linked folder
    problems = [f"{refused}; the rendered entries are neither read nor written"] if refused else []
    for warning in (*changes.warnings, *problems):
        r.console.print(f"[yellow]warning:[/] {escape(str(warning))}")
    return problems


def _opening(r: _Report, entries: list[Entry], changes: Changes) -> str:
    """What index.html opens with: the latest night, then what changed since ``--since``."""
    from harness.report.lead import html_lead, latest_snapshot

    prelude = _changed_since(r, entries, changes) if r.since is not None else ""
    night = latest_snapshot(r.cfg.results_dir, rewritten_since(entries))
    return html_lead(night) + prelude


def _changed_since(r: _Report, entries: list[Entry], changes: Changes) -> str:
    """The cells changed between the records at ``--since`` (read through the store's door)
    and those read now, both as the report reads them."""
    from harness.aggregate.diff import Side, as_reported, diff_records
    from harness.report.lead import html_changes
    from harness.store.changes import UnreadableRecords, newest_at

    assert r.since is not None
    try:
        then = newest_at(r.since, r.cfg.repo)
    except UnreadableRecords as exc:
        raise InputError(f"--since: {exc}") from exc
    old = Side(r.since, tuple(as_reported(then, entries)))
    now = Side("now", tuple(as_reported(changes.table.records(), entries)))
    return html_changes(diff_records(old, now), r.since)


def _render(
    r: _Report,
    entries: list[Entry],
    changes: Changes,
    basis: Basis | None,
    previous: Previous | None,
    prelude: str,
) -> tuple[Changes, ReportSummary]:
    """Every output and document; where an entry not appended to is not in the render cache,
    the store is read again, every entry."""
    from harness.report.outputs import NeedsEveryEntry, render_all
    from harness.report.writeback import WritebackError
    from harness.store.changes import changed_since, stored_size

    cfg = r.cfg
    domains = _domains(cfg, r.console)

    def render(changes: Changes) -> ReportSummary:
        table = changes.table
        return render_all(
            table,
            entries,
            cfg.results_dir,
            check=r.check,
            prelude=prelude,
            domains=domains,
            cache=r.cache,
            readme=cfg.repo / "README.md",
            basis=basis.entries if basis is not None and table.touched is not None else None,
            previous=previous,
            progress=r.progress,
        )

    try:
        try:
            return changes, render(changes)
        except NeedsEveryEntry:
            size = stored_size(cfg.records_dir)
            with r.progress.phase(f"reading the store again, every entry ({size})"):
                changes = changed_since(cfg.records_dir)
            return changes, render(changes)
    except WritebackError as exc:  # an entry document without its marked blocks
        raise WritebackError(
            exc.path,
            exc.line,
            f"{exc.problem}; the records are stored: fix the document and run "
            "`python -m harness report`",
        ) from exc


def _say(r: _Report, summary: ReportSummary) -> str:
    """Print what the report did; returns the line a report with nothing to do repeats."""
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items()))

    def said(rewritten: int, updated: int, gone: int = 0) -> str:
        removed = f", {gone} files of removed entries deleted" if gone else ""
        return (
            f"report: {summary.records} records -> {len(summary.outputs)} outputs under "
            f"{r.cfg.results_dir} ({rewritten} rewritten{removed}), "
            f"{updated} entry documents updated; verdicts: {verdicts}"
        )

    gone = 0 if r.check else len(summary.leftovers)
    r.console.print(said(len(summary.written), len(summary.documents_updated), gone), markup=False)
    return said(0, 0)


def _keep(
    r: _Report,
    read: dict[Path, Signature | None],
    changes: Changes,
    summary: ReportSummary,
    said: str,
    keep: bool,
) -> None:
    """What the next report starts from: the basis (the store's state and each entry's
    records), and, after a report without a warning (``keep``), the state of what it read
    and wrote with the assembly of its whole files, bound by one token."""
    from harness.report import uptodate
    from harness.report.assembly import forget_assembly, save_assembly
    from harness.report.outputs import owned_folders

    results = r.cfg.results_dir
    uptodate.save_basis(results, r.code, changes.state, summary.entries)
    token = secrets.token_hex(16) if keep and summary.assembly is not None else ""
    if token:
        save_assembly(results, dataclasses.replace(summary.assembly, token=token))
    else:
        forget_assembly(results)
    if keep:
        uptodate.save_state(
            results,
            r.cfg.repo,
            r.code,
            read,
            written=summary.documents_updated,
            outputs=(*summary.outputs, *owned_folders(results)),
            said=said,
            token=token,
        )


def _stale(r: _Report, summary: ReportSummary) -> int:
    """1 where --check found an output or document that a report would change."""
    if not r.check or summary.up_to_date:
        return 0
    for path in (*summary.stale_outputs, *summary.stale_documents):
        r.console.print(f"[bold red]stale:[/] {escape(str(path))}")
    for path in summary.leftovers:
        r.console.print(f"[bold red]left by removed entries:[/] {escape(str(path))}")
    r.console.print("run `nox -s report` and commit the result")
    return 1
