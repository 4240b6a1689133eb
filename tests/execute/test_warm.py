"""The warm worker (harness/execute/warm.py) on its own, with tiny real processes: it starts,
reports what its imports found, stops leaving nothing behind, fails to start with a reason,
and serves jobs from several threads at once. What a job's run gives (timeouts, a worker
that dies or hangs mid-job, the spare child) is tests/execute/test_runner.py's."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.envs.backends import CHILD, BuiltEnv
from harness.execute.plan import Job
from harness.execute.proc import ChildResult, ProcessGroups
from harness.execute.runner import job_file
from harness.execute.warm import WarmWorker, WorkerFailed
from harness.spec.entries import Entry
from harness.spec.matrix import Cell


class SeenGroups(ProcessGroups):
    def __init__(self) -> None:
        super().__init__()
        self.added: list[int] = []
        self.discarded: list[int] = []

    def add(self, pgid: int) -> None:
        self.added.append(pgid)
        super().add(pgid)

    def discard(self, pgid: int) -> None:
        self.discarded.append(pgid)
        super().discard(pgid)


def running(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] not in "ZX"


def fake_python(tmp_path: Path, body: str) -> Path:
    """An "interpreter" that ignores its arguments and runs the shell ``body``."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_worker_starts_reports_its_imports_and_stops_leaving_nothing(
    host_env: BuiltEnv,
) -> None:
    groups = SeenGroups()
    warm = WarmWorker(host_env.python, CHILD, (("json",), ("no_such_module",)), groups, "t")
    found = warm.start()
    pid = warm.pid
    assert pid is not None and warm.alive and running(pid)
    assert groups.added == [pid]  # an interrupt ends it with the run's children
    assert "json" in found.seen and set(found.missing) == {"no_such_module"}
    assert warm.probe == found and warm.import_s >= 0
    folder = Path(f"/proc/{pid}/cwd").resolve()
    assert folder.name.startswith("harness-run-")
    warm.stop()
    assert not warm.alive and not running(pid)
    assert groups.discarded == [pid] and not folder.exists()
    warm.stop()  # twice: nothing more to do


def test_a_worker_that_dies_while_importing_fails_to_start_with_the_reason(
    tmp_path: Path,
) -> None:
    python = fake_python(tmp_path, "echo 'ImportError: no torch here' >&2; exit 3")
    warm = WarmWorker(python, CHILD, (("json",),), label="t")
    with pytest.raises(WorkerFailed, match="died while importing: exit status 3") as failed:
        warm.start()
    assert "ImportError: no torch here" in str(failed.value)  # its stderr's end
    assert not warm.alive


def test_a_worker_that_does_not_finish_importing_is_ended(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    python = fake_python(tmp_path, f"echo $$ > {pidfile}; exec sleep 60")
    warm = WarmWorker(python, CHILD, (("json",),), label="t")
    started = time.monotonic()
    with pytest.raises(WorkerFailed, match="did not finish importing within 1 s"):
        warm.start(timeout_s=1)
    assert time.monotonic() - started < 1 + 2 + 3  # the timeout, then stop()'s wait
    assert not running(int(pidfile.read_text()))


def test_a_stopped_worker_runs_no_job_and_says_why(
    host_env: BuiltEnv, tiny_entry: Entry, cpu_cell: Cell
) -> None:
    warm = WarmWorker(host_env.python, CHILD, (("json",),), label="t")
    warm.start()
    warm.stop()
    job = Job(tiny_entry, tiny_entry.variant("ok"), cpu_cell, 0)
    started = time.monotonic()
    ran = warm.run(job_file(job, 0), timeout_s=60, label=job.id)
    assert time.monotonic() - started < 5  # at once, not after the timeout
    assert isinstance(ran, ChildResult) and ran.result is None
    assert ran.worker_failure is not None and f"died while running {job.id}" in ran.worker_failure


def test_one_worker_serves_jobs_from_several_threads_at_once(
    host_env: BuiltEnv, tiny_entry: Entry, cpu_cell: Cell
) -> None:
    """Each answer reaches the job that asked: the request ids keep them apart."""
    warm = WarmWorker(host_env.python, CHILD, (("json",),), label="t")
    warm.start()
    names = ["documented", "ok", "other", "wrong"] * 2
    results: dict[int, ChildResult] = {}

    def one(i: int) -> None:
        job = Job(tiny_entry, tiny_entry.variant(names[i]), cpu_cell, i)
        ran = warm.run(job_file(job, 0), timeout_s=60, label=job.id)
        assert isinstance(ran, ChildResult)
        results[i] = ran

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(names))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert warm.alive
    finally:
        warm.stop()
    outcomes = {i: r.result["outcome"] if r.result else None for i, r in results.items()}
    expected = {"documented": "reproduced", "ok": "ok", "other": "other_error"}
    expected["wrong"] = "wrong_result"
    assert outcomes == {i: expected[name] for i, name in enumerate(names)}
