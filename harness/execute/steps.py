"""The steps of a run, in order. Each takes the state and returns it; an int stops the run
with that exit code (0 done, 1 runs left unrecorded, 130 interrupted). Bad input is raised as a
HarnessError (harness/errors.py), which the command line turns into exit 2.

    load_inputs -> plan_jobs -> list_or_continue -> drop_done -> run_matrix -> render
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.config import Config
from harness.envs.backends import (
    CHILD,
    STANDIN_VAR,
    BuiltEnv,
    EnvBackend,
    EnvFailed,
    ExistingBackend,
    MatrixBackend,
    UvBackend,
)
from harness.envs.capabilities import CudaFacts, precheck
from harness.envs.provenance import cuda_provenance, machine_provenance
from harness.errors import InputError
from harness.execute.plan import Job, Plan, explain_no_job, make_plan
from harness.execute.proc import FULL_ERRNOS, DiskFull, ProcessGroups, end_own_children
from harness.execute.runner import decided_record, env_failed_record, run_job
from harness.execute.warm import FORK_AVAILABLE, WarmProber, WarmWorker, WorkerFailed
from harness.spec.entries import Entry, load_entries
from harness.spec.matrix import Environment, Expansion, Matrix, MatrixError, load_matrix
from harness.store.jsonl import Store, StoreError
from harness.store.records import Record

__all__ = ["RunState", "STEPS", "run_steps"]


@dataclass
class RunState:
    config: Config
    console: Console
    expansion: Expansion | None = None
    matrix: Matrix | None = None
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
    unrecorded: list[Job] = field(default_factory=list)  # jobs the harness itself failed on


Step = Callable[[RunState], "RunState | int"]


def load_inputs(state: RunState) -> RunState | int:
    cfg = state.config
    matrix = state.matrix = load_matrix(cfg.matrix_path)
    state.expansion = matrix.expand(cfg.profile)
    if cfg.trials is not None:
        state.expansion = dataclasses.replace(state.expansion, trials=cfg.trials)
    state.entries = load_entries(cfg.repros_dir)
    if not state.entries:
        raise InputError(f"no entries found under {cfg.repros_dir}")
    if cfg.python is not None:
        _existing_interpreter(state, matrix)
    if cfg.timeout_s is None:
        cfg.timeout_s = matrix.timeout_s
    if cfg.memory_limit_mb is None:
        cfg.memory_limit_mb = matrix.memory_limit_mb
    return state


def _existing_interpreter(state: RunState, matrix: Matrix) -> None:
    """run --python: the profile's cells in the one environment that interpreter is."""
    python = state.config.python
    assert python is not None
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise InputError(f"--python {python}: no such executable file")
    found = state.existing.inspect(python)
    seen = found.seen
    state.console.print(
        f"interpreter {python}: Python {seen.get('python', '?')}, torch "
        f"{seen.get('torch', 'missing')}, lightning "
        f"{seen.get('lightning', seen.get('pytorch_lightning', 'missing'))}, CUDA "
        f"{'available' if seen.get('cuda_available') == 'True' else 'not available'} "
        f"-> environment {found.env.id}",
        markup=False,
    )
    if found.problem:
        state.console.print(f"[red]env_failed[/] {found.env.id}: {escape(found.problem)}")
    state.expansion = matrix.expand_for(found.env, state.config.profile)
    if state.config.trials is not None:
        state.expansion = dataclasses.replace(state.expansion, trials=state.config.trials)


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
    if state.plan.jobs:
        return state
    filters = {"entry": cfg.entries, "variant": cfg.variants, "env": cfg.envs, "cell": cfg.cells}
    if not any(filters.values()):
        if cfg.shard != (1, 1):  # a shard of a profile with fewer jobs than shards
            state.console.print(f"nothing to run: shard {cfg.shard[0]}/{cfg.shard[1]} is empty")
        return state if cfg.list_only else 0
    if (
        cfg.shard != (1, 1)
        and make_plan(
            state.expansion,
            state.entries,
            **{f"{k}_filter": v for k, v in filters.items()},
        ).jobs
    ):
        state.console.print(
            f"nothing to run: the filters' jobs fall in other shards than {cfg.shard[0]}/"
            f"{cfg.shard[1]}"
        )
        return state if cfg.list_only else 0
    others = {}
    if state.matrix is not None:
        for name in state.matrix.profiles:
            with contextlib.suppress(MatrixError):
                others[name] = state.matrix.expand(name)
    why = explain_no_job(
        state.expansion,
        state.entries,
        **{f"{k}_filter": v for k, v in filters.items()},
        other_profiles=others,
        not_applicable=state.plan.not_applicable,
    )
    raise InputError(f"no job selected: {why}")


def list_or_continue(state: RunState) -> RunState | int:
    if not state.config.list_only:
        return state
    assert state.expansion is not None and state.plan is not None
    from harness.spec.matrix import describe

    for line in describe(state.expansion):
        state.console.print(line, markup=False)
    per_env = collections.Counter(j.cell.env.id for j in state.plan.jobs)
    state.console.print(
        f"\n{len(state.plan.jobs)} jobs in profile {state.expansion.profile!r}"
        f" ({state.expansion.trials} trial(s) each):",
        markup=False,
    )
    for env_id, n in sorted(per_env.items()):
        state.console.print(f"  {env_id}: {n} jobs", markup=False)
    if state.plan.lightning_free:
        state.console.print(
            f"{len(state.plan.lightning_free)} entries import no lightning: they run once per torch release and "
            f"python, in {', '.join(state.plan.lightning_free_envs) or 'no environment'}",
            markup=False,
            soft_wrap=True,
        )
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
        state.console.print(f"[yellow]warning:[/] {escape(str(warning))}")
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


FAILED = ("crashed", "timeout", "env_failed")  # runs that measured nothing about the variant
# what an installer or a file system says when the disk has no room (uv: "os error 28")
_DISK_FULL_TEXT = ("no space left on device", "os error 28", "disk quota exceeded")


def disk_full_text(text: str) -> bool:
    """True when an environment failed because its disk is full (the installer's words)."""
    low = text.lower()
    return any(t in low for t in _DISK_FULL_TEXT)


def _summary(counts: collections.Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()))


@dataclass
class EnvRun:
    """One environment's share of the run: its jobs, and what preparing it gave."""

    env: Environment
    jobs: collections.deque[Job]
    prepared: bool = False
    preparing: bool = False
    built: BuiltEnv | None = None
    worker: WarmWorker | None = None
    provenance: dict[str, str] = field(default_factory=dict)  # the machine's, with CUDA's
    running: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        return self.prepared and not self.jobs and not self.running


@dataclass(frozen=True)
class Prepared:
    """What preparing an environment gave: built (or failed) and its warm worker."""

    built: BuiltEnv | None
    failure: str = ""
    worker: WarmWorker | None = None
    note: str = ""


def _isolation_of(cfg: Config) -> str:
    return cfg.isolation if cfg.isolation else ("fork" if FORK_AVAILABLE else "process")


def _prepare(
    backend: EnvBackend, env: Environment, isolation: str, groups: ProcessGroups
) -> Prepared:
    """Build or health-check ``env`` and start its warm worker (runs in a slot of its own).
    With isolation "fork" the worker's imports are the health check (one import)."""
    prober = WarmProber(CHILD, groups, env.id) if isolation == "fork" else None
    try:
        built = backend.ensure(env, prober)
    except EnvFailed as exc:
        if prober is not None:
            prober.discard()
        return Prepared(None, str(exc))
    if prober is None:
        return Prepared(built)
    if prober.worker is None and not prober.failure:  # checked another way: start one now
        worker = WarmWorker(built.python, CHILD, built.imports, groups, env.id, built.isolated)
        try:
            found = worker.start()
        except WorkerFailed as exc:
            lines = str(exc).strip().splitlines()
            prober.failure = lines[-1] if lines else "no reason given"
        else:
            if found.missing:
                worker.stop()
                prober.failure = "; ".join(f"{k}: {v}" for k, v in found.missing.items())
            else:
                prober.worker = worker
    worker = prober.worker
    if worker is None:
        return Prepared(
            built, note=f"warm worker did not start ({prober.failure}): fresh interpreters"
        )
    return Prepared(built, worker=worker, note=f"warm worker imported in {worker.import_s:.1f} s")


def _worker_for(run: EnvRun, groups: ProcessGroups) -> WarmWorker | None:
    """The environment's warm worker, started anew when the last one died or hung."""
    with run.lock:
        worker = run.worker
        if worker is None or worker.alive:
            return worker
        assert run.built is not None
        worker.stop()
        built = run.built
        fresh = WarmWorker(built.python, CHILD, built.imports, groups, run.env.id, built.isolated)
        try:
            healthy = not fresh.start().missing
        except WorkerFailed:
            healthy = False
        if not healthy:
            fresh.stop()
            run.worker = None  # the rest of this environment runs in fresh interpreters
            return None
        run.worker = fresh
        return fresh


def run_matrix(state: RunState) -> RunState | int:
    cfg = state.config
    assert state.store is not None
    backend = state.backend or MatrixBackend(
        UvBackend(cfg.envs_dir, standin=os.environ.get(STANDIN_VAR)), state.existing
    )
    machine = machine_provenance(cfg.repo)
    isolation = _isolation_of(cfg)
    by_env: dict[Environment, list[Job]] = collections.defaultdict(list)
    for job in state.todo:
        by_env[job.cell.env].append(job)
    runs = [EnvRun(env, collections.deque(jobs)) for env, jobs in by_env.items()]
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
    preparing: list[str] = []

    def status() -> str:
        failed = sum(state.counts[k] for k in FAILED)
        busy = f" | preparing {', '.join(preparing)}" if preparing else ""
        return f"{total - done} left, {failed} failed | {_summary(state.counts)}{busy}"

    def store(record: Record, job: Job) -> None:
        nonlocal done
        state.store.append(record)  # type: ignore[union-attr]
        done += 1
        state.counts[record.outcome.value] += 1
        progress.update(task, advance=1, description=f"{job.cell.id} | {status()}")
        if not interactive:
            console.print(
                f"[{done}/{total}, {status()}] {job.id} -> {record.outcome.value}"
                f"{' (' + record.reason[:80] + ')' if record.reason else ''}",
                markup=False,
            )

    def say(text: str) -> None:
        console.print(text, markup=False)

    def prepared(run: EnvRun, result: Prepared) -> None:
        run.prepared, run.preparing = True, False
        preparing.remove(run.env.id)
        run.built, run.worker = result.built, result.worker
        say(f"environment {run.env.id}: {len(run.jobs)} jobs")
        built = result.built
        if built is None:
            console.print(
                f"[red]env_failed[/] {run.env.id}: "
                f"{escape(result.failure.splitlines()[0]) if result.failure else ''}",
            )
            while run.jobs:
                job = run.jobs.popleft()
                store(env_failed_record(job, result.failure, machine, isolation), job)
            if not cfg.keep_going and disk_full_text(result.failure):
                # the next environments would fail the same way
                raise DiskFull(cfg.envs_dir, "where environments are built")
            return
        run.provenance = provenance = cuda_provenance(machine, built.probe)
        say(
            f"  {_how(built)} in {built.seconds:.1f} s: "
            f"torch {built.probe.get('torch')}, lightning "
            f"{built.probe.get('lightning', built.probe.get('pytorch_lightning'))}"
            f"{'; ' + result.note if result.note else ''}"
        )
        runnable: collections.deque[Job] = collections.deque()
        facts = CudaFacts.from_probe(built.probe)
        for job in run.jobs:
            decided = precheck(job.cell.device, job.cell.precision, facts)
            if decided is None:
                runnable.append(job)
            else:
                outcome, why = decided
                store(decided_record(job, outcome, why, built, provenance, isolation), job)
        run.jobs = runnable

    def run_one(run: EnvRun, job: Job) -> Record:
        assert run.built is not None and cfg.timeout_s is not None
        assert cfg.memory_limit_mb is not None
        return run_job(
            job,
            run.built,
            timeout_s=cfg.timeout_s,
            memory_limit_mb=cfg.memory_limit_mb,
            provenance=run.provenance,
            groups=state.groups,
            worker=_worker_for(run, state.groups),
        )

    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a preempted run stops like Ctrl-C: children ended, 130

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    slots = max(1, cfg.jobs)
    pool = ThreadPoolExecutor(max_workers=slots)
    pending: dict[Future[object], tuple[EnvRun, Job | None]] = {}
    refusals_told: set[str] = set()
    try:
        with progress:
            while any(not r.finished for r in runs):
                while len(pending) < slots:
                    picked = _next_work(runs, slots)
                    if picked is None:
                        break
                    run, job = picked
                    if job is None:
                        run.preparing = True
                        preparing.append(run.env.id)
                        progress.update(task, description=status())
                        future = pool.submit(_prepare, backend, run.env, isolation, state.groups)
                    else:
                        run.running += 1
                        future = pool.submit(run_one, run, job)
                    pending[future] = (run, job)
                finished, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    run, job = pending.pop(future)
                    if job is None:
                        prepared(run, future.result())  # type: ignore[arg-type]
                    else:
                        run.running -= 1
                        try:
                            record = _record_or_none(future, job, state)
                        except DiskFull as exc:
                            if not cfg.keep_going:
                                raise
                            record = env_failed_record(
                                job, f"{exc} (kept going: --keep-going)", machine, isolation
                            )
                        if record is not None:
                            store(record, job)
                        worker = run.worker
                        if (
                            worker is not None
                            and worker.refusal
                            and run.env.id not in refusals_told
                        ):
                            refusals_told.add(run.env.id)
                            say(f"  {run.env.id}: {worker.refusal}; fresh interpreters from here")
                    if run.finished and run.worker is not None:
                        run.worker.stop()
                        run.worker = None
    except KeyboardInterrupt:
        state.groups.kill_all()
        _stop_workers(runs)
        end_own_children()  # an install or health check in a preparing slot
        console.print(
            f"\n[bold yellow]interrupted[/]: {done} of {total} records stored; "
            "rerun with --resume to finish",
        )
        return 130
    except (StoreError, DiskFull) as exc:
        state.groups.kill_all()
        _stop_workers(runs)
        console.print(
            f"[bold red]error:[/] {escape(str(exc))}; {done} of {total} records stored",
        )
        return 1
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_workers(runs)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    console.print(f"done: {done} records ({_summary(state.counts)}) in {state.store.path}")
    if state.unrecorded:
        console.print(
            f"[bold red]error:[/] {len(state.unrecorded)} job(s) left without a record by a "
            "harness error (above); rerun with --resume",
        )
        return 1
    return state


def _record_or_none(future: Future[object], job: Job, state: RunState) -> Record | None:
    """A job's record; a full disk stops the run (DiskFull); any other harness error on
    one job is named and leaves it without a record (the run goes on, then exits 1, and
    --resume runs it again)."""
    try:
        record = future.result()
    except DiskFull:
        raise
    except OSError as exc:
        if exc.errno in FULL_ERRNOS:
            raise DiskFull(exc.filename or "the run folders' TMPDIR") from exc
        _unrecorded(state, job, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - a harness fault on one job ends no run
        _unrecorded(state, job, exc)
        return None
    assert isinstance(record, Record)
    return record


def _how(built: BuiltEnv) -> str:
    if not built.isolated:
        return "existing interpreter, probed"
    return "reused" if built.reused else "built"


LOOKAHEAD = 2  # with one slot: environments prepared (or being prepared) and not finished


def _next_work(runs: list[EnvRun], slots: int = 1) -> tuple[EnvRun, Job | None] | None:
    """What a free slot does next: prepare the next environment, else the next job of the
    earliest prepared one. Pure bookkeeping over ``runs``; (run, None) means "prepare run".

    Preparing (a build, or a health check that is the warm worker's one import) comes first,
    so that it overlaps the runs of the environment before it. Up to ``slots`` environments
    are prepared at once (where environments hold few jobs, a run is a row of imports: one
    at a time would leave the other slots waiting), with at most LOOKAHEAD + slots - 1
    environments open (prepared or preparing, not finished: each holds a warm worker)."""
    open_envs = [r for r in runs if (r.prepared or r.preparing) and not r.finished]
    preparing = sum(1 for r in runs if r.preparing)
    if preparing < max(1, slots) and len(open_envs) < LOOKAHEAD + max(1, slots) - 1:
        for r in runs:
            if not r.prepared and not r.preparing:
                return r, None
    for r in runs:
        if r.prepared and r.jobs:
            return r, r.jobs.popleft()
    return None


def _stop_workers(runs: list[EnvRun]) -> None:
    for r in runs:
        if r.worker is not None:
            r.worker.stop()
            r.worker = None


def _unrecorded(state: RunState, job: Job, exc: BaseException) -> None:
    """A job the harness itself failed on: no record (nothing was measured), named, and
    the run goes on; it ends non-zero and --resume runs the job again."""
    state.unrecorded.append(job)
    state.console.print(
        f"[bold red]harness error[/] on {escape(job.id)}: {escape(type(exc).__name__)}: "
        f"{escape(str(exc)[:300])}; no record stored (--resume runs it again)",
    )


def render(state: RunState) -> RunState | int:
    if state.config.no_report:
        return 0
    return render_reports(state.config, state.console)


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
    from harness.report.outputs import render_all
    from harness.report.writeback import WritebackError
    from harness.store.columnar import load_latest
    from harness.store.snapshot import cache_dir

    entries = load_entries(cfg.repros_dir)
    store = Store(cfg.records_dir)
    # a rerun of a job appends a newer record under the same key: per machine, it replaces
    # the older one; the records of other machines stay (read by the columnar engine: what
    # latest(store.load().records) gives, see harness/store/columnar.py), from the snapshots of
    # the record files where they hold (--check writes none: harness/store/snapshot.py)
    loaded = load_latest(store, cache_dir(cfg.records_dir) if cache else None, update=not check)
    # --check writes nothing, not even the quarantine; the warnings still name every line
    problems = [] if check else store.quarantine(loaded.refused)
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
    try:
        summary = render_all(
            loaded,
            entries,
            cfg.results_dir,
            check=check,
            prelude=prelude,
            domains=_domains(cfg, console),
            cache=cache,
        )
    except WritebackError as exc:  # an entry document without its marked blocks
        raise WritebackError(
            exc.path,
            exc.line,
            f"{exc.problem}; the records are stored: fix the document and run "
            "`python -m harness report`",
        ) from exc
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items()))
    console.print(
        f"report: {len(loaded)} records -> {len(summary.outputs)} outputs under "
        f"{cfg.results_dir} ({len(summary.written)} rewritten), "
        f"{len(summary.documents_updated)} entry documents updated; verdicts: {verdicts}",
    )
    if check and not summary.up_to_date:
        for path in (*summary.stale_outputs, *summary.stale_documents):
            console.print(f"[bold red]stale:[/] {escape(str(path))}")
        console.print("run `nox -s report` and commit the result")
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
