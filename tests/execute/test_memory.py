"""Host memory bounded for every job (harness/execute/memory.py), with tiny real processes: a
job of a cuda cell (no address-space limit: it would break CUDA) that allocates without end is
ended by its bound with a clear reason, in both isolations, and the harness goes on; the bound
is chosen from what this machine allows (cgroup v2 where the harness may make memory-bounded
groups, else the RSS watchdog)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from harness.execute import memory
from harness.execute.memory import CgroupBound, RssWatchdog, choose, own_cgroup
from harness.execute.plan import Job
from harness.execute.proc import run_isolated
from harness.execute.runner import run_job
from harness.outcomes import Outcome
from tests.execute.test_runner import PROV, _variant

BOUND_MB = 200


def test_a_job_without_an_address_space_limit_over_its_bound_is_ended_and_the_run_goes_on(
    tiny_entry, host_env, cpu_cell, worker
) -> None:
    """As a CUDA job runs: no address-space limit in the child (memory_limit_mb 0 here; on a
    cuda cell the child sets none), only the harness's bound. (A cuda cell itself would be
    skipped on this machine before the variant runs.)"""
    bound = RssWatchdog(BOUND_MB)
    job = Job(tiny_entry, _variant(tiny_entry, "oom"), cpu_cell, 0)
    r = run_job(
        job, host_env, timeout_s=120, memory_limit_mb=0, provenance=PROV, worker=worker, bound=bound
    )
    assert r.outcome is Outcome.CRASHED
    assert r.reason.startswith("out of host memory: its processes held ")
    assert f"over the job's bound of {BOUND_MB} MiB" in r.reason
    assert "RSS watchdog ended its process group with SIGKILL" in r.reason
    assert r.duration_s is not None and r.duration_s < 120  # ended by the bound, not the clock
    # the harness (this process) and the warm worker are still there: the next job runs
    ok = Job(tiny_entry, _variant(tiny_entry, "ok"), cpu_cell, 0)
    after = run_job(
        ok, host_env, timeout_s=60, memory_limit_mb=0, provenance=PROV, worker=worker, bound=bound
    )
    assert after.outcome is Outcome.OK
    if worker is not None:
        assert worker.alive


def test_a_job_within_its_bound_is_not_touched() -> None:
    script = "import sys; x = bytearray(20 * 2**20); open(sys.argv[2], 'w').write('{\"outcome\": \"ok\"}')"
    child = run_isolated([sys.executable, "-c", script], {}, 60, bound=RssWatchdog(BOUND_MB))
    assert child.result == {"outcome": "ok"} and child.memory_exceeded == ""


def test_the_watchdog_counts_the_job_s_children_too() -> None:
    """A reproducer's own subprocess is in its process group: its memory is the job's."""
    script = textwrap.dedent(
        """
        import subprocess, sys
        subprocess.run([sys.executable, "-c",
                        "h = []\\nwhile True: h.append(bytearray(32 * 2**20))"])
        """
    )
    child = run_isolated([sys.executable, "-c", script], {}, 120, bound=RssWatchdog(BOUND_MB))
    assert child.memory_exceeded.startswith("out of host memory")
    assert child.result is None and not child.timed_out


def test_this_machine_s_bound_is_chosen_from_what_it_allows() -> None:
    bound = choose(BOUND_MB)
    folder = own_cgroup()
    if folder is None or "memory" not in memory._words(folder / "cgroup.controllers"):
        assert isinstance(bound, RssWatchdog)  # cgroup v1, or no memory controller of its own
    assert bound.how in ("RSS watchdog", "cgroup v2 memory.max")
    assert isinstance(choose(0), memory.Bound) and choose(0).how == "none"


def fake_root(tmp_path: Path, controllers: str, subtree: str, procs: str) -> Path:
    """A cgroup v2 folder's files (the kernel's are not writable here)."""
    group = tmp_path / "user.slice" / "harness-test"
    group.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text(controllers)
    (group / "cgroup.controllers").write_text(controllers)
    (group / "cgroup.subtree_control").write_text(subtree)
    (group / "cgroup.procs").write_text(procs)
    return group


def test_cgroup_v2_is_read_from_proc_self_cgroup(tmp_path: Path) -> None:
    group = fake_root(tmp_path, "cpu memory pids\n", "memory\n", "1\n")
    assert own_cgroup(tmp_path, "0::/user.slice/harness-test\n") == group
    # cgroup v1 (no 0:: line), or a v2 path that is not there
    assert own_cgroup(tmp_path, "4:memory:/x\n") is None
    assert own_cgroup(tmp_path, "0::/elsewhere\n") is None


@pytest.mark.parametrize(
    ("controllers", "subtree", "procs", "delegated"),
    [
        ("cpu memory\n", "memory\n", "1 2\n", True),  # memory already given to its children
        ("cpu memory\n", "\n", "SELF\n", True),  # only this process: it moves to a leaf
        ("cpu memory\n", "\n", "1 SELF\n", False),  # others live there: not moved
        ("cpu pids\n", "\n", "SELF\n", False),  # no memory controller
    ],
)
def test_a_group_is_delegated_only_where_the_harness_may(
    tmp_path: Path, controllers: str, subtree: str, procs: str, delegated: bool
) -> None:
    group = fake_root(tmp_path, controllers, subtree, procs.replace("SELF", str(os.getpid())))
    assert (memory._delegated(group) is not None) is delegated


def test_a_job_s_cgroup_gets_its_bound_and_is_removed(tmp_path: Path) -> None:
    """The files the kernel would read, written as it expects (a plain folder stands in)."""
    bound = CgroupBound(BOUND_MB, tmp_path)
    made: list[Path] = []
    original = memory._remove
    memory._remove = lambda group: made.append(group)  # the folder holds plain files here
    try:
        with bound.watch(os.getpgid(0)) as w:
            [group] = [p for p in tmp_path.iterdir() if p.name.startswith("job-")]
            assert (group / "memory.max").read_text() == str(BOUND_MB * 2**20)
            assert (group / "memory.swap.max").read_text() == "0"
            (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    finally:
        memory._remove = original
    assert made == [group]
    assert w.exceeded.startswith(
        f"out of host memory: its processes passed the job's bound of {BOUND_MB} MiB"
    )
    assert "cgroup v2 memory.max" in w.exceeded


def test_a_group_that_cannot_be_made_falls_back_to_the_watchdog(tmp_path: Path) -> None:
    """A parent that refuses a new group (here a file, not a folder) still bounds the job."""
    (tmp_path / "not-a-folder").write_text("")
    bound = CgroupBound(BOUND_MB, tmp_path / "not-a-folder")
    script = textwrap.dedent(
        """
        h = []
        while True:
            h.append(bytearray(32 * 2**20))
        """
    )
    child = run_isolated([sys.executable, "-c", script], {}, 120, bound=bound)
    assert "RSS watchdog ended its process group" in child.memory_exceeded
