"""The host side of the warm worker: one long-lived process per environment that imports
torch and lightning once and forks an isolated child per job (``child.py --worker``).

A child is isolated as a fresh interpreter is (harness/execute/proc.py): its own session and
process group, the memory limit on top of what the worker already mapped, the job's
stdout and stderr in bounded files, the result read from a file and the exit status as
the fallback. The timeout is enforced here, on the child's process group, exactly as for
a fresh interpreter. What is new is the worker itself, which can die or hang: the job it
held then ends as a ``crashed`` or ``timeout`` record that says so, and the next job
starts a new worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.envs.backends import ProbeResult, run_probe
from harness.execute.memory import Bound
from harness.execute.proc import (
    TERM_GRACE_S,
    TOKEN_VAR,
    ChildResult,
    DiskFull,
    ProcessGroups,
    become_subreaper,
    disk_full,
    end_strays,
    new_token,
    read_result,
    signal_group,
    tail_of,
)

__all__ = [
    "FORK_AVAILABLE",
    "ANSWER_GRACE_S",
    "Refused",
    "WarmProber",
    "WarmWorker",
    "WorkerFailed",
]

# where fork isolation works: a fork() and a /proc to read the worker's mapped memory from
FORK_AVAILABLE = hasattr(os, "fork") and sys.platform.startswith("linux")
# how long a live worker may take to answer after its child's group was killed
ANSWER_GRACE_S = 5.0
START_TIMEOUT_S = 600.0  # importing torch on a loaded machine can take minutes


class WorkerFailed(Exception):
    """The worker did not start: its imports failed, or it died or hung while importing."""


@dataclass(frozen=True)
class Refused:
    """The worker would not fork (CUDA is initialised in it); run the job another way."""

    reason: str


_DEAD = object()  # put on every waiting job's queue when the worker's stdout closes


class WarmWorker:
    """One warm worker process; ``run`` may be called from several threads at once."""

    def __init__(
        self,
        python: Path,
        child_script: Path,
        imports: tuple[tuple[str, ...], ...],
        groups: ProcessGroups | None = None,
        label: str = "",
        isolated: bool = True,
    ) -> None:
        self.python = python
        self.isolated = isolated  # run with -I (an existing interpreter keeps its PYTHONPATH)
        self.child_script = child_script
        self.imports = imports
        self.groups = groups
        self.label = label
        self.probe = ProbeResult({}, {})  # what its imports found: the health check's report
        self.import_s = 0.0
        self.refusal: str | None = None  # why it refused to fork; then every job runs fresh
        self._proc: subprocess.Popen[bytes] | None = None
        self._token = new_token("worker")  # its jobs' daemons carry it (proc.end_strays)
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._write_lock = threading.Lock()
        self._waiting: dict[str, queue.Queue[object]] = {}
        self._waiting_lock = threading.Lock()
        self._next_id = 0
        self._dead = False
        self._ready: queue.Queue[dict[str, Any] | None] = queue.Queue()

    # -- life cycle ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._dead and self._proc.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ProbeResult:
        """Start the worker and wait until it has imported; return what the imports found
        (the health check's report: versions, CUDA facts, the modules that did not import)."""
        become_subreaper()  # the worker's jobs' daemons come here if the worker dies
        self._dir = tempfile.TemporaryDirectory(prefix="harness-run-")
        work = Path(self._dir.name)
        (work / "imports.json").write_text(json.dumps([list(i) for i in self.imports]))
        with open(work / "worker.stderr", "wb") as err:
            self._proc = subprocess.Popen(
                [
                    str(self.python),
                    "-I",
                    str(self.child_script),
                    "--worker",
                    str(work / "imports.json"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,  # Ctrl-C reaches the harness, which ends the children
                cwd=work,
                env={**os.environ, TOKEN_VAR: self._token},
            )
        if self.groups is not None:
            self.groups.add(self._proc.pid)
        threading.Thread(target=self._read_events, name=f"warm-{self.label}", daemon=True).start()
        started = time.monotonic()
        try:
            ready = self._ready.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise WorkerFailed(
                f"the warm worker did not finish importing within {timeout_s:.0f} s"
            ) from None
        if ready is None:
            reason = self._death_reason()
            self.stop()
            raise WorkerFailed(f"the warm worker died while importing: {reason}")
        if not ready.get("ok"):
            self.stop()
            raise WorkerFailed(str(ready.get("error", "")).strip())
        report = ready.get("probe") or {}
        self.probe = ProbeResult(
            {str(k): str(v) for k, v in (report.get("versions") or {}).items()},
            {str(k): str(v) for k, v in (report.get("missing") or {}).items()},
        )
        self.import_s = float(ready.get("seconds", time.monotonic() - started))
        return self.probe

    def stop(self) -> None:
        """End the worker: close its stdin (it kills its children and exits), then kill it."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            signal_group(proc.pid, signal.SIGKILL)
            if self.groups is not None:
                self.groups.discard(proc.pid)
            self._sweep()
        self._dead = True
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _sweep(self, job: int | None = None) -> list[str]:
        """End what the worker's jobs left once the worker is gone (reparented here, once
        the process of ``job``, whose group was killed, is gone too)."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return []
        jobs = () if job is None else (job,)
        return end_strays(self._token, groups=jobs, after=jobs)

    def _death_reason(self) -> str:
        proc = self._proc
        if proc is None:
            return "not started"
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1)
        rc = proc.returncode
        if rc is None:
            how = "it stopped answering"
        elif rc < 0:
            try:
                how = f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
        else:
            how = f"exit status {rc}"
        tail = tail_of(Path(self._dir.name) / "worker.stderr", 2000) if self._dir else ""
        return how + (f"; its stderr ends with:\n{tail.strip()}" if tail.strip() else "")

    def _read_events(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                continue  # the protocol is JSON lines; anything else is not an answer
            if not isinstance(event, dict):
                continue
            if event.get("event") == "ready":
                self._ready.put(event)
                continue
            with self._waiting_lock:
                waiter = self._waiting.get(str(event.get("id")))
            if waiter is not None:
                waiter.put(event)
        self._dead = True
        self._ready.put(None)
        with self._waiting_lock:
            waiters = list(self._waiting.values())
        for waiter in waiters:
            waiter.put(_DEAD)

    # -- one job ---------------------------------------------------------------------------

    def run(
        self, job: dict[str, Any], timeout_s: float, label: str, bound: Bound | None = None
    ) -> ChildResult | Refused:
        """Run ``job`` in a forked child; ``label`` names it in a worker-failure reason;
        ``bound`` holds its host memory (harness/execute/memory.py)."""
        with self._job_files() as (work, request_id, events):
            request = {
                "op": "run",
                "id": request_id,
                "job": job,
                "result": str(work / "result.json"),
                "stdout": str(work / "stdout"),
                "stderr": str(work / "stderr"),
            }
            started = time.monotonic()
            if not self._send(request):
                return self._lost(work, started, None, timed_out=False, label=label, hung=False)
            deadline = started + timeout_s
            event = _next(events, deadline)
            if event is None:  # not even forked within the whole timeout: the worker hangs
                return self._lost(work, started, None, timed_out=True, label=label, hung=True)
            if event is _DEAD:
                return self._lost(work, started, None, timed_out=False, label=label, hung=False)
            assert isinstance(event, dict)
            if event.get("event") == "refused":
                self.refusal = str(event.get("reason", ""))
                return Refused(self.refusal)
            pid = int(event["pid"])
            if self.groups is not None:
                self.groups.add(pid)
            try:
                with (bound or Bound(0)).watch(pid) as held:
                    child = self._wait_child(work, events, pid, started, deadline, label)
                    signal_group(pid, signal.SIGKILL)  # none of its group outlives the bound
                if held.exceeded:
                    child = dataclasses.replace(child, memory_exceeded=held.exceeded)
            finally:
                if self.groups is not None:
                    self.groups.discard(pid)
                signal_group(pid, signal.SIGKILL)  # a forked grandchild left behind
            if child.worker_failure:  # the worker died: the job's daemons come here
                child = dataclasses.replace(child, strays=(*child.strays, *self._sweep(pid)))
            return child

    def _wait_child(
        self,
        work: Path,
        events: queue.Queue[object],
        pid: int,
        started: float,
        deadline: float,
        label: str,
    ) -> ChildResult:
        timed_out = False
        event = _next(events, deadline)
        if event is None:  # past the limit: end the child's group, as proc.py does
            timed_out = True
            signal_group(pid, signal.SIGTERM)
            event = _next(events, time.monotonic() + TERM_GRACE_S)
            if event is None:
                signal_group(pid, signal.SIGKILL)
                event = _next(events, time.monotonic() + ANSWER_GRACE_S)
        if event is None or event is _DEAD:
            signal_group(pid, signal.SIGKILL)
            return self._lost(work, started, pid, timed_out, label, hung=event is None)
        assert isinstance(event, dict)
        status = int(event.get("status", 0))
        strays = event.get("strays")
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        result, problem = None, ""
        if not timed_out and (work / "result.json").is_file():
            result, problem = read_result(work / "result.json")
        if result is None and not timed_out and disk_full(work):
            raise DiskFull(work.parent)  # the disk, not the child: no record (proc.py)
        return ChildResult(
            result=result,
            exit_code=exit_code,
            signal=sig,
            timed_out=timed_out,
            duration_s=round(time.monotonic() - started, 3),
            stdout_tail=tail_of(work / "stdout"),
            stderr_tail=tail_of(work / "stderr"),
            result_problem=problem,
            strays=tuple(str(x) for x in strays) if isinstance(strays, list) else (),
        )

    def _lost(
        self,
        work: Path,
        started: float,
        pid: int | None,
        timed_out: bool,
        label: str,
        hung: bool,
    ) -> ChildResult:
        """The worker died or stopped answering while it held this job."""
        if hung:
            self._kill()
        reason = self._death_reason()
        what = "stopped answering" if hung else "died"
        return ChildResult(
            result=None,
            exit_code=None,
            signal=None,
            timed_out=timed_out,
            duration_s=round(time.monotonic() - started, 3),
            stdout_tail=tail_of(work / "stdout"),
            stderr_tail=tail_of(work / "stderr"),
            worker_failure=f"the warm worker (pid {self.pid}) {what} while running {label}"
            + ("" if hung else f" ({reason})"),
        )

    def _kill(self) -> None:
        self._dead = True
        if self._proc is not None:
            signal_group(self._proc.pid, signal.SIGKILL)

    def _send(self, request: dict[str, Any]) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None or self._dead:
            return False
        data = (json.dumps(request) + "\n").encode()
        try:
            with self._write_lock:
                proc.stdin.write(data)
                proc.stdin.flush()
        except (OSError, ValueError):  # BrokenPipe, or closed by stop()
            return False
        return True

    @contextlib.contextmanager
    def _job_files(self) -> Iterator[tuple[Path, str, queue.Queue[object]]]:
        events: queue.Queue[object] = queue.Queue()
        with self._waiting_lock:
            self._next_id += 1
            request_id = str(self._next_id)
            self._waiting[request_id] = events
        if self._dead:
            events.put(_DEAD)
        try:
            with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
                yield Path(tmp), request_id, events
        finally:
            with self._waiting_lock:
                self._waiting.pop(request_id, None)


def _next(events: queue.Queue[object], deadline: float) -> object | None:
    """The next event for a job, or None when ``deadline`` (monotonic) passes first."""
    try:
        return events.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        return None


class WarmProber:
    """The health check of an environment that starts its warm worker: the worker's imports
    are the check, so a run imports torch once per environment, not twice. Where the
    worker does not start, the usual health check (a process of its own) answers and
    ``worker`` stays None: that environment runs in fresh interpreters."""

    def __init__(self, child_script: Path, groups: ProcessGroups | None, label: str) -> None:
        self.child_script = child_script
        self.groups = groups
        self.label = label
        self.worker: WarmWorker | None = None
        self.failure = ""  # why the worker did not start, when it did not

    def __call__(self, python: Path, imports: tuple[tuple[str, ...], ...]) -> ProbeResult:
        self.discard()  # a rebuilt environment gets a new worker
        worker = WarmWorker(python, self.child_script, imports, self.groups, self.label)
        try:
            found = worker.start()
        except WorkerFailed as exc:
            lines = str(exc).strip().splitlines()
            self.failure = lines[-1] if lines else "no reason given"
            return run_probe(python, imports)
        self.worker = worker
        return found

    def discard(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
