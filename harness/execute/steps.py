"""The steps of a run, in order. Each takes the state and returns it; an int stops the run
with that exit code (0 done, 1 runs left unrecorded, 130 interrupted). Bad input is raised as a
HarnessError (harness/errors.py), which the command line turns into exit 2.

    load_inputs -> plan_jobs -> list_or_continue -> drop_done -> order_jobs -> run_matrix
    -> render
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.atomic import write_atomically
from harness.config import Config
from harness.envs.backends import (
    STANDIN_VAR,
    EnvBackend,
    ExistingBackend,
    MatrixBackend,
    UvBackend,
)
from harness.envs.capabilities import CudaFacts, RuntimeFacts, before_run, needs_check
from harness.envs.provenance import machine_provenance
from harness.errors import InputError
from harness.execute import memory
from harness.execute.budget import Fit, by_value, describe_fit, estimate_from, fit
from harness.execute.plan import Job, Plan, explain_no_job, make_plan, unmatched_filter
from harness.execute.prepare import Prepared, Preparer
from harness.execute.proc import FULL_ERRNOS, DiskFull, ProcessGroups, end_own_children
from harness.execute.progress import RunProgress
from harness.execute.runner import (
    decided_record,
    env_failed_record,
    run_job,
    unservable_record,
)
from harness.execute.scheduler import Prepare, Run, Scheduler
from harness.execute.warm import FORK_AVAILABLE
from harness.outcomes import Outcome
from harness.spec.entries import Entry, load_entries
from harness.spec.matrix import Environment, Expansion, Matrix, MatrixError, load_matrix
from harness.store.jsonl import Store, StoreError
from harness.store.records import Record, RecordKey

__all__ = ["BUDGET_PLAN_STEPS", "RunState", "STEPS", "budget_fit", "order_jobs", "run_steps"]


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
    backend: EnvBackend | None = None
    existing: ExistingBackend = field(
        default_factory=lambda: ExistingBackend(os.environ.get(STANDIN_VAR))
    )
    groups: ProcessGroups = field(default_factory=ProcessGroups)
    started: float = field(default_factory=time.monotonic)  # for --budget after the plan (settle)


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
    if cfg.timeout_s is None:  # the profile's limit per run, else the matrix's
        cfg.timeout_s = state.expansion.timeout_s or matrix.timeout_s
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
    if found.refusal:  # not a Python: no environment, no record
        raise InputError(f"--python {python}: not a Python with torch: {found.refusal}")
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


def _other_profiles(state: RunState) -> dict[str, Expansion]:
    others = {}
    if state.matrix is not None:
        for name in state.matrix.profiles:
            with contextlib.suppress(MatrixError):
                others[name] = state.matrix.expand(name)
    return others


def plan_jobs(state: RunState) -> RunState | int:
    cfg = state.config
    assert state.expansion is not None
    filters = {"entry": cfg.entries, "variant": cfg.variants, "env": cfg.envs, "cell": cfg.cells}
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
        if any(filters.values()):
            # each pattern must name something of the profile, even where the others select
            unmatched = unmatched_filter(
                state.expansion,
                state.entries,
                **{f"{k}_filter": v for k, v in filters.items()},
                other_profiles=_other_profiles(state),
            )
            if unmatched:
                raise InputError(unmatched)
        if not cfg.list_only:
            _say_left_out(state)
        return state
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
    why = explain_no_job(
        state.expansion,
        state.entries,
        **{f"{k}_filter": v for k, v in filters.items()},
        other_profiles=_other_profiles(state),
        not_applicable=(*state.plan.not_applicable, *state.plan.left_out),
    )
    raise InputError(f"no job selected: {why}")


def list_or_continue(state: RunState) -> RunState | int:
    if not state.config.list_only:
        return state
    assert state.expansion is not None and state.plan is not None
    from harness.spec.matrix import describe

    cfg = state.config
    filtered = cfg.entries or cfg.variants or cfg.envs or cfg.cells
    # a filtered list shows the environments its plan selects, not the whole profile's
    only = {j.cell.env.id for j in state.plan.jobs} if filtered else None
    for line in describe(state.expansion, only):
        state.console.print(line, markup=False)
    per_env = collections.Counter(j.env.id for j in state.plan.jobs)
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
    _say_left_out(state)
    return 0


def _say_left_out(state: RunState) -> None:
    """The jobs a profile that builds only its rows left out, in one line."""
    assert state.plan is not None and state.expansion is not None
    left = state.plan.left_out
    if left:
        variants = len({(x.entry, x.variant) for x in left})
        state.console.print(
            f"{len(left)} (variant, cell) pairs of {variants} variants left out: they need "
            f"environments of their own (requires:), which profile "
            f"{state.expansion.profile!r} does not build; `--profile cpu` runs them",
            markup=False,
        )


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
    if state.config.settle_only:  # run --settle-only: the extra trials alone
        state.todo = []
    return state


def budget_fit(state: RunState) -> Fit:
    """run --order value / --budget: the jobs to do in order of value, cut to the budget
    by the stored CPU records' durations (harness/execute/budget.py)."""
    cfg = state.config
    todo = by_value(state.todo) if cfg.order == "value" or cfg.budget_s is not None else state.todo
    met: list[tuple[str, ...]] = []
    if cfg.python is not None:  # the requirement sets the interpreter already satisfies
        wanted = {job.env.requires for job in todo if job.env.requires}
        met = [r for r in wanted if state.existing.requirements(cfg.python, r).ok]
    estimate = estimate_from(
        Store(cfg.records_dir).load().records,
        cuda_start_s=cfg.cuda_start_s,  # None: measured by the GPU records, else the default
        existing=cfg.python is not None,
        met=met,
    )
    return fit(todo, estimate, slots=max(1, cfg.jobs), budget_s=cfg.budget_s)


def order_jobs(state: RunState) -> RunState | int:
    """The jobs to do in the order they run: the plan's, or (--order value, --budget) the
    most valuable first, cut to what fits the budget; what is cut is --resume's."""
    cfg = state.config
    if cfg.order != "value" and cfg.budget_s is None:
        return state
    planned = budget_fit(state)
    state.todo = list(planned.chosen)
    if cfg.budget_s is not None:
        state.console.print(
            f"budget {cfg.budget_s:g} s: {planned.kept} of {len(planned.jobs)} jobs fit "
            f"(est. {planned.estimated_s / 60:.1f} min on {planned.slots} slots); "
            + (
                f"{len(planned.left)} left for the next call (--resume), from {planned.left[0].id}"
                if planned.left
                else "nothing left"
            ),
            markup=False,
        )
    return state


def show_budget(state: RunState) -> int:
    """plan --budget: the run's plan (phases, order, estimated minutes, what is left), run
    nothing."""
    planned = budget_fit(state)
    assert state.plan is not None
    stored = len(state.plan.jobs) - len(state.todo)
    for line in describe_fit(planned, stored=stored):
        state.console.print(line, markup=False, soft_wrap=True)
    return 0


# what an installer or a file system says when the disk has no room (uv: "os error 28")
_DISK_FULL_TEXT = ("no space left on device", "os error 28", "disk quota exceeded")


def disk_full_text(text: str) -> bool:
    """True when an environment failed because its disk is full (the installer's words)."""
    low = text.lower()
    return any(t in low for t in _DISK_FULL_TEXT)


def _isolation_of(cfg: Config) -> str:
    return cfg.isolation if cfg.isolation else ("fork" if FORK_AVAILABLE else "process")


def run_matrix(state: RunState) -> RunState | int:
    """Run the jobs to do, reacting to what finishes (an environment prepared, a job ran)
    until the scheduler has nothing left. Ctrl-C or SIGTERM: every child ended, 130. A store
    or disk that cannot take a record: 1 (--keep-going records env_failed for the disk and
    goes on). A job the harness failed on has no record: the rest runs, then 1."""
    assert state.store is not None
    run = _MatrixRun(state)
    cfg = state.config
    state.console.print(
        f"limits per job: {cfg.timeout_s:g} s, host memory {cfg.memory_limit_mb} MiB "
        f"({run.bound.how})",
        markup=False,
    )
    with _term_as_interrupt():
        try:
            with run.show:
                while not run.sched.finished:
                    run.start_work()
                    run.react(timeout=0.5)
                    run.show.tick()
        except KeyboardInterrupt:
            run.stop()
            end_own_children()  # an install or health check in a preparing slot
            run.show.interrupted()
            return 130
        except (StoreError, DiskFull) as exc:
            run.stop()
            run.show.stopped(exc)
            return 1
        finally:
            run.close()
    run.show.finished(state.store.path)
    return 1 if run.sched.unrecorded else state


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """A preempted run (SIGTERM) stops as Ctrl-C does: children ended, 130."""

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _MatrixRun:
    """What run_matrix wires: the scheduler says what a free slot does, the preparer builds
    environments, the runner runs jobs (a thread of the pool per slot, each waiting on its
    child), the store keeps each record as it comes, the progress tells it. Only the run
    loop's thread calls these methods."""

    def __init__(self, state: RunState) -> None:
        cfg = self.cfg = state.config
        assert state.store is not None
        self.store = state.store
        self.groups = state.groups
        backend = state.backend or MatrixBackend(
            UvBackend(cfg.envs_dir, standin=os.environ.get(STANDIN_VAR)), state.existing
        )
        self.machine = machine_provenance(cfg.repo)
        self.isolation = _isolation_of(cfg)
        self.sched: Scheduler[Environment, Job] = Scheduler(
            state.todo, max(1, cfg.jobs), device_use=self.device_use
        )
        self.envs = Preparer(backend, self.isolation, state.groups, self.machine)
        self.show = RunProgress(state.console, self.sched)
        self.pool = ThreadPoolExecutor(max_workers=self.sched.slots)
        self.pending: dict[Future[Any], Prepare[Environment] | Run[Environment, Job]] = {}
        self.refusals_told: set[str] = set()
        self.skips: dict[RecordKey, str] = {}  # jobs the child checks, then skips: why
        # every job's host memory, CUDA jobs included: cgroup v2 where allowed, else a watchdog
        self.bound = memory.choose(cfg.memory_limit_mb or 0)

    def device_use(self, job: Job) -> str:
        """The scheduler's device tokens: what the job takes of the GPU (shared, exclusive);
        none for a CUDA cell the child only checks before it records ``skipped`` (no CUDA)."""
        return "none" if job.key in self.skips else job.device_use

    def start_work(self) -> None:
        """Fill the free slots with what the scheduler says comes next."""
        while (work := self.sched.next_work()) is not None:
            if isinstance(work, Prepare):
                self.show.preparing(work.env)
                future = self.pool.submit(self.envs.prepare, work.env)
            else:
                future = self.pool.submit(self._run, work.env, work.job)
            self.pending[future] = work

    def react(self, timeout: float) -> None:
        """Handle what finished within ``timeout``: environments prepared, jobs that ran."""
        finished, _ = wait(list(self.pending), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in finished:
            work = self.pending.pop(future)
            if isinstance(work, Prepare):
                self.prepared(work.env, future.result())
            else:
                self.ran(work.env, work.job, future)
            if self.sched.env_finished(work.env):
                self.envs.close(work.env)

    def prepared(self, env: Environment, result: Prepared) -> None:
        """An environment is ready (its jobs run next, those its facts decide are recorded
        now), or failed (each of its jobs is env_failed; a full disk stops the run)."""
        jobs = self.sched.prepared(env, failed=result.built is None)
        self.show.env_prepared(env, len(jobs))
        if result.built is None and result.cannot_serve and env.requires:
            # version advice the index cannot serve in this cell: measured, not a failure
            self.show.env_unservable(env, result.failure)
            for job in jobs:
                self._store(
                    job, unservable_record(job, result.failure, self.machine, self.isolation)
                )
            return
        if result.built is None:
            self.show.env_failed(env, result.failure)
            for job in jobs:
                self._store(
                    job, env_failed_record(job, result.failure, self.machine, self.isolation)
                )
            if not self.cfg.keep_going and disk_full_text(result.failure):
                # the next environments would fail the same way
                raise DiskFull(self.cfg.envs_dir, "where environments are built")
            return
        ready = self.envs.accept(env, result)
        self.show.env_built(ready.built, result.note)
        probe = ready.built.probe
        decided = [
            (job, found)
            for job in jobs
            if (found := before_run(job.cell.device, job.cell.precision, job.variant.needs, probe))
            is not None
        ]
        # a CUDA cell skipped here (no CUDA) on a real torch still goes to the child, which
        # imports the reproducer and checks the variant before it records ``skipped``: a
        # typo in a CUDA-only variant shows without a GPU
        checked = {
            job.key: _skip_reason(why, job, probe)
            for job, (outcome, why) in decided
            if outcome is Outcome.SKIPPED
            and job.cell.device == "cuda"
            and CudaFacts.from_probe(probe).torch is not None
        }
        self.skips.update(checked)
        decided = [(job, found) for job, found in decided if job.key not in checked]
        self.sched.withdraw(env, (job for job, _ in decided))
        for job, (outcome, why) in decided:
            record = decided_record(
                job, outcome, why, ready.built, ready.provenance, self.isolation
            )
            self._store(job, record)

    def ran(self, env: Environment, job: Job, future: Future[Any]) -> None:
        """A job ended: store its record (a full disk stops the run unless --keep-going)."""
        try:
            record = self._record_or_none(future, job)
        except DiskFull as exc:
            if not self.cfg.keep_going:
                raise
            record = env_failed_record(
                job, f"{exc} (kept going: --keep-going)", self.machine, self.isolation
            )
        if record is None:
            self.sched.lost(job)
        else:
            self._store(job, record)
        worker = self.envs.ready(env).worker
        if worker is not None and worker.refusal and env.id not in self.refusals_told:
            self.refusals_told.add(env.id)
            self.show.refused(env, worker.refusal)

    def stop(self) -> None:
        """Interrupted or cut: nothing more starts, every child and worker is ended."""
        self.sched.stop()
        self.groups.kill_all()
        self.envs.close_all()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.envs.close_all()

    def _run(self, env: Environment, job: Job) -> Record:
        """In a slot's thread: one job, forked from the environment's warm worker or fresh."""
        assert self.cfg.timeout_s is not None and self.cfg.memory_limit_mb is not None
        ready = self.envs.ready(env)
        return run_job(
            job,
            ready.built,
            timeout_s=self.cfg.timeout_s,
            memory_limit_mb=self.cfg.memory_limit_mb,
            provenance=ready.provenance,
            groups=self.groups,
            worker=self.envs.worker_for(env),
            skip=self.skips.get(job.key),
            bound=self.bound,
        )

    def _store(self, job: Job, record: Record) -> None:
        self.store.append(record)
        self.sched.recorded(job, record.outcome.value)
        self.show.recorded(job, record)

    def _record_or_none(self, future: Future[Any], job: Job) -> Record | None:
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
            self.show.harness_error(job, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a harness fault on one job ends no run
            self.show.harness_error(job, exc)
            return None
        assert isinstance(record, Record)
        return record


def _skip_reason(why: str, job: Job, probe: dict[str, str]) -> str:
    """Why a CUDA cell is skipped here, with what its variant's needs would decide here."""
    needs = needs_check(job.variant.needs, RuntimeFacts.from_probe(probe))
    if needs is None:
        return why
    return f"{why}; its needs ({', '.join(sorted(job.variant.needs))}) here: {needs[1]}"


def render(state: RunState) -> RunState | int:
    if state.config.no_report:
        return 0
    from harness.report.pipeline import render_reports

    before = _committed_changes(state.config.repo)
    code = render_reports(state.config, state.console)
    _say_what_changed(state, before)
    return code


def _committed_changes(repo: Path) -> set[str] | None:
    """The tracked files that differ from the commit now (git), or None outside a checkout."""
    import subprocess

    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "diff",
                "--name-only",
                "HEAD",
                "--",
                "results",
                "repros",
                "README.md",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.split())


def _say_what_changed(state: RunState, before: set[str] | None) -> None:
    """The run's last lines: the record file it wrote, how many committed files its report
    rewrote, and how to put them back (a newcomer's first run rewrites the
    committed pages: it says so)."""
    console = state.console
    if state.store is not None:
        console.print(f"records: {escape(str(state.store.path))}")
    after = _committed_changes(state.config.repo)
    if before is None or after is None:
        return
    rewritten = sorted(after - before)
    if not rewritten:
        console.print("committed pages: none rewritten (the records changed no committed page)")
        return
    console.print(
        f"committed pages: {len(rewritten)} rewritten with this run's records (compatibility "
        "pages, entry documents, the README's findings); `git diff --stat` shows them, "
        "`git checkout -- results repros README.md` puts them back"
    )


def settle_open(state: RunState) -> RunState | int:
    """run --settle S: extra trials, a round at a time, for the run's flaky cells and the
    claims whose interval straddles the decision (harness/execute/settle.py), until they are
    decided or the seconds (and what is left of --budget) end. Without --settle: nothing."""
    cfg = state.config
    if cfg.settle_s is None:
        return state
    assert state.plan is not None and state.store is not None
    from harness.execute.settle import Question, flaky_cells, is_open

    planned: dict[tuple[str, str, str], Job] = {}
    for job in state.plan.jobs:
        planned.setdefault((job.entry.id, job.variant.name, job.cell.id), job)
    settling = _Settling(cfg, {e.id: e for e in state.entries}, planned, state.store.machine)
    records = settling.stored()
    variants = {(cid[0], cid[1]) for cid in planned}
    questions = [
        Question(eid, claim, subject, v.label)
        for (eid, claim, subject), v in settling.verdicts(records).items()
        if is_open(v) and (eid, subject) in variants
    ]
    flaky_before = flaky_cells(records, planned)
    state.console.print(
        f"settle: {len(flaky_before)} flaky cell(s), {len(questions)} open claim(s); "
        f"at most {cfg.settle_s:g} s of extra trials",
        markup=False,
    )
    ran = settling.rounds_of_trials(state, records, questions)
    if isinstance(ran, int):
        return ran
    records, questions = ran
    settling.write(flaky_before, set(flaky_cells(records, planned)), questions)
    settling.say(state.console, questions)
    return state


@dataclass
class _Settling:
    """What ``settle_open`` keeps across its rounds."""

    cfg: Config
    entries: dict[str, Entry]
    planned: dict[tuple[str, str, str], Job]
    me: Any  # this run's machine (store.machine)
    began: float = field(default_factory=time.monotonic)
    extra: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    settled: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    ended: str = "nothing left open"

    def stored(self) -> list[Record]:
        """The newest stored records of the planned entries, read as the report reads them."""
        from harness.aggregate.cells import reread
        from harness.store.jsonl import latest

        wanted = {cid[0] for cid in self.planned}
        records = Store(self.cfg.records_dir).load().records
        rs = [r for r in latest(records) if r.entry in wanted]
        out: list[Record] = []
        for eid in wanted:
            mine = [r for r in rs if r.entry == eid]
            out += reread(mine, self.entries[eid]) if eid in self.entries else mine
        return out

    def verdicts(self, records: Sequence[Record]) -> dict[tuple[str, str, str], Any]:
        from harness.aggregate.cells import aggregate_entry

        found = {}
        for eid in sorted({cid[0] for cid in self.planned}):
            agg = aggregate_entry(self.entries.get(eid), [r for r in records if r.entry == eid])
            for v in agg.verdicts:
                found[(eid, v.claim, v.subject)] = v
        return found

    def rounds_of_trials(
        self, state: RunState, records: list[Record], questions: list[Any]
    ) -> tuple[list[Record], list[Any]] | int:
        """Extra trials a round at a time until nothing is open or the time ends; the
        records and the questions still open after, or the exit code that stopped the run."""
        from harness.execute.settle import next_round

        cfg = self.cfg
        estimate = estimate_from(
            Store(cfg.records_dir).load().records,
            cuda_start_s=cfg.cuda_start_s,  # None: the GPU records' measured start, else the default
        )
        while True:
            jobs, _ = next_round(
                self.planned, records, questions, lambda r: r.machine_key == self.me
            )
            if not jobs:
                return records, questions
            assert cfg.settle_s is not None
            left = cfg.settle_s - (time.monotonic() - self.began)
            if cfg.budget_s is not None:
                left = min(left, cfg.budget_s - (time.monotonic() - state.started))
            chosen = fit(jobs, estimate, slots=max(1, cfg.jobs), budget_s=max(0.0, left)).chosen
            if not chosen:
                self.ended = "the budget ended"
                return records, questions
            state.todo = list(chosen)
            result = run_matrix(state)
            if isinstance(result, int):
                return result
            self.rounds += 1
            for job in chosen:
                self.extra[(job.entry.id, job.variant.name, job.cell.id)] += 1
            records = self.stored()
            questions = self._still_open(questions, self.verdicts(records))
            if len(chosen) < len(jobs):
                self.ended = "the budget ended"
                return records, questions

    def _still_open(self, questions: list[Any], now: dict[tuple[str, str, str], Any]) -> list[Any]:
        """The questions still open; the others noted as settled, with their extra runs."""
        from harness.execute.settle import is_open

        still = []
        for q in questions:
            v = now.get((q.entry, q.claim, q.subject))
            if v is not None and is_open(v):
                still.append(q)
                continue
            runs = sum(
                n for cid, n in self.extra.items() if cid[0] == q.entry and cid[1] == q.subject
            )
            self.settled.append(
                {
                    "entry": q.entry,
                    "claim": q.claim,
                    "subject": q.subject,
                    "before": q.label,
                    "after": v.label if v else "",
                    "extra_runs": runs,
                }  # fmt: skip
            )
        return still

    def write(
        self, flaky_before: Sequence[Any], flaky_after: set[Any], questions: list[Any]
    ) -> None:
        """results/settled/<night>-<machine>.json: what was settled, and with how many runs."""
        from harness.execute.settle import settled_json

        result_doc = {
            "machine": self.me.name,
            "settle_s": self.cfg.settle_s,
            "spent_s": round(time.monotonic() - self.began, 1),
            "rounds": self.rounds,
            "ended": self.ended,
            "claims_settled": self.settled,
            "claims_open": [dataclasses.asdict(q) for q in questions],
            "flaky_cells": [
                {
                    "entry": c[0],
                    "variant": c[1],
                    "cell": c[2],
                    "extra_runs": self.extra[c],
                    "decided": c not in flaky_after,
                }  # fmt: skip
                for c in flaky_before
            ],
            "extra_runs": sum(self.extra.values()),
        }
        night = time.strftime("%Y-%m-%d", time.gmtime())
        folder = self.cfg.results_dir / "settled"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{night}-{self.me.name}.json"
        write_atomically(target, settled_json(result_doc).encode("utf-8"))

    def say(self, console: Console, questions: list[Any]) -> None:
        for s in self.settled:
            console.print(
                f"settled by extra trials: {s['entry']} {s['claim']}: {s['before']} -> "
                f"{s['after']} ({s['extra_runs']} extra runs)",
                markup=False,
            )
        for q in questions:
            console.print(f"still open: {q.entry} {q.claim}: {q.label}", markup=False)
        console.print(
            f"settle: {sum(self.extra.values())} extra runs in {self.rounds} round(s); "
            f"{self.ended}",
            markup=False,
        )


STEPS: tuple[Step, ...] = (
    load_inputs,
    plan_jobs,
    list_or_continue,
    drop_done,
    order_jobs,
    run_matrix,
    settle_open,
    render,
)
# plan --budget: the run's plan, nothing run
BUDGET_PLAN_STEPS: tuple[Step, ...] = (load_inputs, plan_jobs, drop_done, show_budget)


def run_steps(state: RunState, steps: tuple[Step, ...] = STEPS) -> int:
    result: RunState | int = state
    for step in steps:
        result = step(result)  # type: ignore[arg-type]
        if isinstance(result, int):
            return result
    return 0
