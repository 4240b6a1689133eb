"""The steps of a run, in order. Each takes the state and returns it; an int stops the run
with that exit code (0 done, 2 bad input, 130 interrupted).

    load_inputs -> plan_jobs -> list_or_continue -> drop_done -> run_matrix -> render
"""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.capabilities import CudaFacts, precheck
from harness.config import Config
from harness.entries import Entry, EntryError, load_entries
from harness.envs import (
    STANDIN_VAR,
    BuiltEnv,
    EnvBackend,
    EnvFailed,
    ExistingBackend,
    MatrixBackend,
    UvBackend,
)
from harness.matrix import Environment, Expansion, Matrix, MatrixError, load_matrix
from harness.plan import Job, Plan, make_plan
from harness.proc import ProcessGroups
from harness.provenance import cuda_provenance, machine_provenance
from harness.records import Record
from harness.runner import decided_record, env_failed_record, run_job
from harness.store import Store, StoreError, latest

__all__ = ["RunState", "STEPS", "run_steps"]


@dataclass
class RunState:
    config: Config
    console: Console
    expansion: Expansion | None = None
    entries: tuple[Entry, ...] = ()
    plan: Plan | None = None
    todo: list[Job] = field(default_factory=list)
    store: Store | None = None
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    backend: EnvBackend | None = None
    existing: ExistingBackend = field(
        default_factory=lambda: ExistingBackend(os.environ.get(STANDIN_VAR))
    )
    groups: ProcessGroups = field(default_factory=ProcessGroups)


Step = Callable[[RunState], "RunState | int"]


def load_inputs(state: RunState) -> RunState | int:
    cfg = state.config
    try:
        matrix = load_matrix(cfg.matrix_path)
        state.expansion = matrix.expand(cfg.profile)
        if cfg.trials is not None:
            state.expansion = dataclasses.replace(state.expansion, trials=cfg.trials)
        state.entries = load_entries(cfg.repros_dir)
    except (MatrixError, EntryError) as exc:
        state.console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
        return 2
    if not state.entries:
        state.console.print(f"[bold red]error:[/] no entries found under {cfg.repros_dir}")
        return 2
    if cfg.python is not None:
        status = _existing_interpreter(state, matrix)
        if status:
            return status
    if cfg.timeout_s is None:
        cfg.timeout_s = matrix.timeout_s
    if cfg.memory_limit_mb is None:
        cfg.memory_limit_mb = matrix.memory_limit_mb
    return state


def _existing_interpreter(state: RunState, matrix: Matrix) -> int:
    """run --python: the profile's cells in the one environment that interpreter is."""
    python = state.config.python
    assert python is not None
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        state.console.print(
            f"[bold red]error:[/] --python {python}: no such executable file", highlight=False
        )
        return 2
    found = state.existing.inspect(python)
    seen = found.seen
    state.console.print(
        f"interpreter {python}: Python {seen.get('python', '?')}, torch "
        f"{seen.get('torch', 'missing')}, lightning "
        f"{seen.get('lightning', seen.get('pytorch_lightning', 'missing'))}, CUDA "
        f"{'available' if seen.get('cuda_available') == 'True' else 'not available'} "
        f"-> environment {found.env.id}",
        markup=False,
        highlight=False,
    )
    if found.problem:
        state.console.print(f"[red]env_failed[/] {found.env.id}: {found.problem}", highlight=False)
    try:
        state.expansion = matrix.expand_for(found.env, state.config.profile)
    except MatrixError as exc:
        state.console.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    if state.config.trials is not None:
        state.expansion = dataclasses.replace(state.expansion, trials=state.config.trials)
    return 0


def plan_jobs(state: RunState) -> RunState | int:
    cfg = state.config
    assert state.expansion is not None
    state.plan = make_plan(
        state.expansion,
        state.entries,
        entry_filter=cfg.entries,
        variant_filter=cfg.variants,
        env_filter=cfg.envs,
        cell_filter=cfg.cells,
        shard=cfg.shard,
    )
    if not state.plan.jobs and not cfg.list_only:
        state.console.print("[yellow]nothing to run: the filters select no job[/]")
        return 0
    return state


def list_or_continue(state: RunState) -> RunState | int:
    if not state.config.list_only:
        return state
    assert state.expansion is not None and state.plan is not None
    from harness.matrix import describe

    for line in describe(state.expansion):
        state.console.print(line, markup=False, highlight=False)
    per_env = collections.Counter(j.cell.env.id for j in state.plan.jobs)
    state.console.print(
        f"\n{len(state.plan.jobs)} jobs in profile {state.expansion.profile!r}"
        f" ({state.expansion.trials} trial(s) each):",
        markup=False,
    )
    for env_id, n in sorted(per_env.items()):
        state.console.print(f"  {env_id}: {n} jobs", markup=False)
    if state.plan.not_applicable:
        state.console.print(
            f"{len(state.plan.not_applicable)} (variant, cell) pairs not applicable "
            "(the variant is not defined for that device/precision)",
            markup=False,
        )
    return 0


def drop_done(state: RunState) -> RunState | int:
    assert state.plan is not None
    state.store = Store(state.config.records_dir, state.config.machine)
    loaded = state.store.load()
    for warning in (*loaded.warnings, *state.store.quarantine(loaded.refused)):
        state.console.print(f"[yellow]warning:[/] {escape(str(warning))}", highlight=False)
    if state.config.resume:
        # per machine: what another machine ran is not done here
        done = state.store.done_keys(loaded.records)
        state.todo = [j for j in state.plan.jobs if j.key not in done]
        state.console.print(
            f"resume: {len(state.plan.jobs) - len(state.todo)} of "
            f"{len(state.plan.jobs)} jobs already stored, {len(state.todo)} to run "
            f"(records of machine {state.store.machine})"
        )
    else:
        state.todo = list(state.plan.jobs)
    return state


def _summary(counts: collections.Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def run_matrix(state: RunState) -> RunState | int:
    cfg = state.config
    assert state.store is not None
    backend = state.backend or MatrixBackend(
        UvBackend(cfg.envs_dir, standin=os.environ.get(STANDIN_VAR)), state.existing
    )
    machine = machine_provenance(cfg.repo)
    by_env: dict[Environment, list[Job]] = collections.defaultdict(list)
    for job in state.todo:
        by_env[job.cell.env].append(job)
    total = len(state.todo)
    console = state.console
    interactive = console.is_terminal
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not interactive,
    )
    task = progress.add_task("starting", total=total)
    done = 0

    def store(record: Record, job: Job) -> None:
        nonlocal done
        state.store.append(record)  # type: ignore[union-attr]
        done += 1
        state.counts[record.outcome.value] += 1
        line = (
            f"[{done}/{total}, {total - done} left | {_summary(state.counts)}] "
            f"{job.id} -> {record.outcome.value}"
            f"{' (' + record.reason[:80] + ')' if record.reason else ''}"
        )
        progress.update(task, advance=1, description=f"{job.cell.id} | {_summary(state.counts)}")
        if not interactive:
            console.print(line, markup=False, highlight=False)

    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a preempted run stops like Ctrl-C: children ended, 130

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    try:
        with progress:
            for env, jobs in by_env.items():
                console.print(
                    f"environment {env.id}: {len(jobs)} jobs", markup=False, highlight=False
                )
                try:
                    built: BuiltEnv | None = backend.ensure(env)
                    reason = ""
                except EnvFailed as exc:
                    built, reason = None, str(exc)
                    console.print(
                        f"[red]env_failed[/] {env.id}: {escape(reason.splitlines()[0]) if reason else ''}",
                        highlight=False,
                    )
                if built is None:
                    for job in jobs:
                        store(env_failed_record(job, reason, machine), job)
                    continue
                provenance = cuda_provenance(machine, built.probe)
                console.print(
                    f"  {_how(built)} in {built.seconds:.1f} s: "
                    f"torch {built.probe.get('torch')}, lightning "
                    f"{built.probe.get('lightning', built.probe.get('pytorch_lightning'))}",
                    markup=False,
                    highlight=False,
                )
                runnable = []
                facts = CudaFacts.from_probe(built.probe)
                for job in jobs:
                    decided = precheck(job.cell.device, job.cell.precision, facts)
                    if decided is None:
                        runnable.append(job)
                    else:
                        outcome, why = decided
                        store(decided_record(job, outcome, why, built, provenance), job)
                _run_parallel(runnable, built, cfg, provenance, state, store)
    except KeyboardInterrupt:
        state.groups.kill_all()
        console.print(
            f"\n[bold yellow]interrupted[/]: {done} of {total} records stored; "
            "rerun with --resume to finish",
            highlight=False,
        )
        return 130
    except StoreError as exc:
        state.groups.kill_all()
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 1
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    console.print(
        f"done: {done} records ({_summary(state.counts)}) in {state.store.path}", highlight=False
    )
    return state


def _how(built: BuiltEnv) -> str:
    if not built.isolated:
        return "existing interpreter, probed"
    return "reused" if built.reused else "built"


def _run_parallel(
    jobs: list[Job],
    built: BuiltEnv,
    cfg: Config,
    provenance: dict[str, str],
    state: RunState,
    store: Callable[[Record, Job], None],
) -> None:
    assert cfg.timeout_s is not None and cfg.memory_limit_mb is not None
    pool = ThreadPoolExecutor(max_workers=max(1, cfg.jobs))
    pending: dict[Future[Record], Job] = {}
    queue = list(jobs)
    try:
        while queue or pending:
            while queue and len(pending) < cfg.jobs:
                job = queue.pop(0)
                pending[
                    pool.submit(
                        run_job,
                        job,
                        built,
                        timeout_s=cfg.timeout_s,
                        memory_limit_mb=cfg.memory_limit_mb,
                        provenance=provenance,
                        groups=state.groups,
                    )
                ] = job
            finished, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                job = pending.pop(future)
                store(future.result(), job)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def render(state: RunState) -> RunState | int:
    if state.config.no_report:
        return 0
    return render_reports(state.config, state.console)


def render_reports(
    cfg: Config, console: Console, check: bool = False, since: str | None = None
) -> int:
    """``since``: a git revision; index.html then opens with what changed since its records."""
    from harness.report import render_all
    from harness.writeback import WritebackError

    try:
        entries = load_entries(cfg.repros_dir)
    except EntryError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    store = Store(cfg.records_dir)
    loaded = store.load()
    # --check writes nothing, not even the quarantine; the warnings still name every line
    problems = [] if check else store.quarantine(loaded.refused)
    for warning in (*loaded.warnings, *problems):
        console.print(f"[yellow]warning:[/] {escape(str(warning))}", highlight=False)
    # a rerun of a job appends a newer record under the same key: per machine, it replaces
    # the older one; the records of other machines stay
    records = latest(loaded.records)
    prelude = ""
    if since is not None:
        from harness.diff import DiffError, Side, diff_records, html_changes, load_side

        try:
            old = load_side(since, cfg.repo)
        except DiffError as exc:
            console.print(f"[bold red]error:[/] --since: {escape(str(exc))}", highlight=False)
            return 2
        prelude = html_changes(diff_records(old, Side("now", tuple(records))), since)
    try:
        summary = render_all(records, entries, cfg.results_dir, check=check, prelude=prelude)
    except WritebackError as exc:  # an entry document without its marked blocks
        console.print(
            f"[bold red]error:[/] {escape(str(exc))}; the records are stored: fix the document and run "
            "`python -m harness report`",
            highlight=False,
        )
        return 2
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items()))
    console.print(
        f"report: {len(records)} records -> {len(summary.outputs)} outputs under "
        f"{cfg.results_dir} ({len(summary.written)} rewritten), "
        f"{len(summary.documents_updated)} entry documents updated; verdicts: {verdicts}",
        highlight=False,
    )
    if check and not summary.up_to_date:
        for path in (*summary.stale_outputs, *summary.stale_documents):
            console.print(f"[bold red]stale:[/] {escape(str(path))}", highlight=False)
        console.print("run `nox -s report` and commit the result", highlight=False)
        return 1
    return 0


STEPS: tuple[Step, ...] = (load_inputs, plan_jobs, list_or_continue, drop_done, run_matrix, render)


def run_steps(state: RunState, steps: tuple[Step, ...] = STEPS) -> int:
    result: RunState | int = state
    for step in steps:
        result = step(result)  # type: ignore[arg-type]
        if isinstance(result, int):
            return result
    return 0
