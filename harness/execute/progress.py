"""What a run shows as it goes: on a terminal a rich progress bar whose description is the
run's status; elsewhere (CI logs, pipes) one line per stored record. The counts are the
scheduler's (harness/execute/scheduler.py); this module only words them."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.domain import clip
from harness.envs.backends import BuiltEnv
from harness.execute.plan import Job
from harness.execute.scheduler import Scheduler
from harness.spec.matrix import Environment
from harness.store.records import Record

__all__ = ["PREPARING_EVERY_S", "RunProgress", "summary"]

PREPARING_EVERY_S = 30.0  # without a terminal: a line this often while an environment builds


def summary(counts: collections.Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()))


def _how(built: BuiltEnv) -> str:
    if not built.isolated:
        return "existing interpreter, probed"
    return "reused" if built.reused else "built"


class RunProgress:
    """The run's console: a context manager around the progress bar (disabled off a
    terminal), and one method per thing the run tells."""

    def __init__(self, console: Console, sched: Scheduler[Environment, Job]) -> None:
        self.console = console
        self.sched = sched
        self.interactive = console.is_terminal
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not self.interactive,
        )
        self._task = self._bar.add_task("starting", total=sched.total)
        # when each environment began preparing, and when that was last told (monotonic
        # seconds): a cold build takes minutes, which must never be silence
        self._since: dict[str, float] = {}
        self._told: dict[str, float] = {}

    def __enter__(self) -> RunProgress:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bar.__exit__(kind, exc, tb)

    def status(self) -> str:
        s = self.sched
        now = time.monotonic()
        busy = ", ".join(
            f"{e.id} ({now - self._since[e.id]:.0f} s)" if e.id in self._since else e.id
            for e in s.preparing
        )
        busy = f" | preparing {busy}" if busy else ""
        return f"{s.left} left, {s.failed} failed | {summary(s.counts)}{busy}"

    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    # -- events of the run -----------------------------------------------------------------

    def preparing(self, env: Environment) -> None:
        """``env`` begins to be built (or checked, where it was built before)."""
        self._since[env.id] = time.monotonic()
        self.say(f"preparing {env.id} (building it, or checking the one built before)")
        self._bar.update(self._task, description=self.status())

    def tick(self) -> None:
        """The run loop's heartbeat: how long each environment being prepared has taken, in
        the bar's status on a terminal, else a line every PREPARING_EVERY_S."""
        if not self.sched.preparing:
            return
        if self.interactive:
            self._bar.update(self._task, description=self.status())
            return
        now = time.monotonic()
        for env in self.sched.preparing:
            since = self._since.get(env.id)
            if since is not None and now - self._told.get(env.id, since) >= PREPARING_EVERY_S:
                self._told[env.id] = now
                self.say(f"  still preparing {env.id}: {now - since:.0f} s")

    def recorded(self, job: Job, record: Record) -> None:
        """``record`` of ``job`` is stored (and counted by the scheduler)."""
        self._bar.update(self._task, advance=1, description=f"{job.cell.id} | {self.status()}")
        if not self.interactive:
            self.say(
                f"[{self.sched.done}/{self.sched.total}, {self.status()}] {job.id} -> "
                f"{record.outcome.value}{' (' + clip(record.reason, 80) + ')' if record.reason else ''}"
            )

    def env_prepared(self, env: Environment, jobs: int) -> None:
        self._since.pop(env.id, None)
        self._told.pop(env.id, None)
        self.say(f"environment {env.id}: {jobs} jobs")

    def env_failed(self, env: Environment, failure: str) -> None:
        self.console.print(
            f"[red]env_failed[/] {env.id}: {escape(failure.splitlines()[0]) if failure else ''}",
        )

    def env_unservable(self, env: Environment, failure: str) -> None:
        first = failure.splitlines()[0] if failure else ""
        self.console.print(f"[yellow]unsupported[/] {env.id}: {escape(first)}")

    def env_built(self, built: BuiltEnv, note: str) -> None:
        probe = built.probe
        if "lightning" in probe or "pytorch_lightning" not in probe:
            lightning = f"lightning {probe.get('lightning')}"
            if "lightning" not in probe and not built.env.installs_lightning:
                lightning = "no lightning"  # a derived environment of a lightning-free reproducer
        else:
            lightning = f"pytorch-lightning {probe['pytorch_lightning']}"
        self.say(
            f"  {_how(built)} in {built.seconds:.1f} s: torch {probe.get('torch')}, "
            f"{lightning}{'; ' + note if note else ''}"
        )

    def refused(self, env: Environment, refusal: str) -> None:
        self.say(f"  {env.id}: {refusal}; fresh interpreters from here")

    def harness_error(self, job: Job, exc: BaseException) -> None:
        self.console.print(
            f"[bold red]harness error[/] on {escape(job.id)}: {escape(type(exc).__name__)}: "
            f"{escape(clip(str(exc), 300))}; no record stored (--resume runs it again)",
        )

    # -- how it ended ----------------------------------------------------------------------

    def interrupted(self) -> None:
        self.console.print(
            f"\n[bold yellow]interrupted[/]: {self.sched.done} of {self.sched.total} records "
            "stored; rerun with --resume to finish",
        )

    def stopped(self, exc: BaseException) -> None:
        self.console.print(
            f"[bold red]error:[/] {escape(str(exc))}; {self.sched.done} of {self.sched.total} "
            "records stored",
        )

    def finished(self, store: Path) -> None:
        self.console.print(
            f"done: {self.sched.done} records ({summary(self.sched.counts)}) in {store}",
        )
        if self.sched.unrecorded:
            self.console.print(
                f"[bold red]error:[/] {len(self.sched.unrecorded)} job(s) left without a "
                "record by a harness error (above); rerun with --resume",
            )
