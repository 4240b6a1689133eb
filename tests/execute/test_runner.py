"""Each way a run can end, caused for real by a tiny reproducer in a real child process,
through both isolation modes: forked from a warm worker ("fork") and a fresh interpreter
("process"). The ``worker`` fixture (tests/conftest.py) runs each test in each mode."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from harness.envs.backends import CHILD
from harness.execute.plan import Job
from harness.execute.proc import ChildResult, ProcessGroups
from harness.execute.runner import fallback, run_job
from harness.execute.warm import WarmWorker
from harness.outcomes import Outcome
from harness.store.records import Record

PROV = {"host": "test"}


def run(
    tiny_entry,
    host_env,
    cell,
    variant: str,
    timeout: float = 60,
    memory_mb: int = 0,
    worker: WarmWorker | None = None,
) -> Record:
    job = Job(tiny_entry, _variant(tiny_entry, variant), cell, 0)
    r = run_job(
        job,
        host_env,
        timeout_s=timeout,
        memory_limit_mb=memory_mb,
        provenance=PROV,
        worker=worker,
    )
    assert r.isolation == ("fork" if worker is not None else "process")
    return r


def _variant(tiny_entry, name: str):
    if name in {x.name for x in tiny_entry.variants}:
        return tiny_entry.variant(name)
    # fault variants not declared in entry.yaml: same entry, ad-hoc variant
    return replace(tiny_entry.variants[0], name=name, kind="baseline")


def test_documented_error_is_reproduced(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "documented", worker=worker)
    assert r.outcome is Outcome.REPRODUCED
    assert r.exception is not None
    assert r.exception.type == "repro_under_test.DocumentedError"
    assert "encountered None gradient" in r.exception.message
    assert r.exception.frame.endswith("in run") and "repro.py" in r.exception.frame


def test_a_variants_own_signature_is_related_never_reproduced(tiny_entry, host_env, cpu_cell):
    from dataclasses import replace

    from harness.spec.entries import Signature

    own = Signature("ValueError", "something else")
    job = Job(tiny_entry, replace(tiny_entry.variant("other"), signature=own), cpu_cell, 0)
    r = run_job(job, host_env, timeout_s=60, memory_limit_mb=0, provenance=PROV)
    assert r.outcome is Outcome.RELATED and r.exception.type == "ValueError"
    # the documented signature wins where both match: the documented error is never related
    both = Signature("RuntimeError", "encountered")
    job = Job(tiny_entry, replace(tiny_entry.variant("documented"), signature=both), cpu_cell, 0)
    r = run_job(job, host_env, timeout_s=60, memory_limit_mb=0, provenance=PROV)
    assert r.outcome is Outcome.REPRODUCED


def test_other_error_keeps_type_message_and_frame(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "other", worker=worker)
    assert r.outcome is Outcome.OTHER_ERROR
    assert r.exception.type == "ValueError"
    assert r.exception.message == "something else went wrong"
    assert "repro.py" in r.exception.frame


def test_ok_keeps_checks(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "ok", worker=worker)
    assert r.outcome is Outcome.OK
    assert r.checks["moved"] == {"ok": True, "detail": "weights changed by 0.1"}
    assert r.versions["python"]


def test_failed_postcondition_is_wrong_result(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "wrong", worker=worker)
    assert r.outcome is Outcome.WRONG_RESULT
    assert "finite: loss is nan" in r.reason


def test_unsupported_keeps_reason(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "unsupported", worker=worker)
    assert r.outcome is Outcome.UNSUPPORTED
    assert "GradScaler('cpu') does not exist" in r.reason


def test_segfault_is_crashed_by_signal(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "segfault", worker=worker)
    assert r.outcome is Outcome.CRASHED
    assert r.signal == signal.SIGSEGV
    assert "SIGSEGV" in r.reason


def test_exit_without_result_is_crashed(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "exit", worker=worker)
    assert r.outcome is Outcome.CRASHED
    assert r.exit_code == 3
    assert "exit status 3" in r.reason


class SeenGroups(ProcessGroups):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def add(self, pgid: int) -> None:
        self.seen.append(pgid)
        super().add(pgid)


@pytest.mark.parametrize("variant", ["hang", "ignore-term", "fork-hang"])
def test_hang_times_out_and_the_whole_group_is_ended(
    tiny_entry, host_env, cpu_cell, variant, worker
):
    groups = SeenGroups()
    if worker is not None:
        worker.groups = groups
    job = Job(tiny_entry, replace(tiny_entry.variants[0], name=variant), cpu_cell, 0)
    started = time.monotonic()
    r = run_job(
        job, host_env, timeout_s=2, memory_limit_mb=0, provenance=PROV, groups=groups, worker=worker
    )
    assert r.outcome is Outcome.TIMEOUT
    assert "2 s limit" in r.reason
    assert time.monotonic() - started < 2 + 5 + 5  # timeout + TERM grace + slack
    # nothing of the group survives, not even the forked grandchild
    (pgid,) = groups.seen
    time.sleep(0.2)
    assert _live_members(pgid) == []


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that still run (zombies awaiting a reaper do not count)."""
    live = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            live.append(int(pid))
    return live


def test_unbounded_allocation_is_out_of_memory(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "oom", memory_mb=512, worker=worker)
    assert r.outcome is Outcome.CRASHED
    assert r.reason.startswith("out of memory")


def test_megabytes_and_binary_output_are_bounded_text(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "loud", worker=worker)
    assert r.outcome is Outcome.OK
    assert len(r.stdout_tail) < 9000 and "earlier bytes cut" in r.stdout_tail
    assert len(r.stderr_tail) < 9000
    assert all(ch.isprintable() or ch in "\n\t" for ch in r.stderr_tail)
    Record.from_dict(r.to_dict())  # survives a JSON round trip


def test_kill_all_ends_running_children(tiny_entry, host_env, cpu_cell, worker):
    import threading

    groups = ProcessGroups()
    from dataclasses import replace

    from harness.execute.plan import Job

    job = Job(tiny_entry, replace(tiny_entry.variants[0], name="ignore-term"), cpu_cell, 0)
    out: list[Record] = []
    t = threading.Thread(
        target=lambda: out.append(
            run_job(job, host_env, timeout_s=600, memory_limit_mb=0, provenance=PROV, groups=groups)
        )
    )
    t.start()
    time.sleep(1.5)
    groups.kill_all()
    t.join(20)
    assert not t.is_alive()
    assert out[0].outcome is Outcome.CRASHED and out[0].signal == signal.SIGKILL


def test_sys_exit_in_a_variant_is_its_exit_status(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "sys-exit", worker=worker)
    assert r.outcome is Outcome.CRASHED
    assert r.exit_code == 4 and "exit status 4" in r.reason


def test_a_variant_cannot_change_what_a_later_one_sees(tiny_entry, host_env, cpu_cell, worker):
    assert run(tiny_entry, host_env, cpu_cell, "mutate", worker=worker).outcome is Outcome.OK
    r = run(tiny_entry, host_env, cpu_cell, "clean", worker=worker)
    assert r.outcome is Outcome.OK, r.reason
    if worker is not None:
        assert worker.alive  # both ran in children of the same warm worker


def test_the_variant_own_time_is_measured_inside_the_child(tiny_entry, host_env, cpu_cell, worker):
    r = run(tiny_entry, host_env, cpu_cell, "ok", worker=worker)
    assert r.run_s is not None and 0 <= r.run_s <= r.duration_s


def test_a_variant_that_asks_for_a_fresh_interpreter_gets_one(tiny_entry, host_env, cpu_cell):
    warm = WarmWorker(host_env.python, CHILD, (("json",),), label="test")
    warm.start()
    try:
        v = replace(tiny_entry.variant("ok"), isolation="process")
        r = run_job(
            Job(tiny_entry, v, cpu_cell, 0),
            host_env,
            timeout_s=60,
            memory_limit_mb=0,
            provenance=PROV,
            worker=warm,
        )
    finally:
        warm.stop()
    assert r.outcome is Outcome.OK and r.isolation == "process"


def _warm(host_env, groups=None) -> WarmWorker:
    warm = WarmWorker(host_env.python, CHILD, (("json",),), groups=groups, label="test")
    warm.start()
    return warm


def test_the_worker_dying_mid_job_is_a_crashed_record_that_says_so(tiny_entry, host_env, cpu_cell):
    groups = SeenGroups()
    warm = _warm(host_env, groups)
    job = Job(tiny_entry, _variant(tiny_entry, "fork-hang"), cpu_cell, 0)
    killer = threading.Timer(1.0, lambda: os.kill(warm.pid, signal.SIGKILL))
    killer.start()
    started = time.monotonic()
    try:
        r = run_job(
            job, host_env, timeout_s=60, memory_limit_mb=0, provenance=PROV, groups=groups,
            worker=warm,
        )  # fmt: skip
    finally:
        killer.cancel()
        warm.stop()
    assert time.monotonic() - started < 10
    assert r.outcome is Outcome.CRASHED and r.isolation == "fork"
    assert f"the warm worker (pid {warm.pid}) died while running {job.id}" in r.reason
    assert "killed by SIGKILL" in r.reason
    child = groups.seen[-1]  # the job's group: the host ended it, grandchild included
    time.sleep(0.3)
    assert _live_members(child) == []


def test_a_hung_worker_is_a_timeout_record_that_says_so(tiny_entry, host_env, cpu_cell):
    groups = SeenGroups()
    warm = _warm(host_env, groups)
    job = Job(tiny_entry, _variant(tiny_entry, "ok"), cpu_cell, 0)
    os.kill(warm.pid, signal.SIGSTOP)  # the worker hangs before it forks the job
    started = time.monotonic()
    try:
        r = run_job(
            job, host_env, timeout_s=2, memory_limit_mb=0, provenance=PROV, groups=groups,
            worker=warm,
        )  # fmt: skip
    finally:
        warm.stop()
    assert time.monotonic() - started < 2 + 10  # the timeout, then killed: no grace to wait
    assert r.outcome is Outcome.TIMEOUT
    assert f"the warm worker (pid {warm.pid}) stopped answering while running {job.id}" in r.reason
    assert not warm.alive
    deadline = time.monotonic() + 5  # the stopped worker was killed (SIGKILL ends a stopped one)
    while _live_members(warm.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_members(warm.pid) == []


def test_a_worker_whose_imports_fail_reports_them_as_the_health_check_does(host_env):
    from harness.envs.backends import run_probe

    wanted = (("json",), ("no_such_module_here",))
    warm = WarmWorker(host_env.python, CHILD, wanted, label="test")
    try:
        found = warm.start()
    finally:
        warm.stop()
    assert "No module named 'no_such_module_here'" in found.missing["no_such_module_here"]
    assert found == run_probe(host_env.python, wanted)


def test_fallback_is_pure():
    child = ChildResult(None, None, 9, False, 1.0, "", "MemoryError\n")
    assert fallback(child, 10)[0] is Outcome.CRASHED
    assert fallback(child, 10)[1].startswith("out of memory")
    timed = ChildResult(None, None, 9, True, 10.0, "", "")
    assert fallback(timed, 10)[0] is Outcome.TIMEOUT


def test_fallback_names_the_worker_that_failed():
    dead = ChildResult(None, None, None, False, 1.0, "", "", worker_failure="the worker died")
    assert fallback(dead, 10) == (Outcome.CRASHED, "the worker died")
    hung = ChildResult(None, None, None, True, 10.0, "", "", worker_failure="it hung")
    assert fallback(hung, 10)[0] is Outcome.TIMEOUT and "it hung" in fallback(hung, 10)[1]


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        pytest.skip("this kernel does not list a process's children in /proc")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _spare_of(warm: WarmWorker, known: set[int]) -> int:
    """The worker's one child that is neither its reaper nor in ``known``."""
    assert warm.pid is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fresh = {p for p in _children(warm.pid) if _alive(p)} - known
        if len(fresh) == 1:
            return fresh.pop()
        time.sleep(0.02)
    raise AssertionError(f"no spare child: {_children(warm.pid)} (known {known})")


def test_each_job_runs_in_a_child_forked_ahead_of_it(tiny_entry, host_env, cpu_cell):
    """The warm worker forks the next child before the job comes (a spare, waiting for
    its request); the job runs in it, and a new spare is forked for the next one. A
    stopped worker leaves none behind."""
    warm = WarmWorker(host_env.python, CHILD, (("json",),), label="test")
    warm.start()
    try:
        assert warm.pid is not None
        time.sleep(0.3)
        first = _children(warm.pid)  # the reaper and the first spare
        assert len(first) == 2
        # the spare is a session leader of its own, as every job's child is
        spares = [p for p in first if os.getsid(p) == p]
        assert len(spares) == 1
        spare = spares[0]
        reaper = (first - {spare}).pop()
        r = run(tiny_entry, host_env, cpu_cell, "documented", worker=warm)
        assert r.outcome is Outcome.REPRODUCED
        assert not _alive(spare)  # it ran the job and ended
        second = _spare_of(warm, {reaper, spare})
        r = run(tiny_entry, host_env, cpu_cell, "clean", worker=warm)
        assert r.outcome is Outcome.OK, r.reason
        assert not _alive(second)
        last = _spare_of(warm, {reaper, spare, second})
    finally:
        warm.stop()
    assert not _alive(last)


# --- issue 25: nothing escapes a run --------------------------------------------------------


def _running_with(mark: str) -> list[int]:
    """Live processes (zombies aside) whose command line holds ``mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in argv and state not in ("Z", "X"):
            found.append(int(pid))
    return found


# what the escape-* variants name their daemons by: set before any worker starts (the
# worker fixture's children inherit it); one test at a time in this process
ESCAPE_MARK = os.environ.setdefault("TINY_ESCAPE_MARK", f"tiny-escape-{os.getpid()}")


@pytest.fixture
def mark() -> Iterator[str]:
    """The word that names the daemons; any left at the end are killed."""
    word = ESCAPE_MARK
    yield word
    for pid in _running_with(word):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER")
@pytest.mark.parametrize("how", ["ok", "hang", "crash"])
def test_a_daemon_the_variant_leaves_behind_is_ended_and_the_record_says_so(
    tiny_entry, host_env, cpu_cell, worker, mark: str, how: str
) -> None:
    """fork, setsid, fork, close every descriptor, sleep: the grandchild (its own session,
    PPID 1) outlived an ``ok`` record in both modes (issue 25, item 1). It is ended with
    the job however the job ends (returns, times out, exits without a result)."""
    r = run(tiny_entry, host_env, cpu_cell, f"escape-{how}", timeout=3, worker=worker)
    left = _running_with(mark)
    assert left == [], f"the daemon {left} outlived its run"
    expected = {"ok": Outcome.OK, "hang": Outcome.TIMEOUT, "crash": Outcome.CRASHED}[how]
    assert r.outcome is expected, r
    said = " ".join([r.reason, *r.checks.get("_warnings", [])])
    assert "1 process" in said and "outside its process group" in said, said


def test_a_sigchld_handler_the_variant_left_does_not_crash_the_harness_ending_its_children(
    tiny_entry, host_env, cpu_cell, worker
) -> None:
    """torch's DataLoader installs a SIGCHLD handler that raises when a worker is killed; a
    worker still alive when the variant returned was killed by the harness's reaping, the
    handler raised there, and the finished run was recorded ``crashed`` ("exit status 1
    without a result": twice in CI's smoke matrix, dataloader-bad-file-descriptor)."""
    r = run(tiny_entry, host_env, cpu_cell, "sigchld-handler", timeout=30, worker=worker)
    assert r.outcome is Outcome.OK, (r.outcome, r.reason, r.stderr_tail[-2500:])


def test_an_exception_that_cannot_be_printed_is_other_error(tiny_entry, host_env, cpu_cell, worker):
    """__str__ and __repr__ raise: the child's own classification raised with them and the
    job was ``crashed`` ("exit status 1 without a result", issue 25, item 10)."""
    r = run(tiny_entry, host_env, cpu_cell, "unprintable", worker=worker)
    assert r.outcome is Outcome.OTHER_ERROR, r.reason
    assert r.exception is not None
    assert r.exception.type == "repro_under_test.Unprintable"
    assert "unprintable message" in r.exception.message
    assert "repro.py" in r.exception.frame


def test_advice_the_cell_already_satisfies_is_recorded_as_run_in_the_cell(tiny_entry) -> None:
    from harness.execute.runner import env_failed_record
    from harness.spec.matrix import Cell, Environment

    row = Environment("3.10", "1.12.1", "2.1.4", pins=("numpy<2",))
    cell = Cell(row, "cpu", "fp32")
    for wanted, ran_in in (
        (("torch<2.1",), ""),  # the row's torch 1.12.1: asked, and no other environment
        (
            ("torch<2.1", "numpy>=2"),
            "py3.10-torch1.12.1-lightning2.1.4-with-numpy-ge2-no-lightning",
        ),
    ):
        variant = replace(_variant(tiny_entry, "ok"), requires=wanted)
        job = Job(tiny_entry, variant, cell, 0)
        record = env_failed_record(job, "test", PROV)
        assert record.ran_in == ran_in and record.env == row.id
        assert record.requires == {w.split("<")[0].split(">")[0]: w for w in wanted}


def test_the_reproducer_reads_the_job_s_deadline_and_host_memory_bound(
    tiny_entry, host_env, cpu_cell, worker
):
    r = run(tiny_entry, host_env, cpu_cell, "limits", timeout=60, memory_mb=4096, worker=worker)
    assert r.outcome is Outcome.OK, r.reason
    left = float(r.checks["deadline"]["detail"].split()[0])
    assert 0 < left <= 60 - 15  # the job's 60 s, less what ran, less reprokit's margin
    assert r.checks["memory"]["detail"] == "4096"


def test_a_stuck_child_is_named_by_the_reproducer_before_the_harness_cuts_the_job(
    tiny_entry, host_env, cpu_cell, worker
):
    """One deadline: the reproducer's wait (reprokit.time_left) ends before the job's limit,
    so the hang is its own error, naming the command, not the harness's timeout."""
    r = run(tiny_entry, host_env, cpu_cell, "stuck-child", timeout=12, worker=worker)
    assert r.outcome is Outcome.OTHER_ERROR, r.reason
    assert r.exception is not None and r.exception.type == "subprocess.TimeoutExpired"
    assert "time.sleep(3600)" in r.exception.message and "timed out after" in r.exception.message
