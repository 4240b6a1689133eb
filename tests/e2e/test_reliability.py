"""Fault injection through the real CLI: every fault is really caused (signals, a killed
install, an unreachable index, concurrent writers, a truncated file, malformed inputs),
on a tiny project in a temp dir whose one environment is this interpreter with six
standing in for torch (``HARNESS_STANDIN``, see harness/envs/backends.py).

The measured numbers these tests print (``MEASURED ...``) are quoted in docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.envs.backends import MARKER, STANDIN_VAR
from harness.execute.proc import TERM_GRACE_S, ProcessGroups, run_isolated
from tests.paths import REPO, RESOURCES

SCENARIOS = RESOURCES / "reliability"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
ENV_ID = f"py{PY}-torch1.16.0-lightning0"
CELL = f"{ENV_ID}-cpu-fp32"
TINY_JOBS = 5  # tiny/faults on cpu/fp32: documented, other, ok, wrong, control


# --- the project, the CLI and what it leaves ---------------------------------------------


class Project:
    """A tiny project in a temp dir: matrix.yaml, repros/tiny/faults and repros/waits/gate."""

    def __init__(self, root: Path, matrix: str = "matrix.yaml", isolation: str = "") -> None:
        self.root = root
        self.isolation = isolation  # "fork" | "process"; "": the harness's default
        self.signals = root / "signals"  # where gate variants announce themselves
        self.tmp = root / "tmp"  # TMPDIR of the harness: its run folders must not stay
        self.envs = root / "envs"
        for d in (self.signals, self.tmp):
            d.mkdir(parents=True)
        shutil.copytree(
            RESOURCES / "entries" / "tiny" / "faults",
            root / "repros" / "tiny" / "faults",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        shutil.copytree(SCENARIOS / "gate", root / "repros" / "waits" / "gate")
        self.set_matrix((SCENARIOS / matrix).read_text())

    def set_matrix(self, text: str) -> None:
        (self.root / "matrix.yaml").write_text(text.replace("PYTHON", PY))

    @property
    def store(self) -> Path:
        return self.root / "results" / "records" / "m.jsonl"

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(REPO),
            TMPDIR=str(self.tmp),
            REL_SIGNAL_DIR=str(self.signals),
            **{STANDIN_VAR: "six=={torch}"},
        )
        env.pop("HARNESS_ENVS_DIR", None)
        env.update(extra)
        return env

    def argv(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "harness",
            "--repo",
            str(self.root),
            "run",
            "--no-report",
            "--machine",
            "m",
            "--envs-dir",
            str(self.envs),
            "--timeout",
            "60",
            *(("--isolation", self.isolation) if self.isolation else ()),
            *args,
        ]

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """The harness in a session of its own, as a terminal's foreground job would be."""
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.root,
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def run(self, *args: str, timeout: float = 90, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.root,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def hold(self) -> None:
        (self.signals / "hold").touch()

    def release(self) -> None:
        (self.signals / "hold").unlink(missing_ok=True)

    def announced(self, tag: str) -> list[int]:
        """Pids of the gate variants (or grandchildren) that announced ``tag``."""
        return [int(p.suffix[1:]) for p in self.signals.glob(f"{tag}.*")]

    def lines(self) -> list[str]:
        return self.store.read_text().splitlines() if self.store.exists() else []

    def records(self) -> list[dict[str, object]]:
        """Every stored line, each of which must be one complete record."""
        out = []
        for number, line in enumerate(self.lines(), start=1):
            try:
                out.append(json.loads(line))
            except ValueError:
                pytest.fail(f"{self.store}:{number} is not a complete record: {line[:120]!r}")
        assert not out or self.store.read_bytes().endswith(b"\n")
        return out

    def keys(self) -> Counter[tuple[object, ...]]:
        return Counter((r["entry"], r["variant"], r["cell"], r["trial"]) for r in self.records())

    def outcome(self, entry: str, variant: str) -> str:
        found = [r for r in self.records() if r["entry"] == entry and r["variant"] == variant]
        assert len(found) == 1, found
        return str(found[0]["outcome"])


@pytest.fixture(params=["fork", "process"])
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Project]:
    """The tiny project, run in each isolation mode in turn."""
    p = Project(tmp_path / "proj", isolation=request.param)
    yield p
    p.release()


def wait_for(condition: Callable[[], object], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout} s waiting for {what or condition}")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped by whoever inherited it."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def descendants_running(argv_part: str, pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if fields and fields[2] == str(pgid) and argv_part in cmdline:
            found.append(int(entry.name))
    return found


def assert_nothing_left(project: Project) -> None:
    """No half-written record, no run folder, no half-built environment."""
    project.records()
    runs = list(project.tmp.glob("harness-run-*"))  # a run's job, result and output files
    assert not runs, runs
    for env in project.envs.iterdir() if project.envs.exists() else ():
        if env.is_dir():
            assert (env / MARKER).is_file(), f"{env} is half-built"


# --- 1. SIGKILL of a child, SIGKILL of the harness ---------------------------------------


@pytest.mark.slow
def test_sigkill_of_a_child_is_a_crashed_record_and_the_run_goes_on(project: Project) -> None:
    project.hold()
    proc = project.start("-j", "1")
    wait_for(lambda: project.announced("held"), what="the held variant to start")
    (pid,) = project.announced("held")
    os.kill(pid, signal.SIGKILL)
    project.release()  # the variants after it must not block
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert project.outcome("waits/gate", "held") == "crashed"
    held = next(r for r in project.records() if r["variant"] == "held")
    assert held["signal"] == signal.SIGKILL
    assert "killed by SIGKILL" in str(held["reason"])
    assert project.outcome("waits/gate", "after") == "ok"  # the rest of the run went on
    assert len(project.keys()) == TINY_JOBS + 4 and set(project.keys().values()) == {1}

    resumed = project.run("--resume")
    assert resumed.returncode == 0, resumed.stdout
    assert f"{TINY_JOBS + 4} of {TINY_JOBS + 4} jobs already stored, 0 to run" in resumed.stdout
    assert set(project.keys().values()) == {1}
    assert_nothing_left(project)


@pytest.mark.slow
def test_sigkill_of_the_harness_loses_nothing_and_resume_reruns_the_cut_job(
    project: Project,
) -> None:
    project.hold()
    proc = project.start("-j", "3")  # held, stubborn and forks fill the three slots
    tags = ("held", "stubborn", "forks", "grandchild")
    wait_for(lambda: all(project.announced(t) for t in tags), what="three runs and a grandchild")
    pids = {t: project.announced(t)[0] for t in tags}
    before = project.records()
    assert len(before) == TINY_JOBS  # the queue is in order: tiny/faults is all stored
    os.kill(proc.pid, signal.SIGKILL)  # the harness alone, as the OOM killer would
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    # its runs, each in a session of its own, notice the harness is gone and end their groups
    started = time.monotonic()
    wait_for(
        lambda: not any(alive(p) for p in pids.values()), timeout=10, what="the orphans to end"
    )
    print(f"MEASURED orphans-after-harness-SIGKILL: {time.monotonic() - started:.2f} s")
    for tag in ("held", "stubborn", "forks"):
        assert not group_members(pids[tag]), f"the process group of {tag} has survivors"
    assert project.records() == before  # nothing lost, nothing half-written

    project.release()
    resumed = project.run("--resume")
    assert resumed.returncode == 0, resumed.stdout
    assert f"resume: {TINY_JOBS} of {TINY_JOBS + 4} jobs already stored, 4 to run" in (
        resumed.stdout
    )
    keys = project.keys()
    assert len(keys) == TINY_JOBS + 4 and set(keys.values()) == {1}  # each exactly once
    assert project.outcome("waits/gate", "held") == "ok"  # the cut job ran again
    assert project.records()[:TINY_JOBS] == before


def _parent_of(pid: int) -> int:
    fields = _stat(pid)
    assert fields is not None, f"{pid} is gone"
    return int(fields[1])


@pytest.mark.slow
def test_the_warm_worker_killed_mid_job_is_a_crashed_record_and_a_new_worker_runs_the_rest(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path / "proj", isolation="fork")
    project.hold()
    proc = project.start("-j", "1", "--entry", "waits/gate")
    wait_for(lambda: project.announced("held"), what="the held variant to start")
    (held,) = project.announced("held")
    worker = _parent_of(held)  # the held variant is a child forked by the warm worker
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not alive(held), timeout=10, what="the held variant's group to be ended")
    project.release()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    record = next(r for r in project.records() if r["variant"] == "held")
    assert record["outcome"] == "crashed" and record["isolation"] == "fork"
    assert f"the warm worker (pid {worker}) died while running waits/gate::held@" in str(
        record["reason"]
    )
    assert "killed by SIGKILL" in str(record["reason"])
    rest = [r for r in project.records() if r["variant"] != "held"]
    assert len(rest) == 3 and {r["outcome"] for r in rest} == {"ok"}
    assert {r["isolation"] for r in rest} == {"fork"}  # a new worker took them
    assert_nothing_left(project)


@pytest.mark.slow
def test_a_hung_warm_worker_is_a_timeout_record_and_a_new_worker_runs_the_rest(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path / "proj", isolation="fork")
    project.hold()
    proc = project.start("-j", "1", "--entry", "waits/gate", "--timeout", "3")
    wait_for(lambda: project.announced("held"), what="the held variant to start")
    (held,) = project.announced("held")
    worker = _parent_of(held)
    os.kill(worker, signal.SIGSTOP)  # the worker hangs: it can neither reap nor answer
    project.release()
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    record = next(r for r in project.records() if r["variant"] == "held")
    assert record["outcome"] == "timeout"
    assert f"the warm worker (pid {worker}) stopped answering while running waits/gate::held@" in (
        str(record["reason"])
    )
    assert not alive(worker)  # killed, not left stopped
    rest = [r for r in project.records() if r["variant"] != "held"]
    assert len(rest) == 3 and {r["outcome"] for r in rest} == {"ok"}
    assert_nothing_left(project)


# --- 2. Ctrl-C and preemption ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "variants"),
    [
        (signal.SIGINT, ("held", "stubborn", "forks")),
        (signal.SIGTERM, ("held", "stubborn", "forks")),
        (signal.SIGINT, ("held", "forks")),
    ],
    ids=["sigint", "sigterm", "sigint-no-stubborn-child"],
)
def test_interrupt_ends_every_child_leaves_nothing_half_written_and_exits_130(
    project: Project, sig: signal.Signals, variants: tuple[str, ...]
) -> None:
    project.hold()
    proc = project.start(
        "-j", "3", "--entry", "waits/gate", *(a for v in variants for a in ("--variant", v))
    )  # fmt: skip
    tags = (*variants, "grandchild")
    wait_for(lambda: all(project.announced(t) for t in tags), what="the runs and a grandchild")
    pids = {t: project.announced(t)[0] for t in tags}
    started = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    else:
        os.kill(proc.pid, signal.SIGTERM)  # what a preempting scheduler does
    out, _ = proc.communicate(timeout=60)
    took = time.monotonic() - started
    print(f"MEASURED exit-after-{sig.name}-{'+'.join(variants)}: {took:.2f} s")
    assert proc.returncode == 130, out
    assert "interrupted" in out and "rerun with --resume" in out
    # a SIGTERM-ignoring child costs the grace period (TERM_GRACE_S), then SIGKILL;
    # others end at once (their orphaned grandchildren wait for init to reap them)
    assert took < TERM_GRACE_S + 5
    for tag, pid in pids.items():
        assert not alive(pid), f"{tag} ({pid}) survived"
    for tag in variants:
        assert not group_members(pids[tag]), f"the process group of {tag} has survivors"
    assert project.records() == []  # nothing completed, nothing half-written
    assert_nothing_left(project)

    project.release()
    resumed = project.run("--resume", "--entry", "waits/gate")
    assert resumed.returncode == 0, resumed.stdout
    assert "0 of 4 jobs already stored, 4 to run" in resumed.stdout
    assert set(project.keys().values()) == {1} and len(project.keys()) == 4


def test_a_run_started_just_after_an_interrupt_is_ended_at_once(tmp_path: Path) -> None:
    # a worker thread may start its child after kill_all() took its list of groups;
    # without this, the interrupted harness waits out that child's whole timeout
    groups = ProcessGroups()
    groups.kill_all()
    started = time.monotonic()
    child = run_isolated(
        [sys.executable, "-c", "import time; time.sleep(60)"], {}, timeout_s=60, groups=groups
    )
    assert child.signal == signal.SIGKILL
    assert time.monotonic() - started < 10


# --- 3. two runs, one store --------------------------------------------------------------


@pytest.mark.slow
def test_two_runs_into_one_store_at_once_neither_interleave_nor_lose_lines(
    project: Project,
) -> None:
    # both start at once on a fresh envs dir: one builds the environment, the other waits
    runs = [
        project.start("--profile", "many", "--entry", "tiny/faults", "-j", "4") for _ in range(2)
    ]
    outs = [r.communicate(timeout=120)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    assert sorted("reused in" in out for out in outs) == [False, True], outs
    records = project.records()  # every line parses: no interleaving
    assert len(records) == 2 * 10 * TINY_JOBS
    assert set(project.keys().values()) == {2}  # each job once per run: nothing lost
    assert {str(r["outcome"]) for r in records} == {
        "reproduced",
        "other_error",
        "ok",
        "wrong_result",
    }
    assert_nothing_left(project)


# --- 4. environments that cannot be built ------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: connections refused


@pytest.mark.slow
def test_unbuildable_environments_are_env_failed_with_the_reason_and_the_rest_runs(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path / "proj", "matrix_env_failures.yaml")
    # the good environment first, with the shared cache, so that it is reused below
    first = project.run("--entry", "tiny/faults", "--env", ENV_ID)
    assert first.returncode == 0, first.stdout
    project.store.unlink()
    port = _closed_port()
    index = f"http://127.0.0.1:{port}/simple"
    result = project.run(
        "--entry", "tiny/faults",
        UV_CACHE_DIR=str(tmp_path / "empty-cache"), UV_DEFAULT_INDEX=index, UV_INDEX_URL=index,
        UV_HTTP_RETRIES="0",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    by_env: dict[str, list[dict[str, object]]] = {}
    for r in project.records():
        by_env.setdefault(str(r["env"]), []).append(r)
    assert len(by_env) == 4 and all(len(v) == TINY_JOBS for v in by_env.values())

    def reason(env: str) -> str:
        (reasons,) = {str(r["reason"]) for r in by_env[env]}
        assert {r["outcome"] for r in by_env[env]} == {"env_failed"}
        return reasons

    assert f"127.0.0.1:{port}" in reason(f"py{PY}-torch1.15.0-lightning0")
    assert "connection refused" in reason(f"py{PY}-torch1.15.0-lightning0").lower()
    assert "six==99.99.99" in reason(f"py{PY}-torch99.99.99-lightning0")
    assert "no Python 3.99 interpreter found" in reason("py3.99-torch1.16.0-lightning0")
    # the good environment was reused (no index needed) and its runs measured
    assert {str(r["outcome"]) for r in by_env[ENV_ID]} >= {"reproduced", "ok"}
    assert f"env_failed py{PY}-torch1.15.0-lightning0:" in result.stdout
    assert_nothing_left(project)


@pytest.mark.slow
def test_offline_without_the_package_in_cache_is_env_failed(tmp_path: Path) -> None:
    project = Project(tmp_path / "proj")
    result = project.run(
        "--entry", "tiny/faults", UV_CACHE_DIR=str(tmp_path / "empty-cache"), UV_OFFLINE="1"
    )
    assert result.returncode == 0, result.stdout
    records = project.records()
    assert len(records) == TINY_JOBS and {r["outcome"] for r in records} == {"env_failed"}
    assert "not found in the cache" in str(records[0]["reason"])
    assert not (project.envs / ENV_ID).exists()  # a failed build leaves nothing to reuse


# --- 5. an environment half-built by a killed install ------------------------------------


@contextlib.contextmanager
def installing_forever(project: Project, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A run whose environment install waits on an index that accepts and never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        index = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        proc = project.start(
            "--entry", "tiny/faults",
            UV_CACHE_DIR=str(tmp_path / "empty-cache"), UV_DEFAULT_INDEX=index, UV_INDEX_URL=index,
        )  # fmt: skip
        wait_for(
            lambda: descendants_running(" pip install ", proc.pid),
            what="the harness to be installing",
        )
        yield proc


@pytest.mark.slow
def test_install_killed_half_way_is_never_used_and_is_rebuilt(tmp_path: Path) -> None:
    project = Project(tmp_path / "proj")
    with installing_forever(project, tmp_path) as proc:
        os.killpg(proc.pid, signal.SIGKILL)  # the machine dies: harness and installer at once
        proc.communicate(timeout=30)
    half = project.envs / ENV_ID
    assert (half / "bin" / "python").exists() and not (half / MARKER).exists()
    assert project.records() == []

    rebuilt = project.run("--entry", "tiny/faults")
    assert rebuilt.returncode == 0, rebuilt.stdout
    assert "built in" in rebuilt.stdout and "reused" not in rebuilt.stdout
    assert (half / MARKER).is_file()
    assert len(project.records()) == TINY_JOBS
    assert project.outcome("tiny/faults", "documented") == "reproduced"


@pytest.mark.slow
def test_interrupt_during_an_install_removes_the_half_built_environment(tmp_path: Path) -> None:
    project = Project(tmp_path / "proj")
    with installing_forever(project, tmp_path) as proc:
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the harness and its installer
        out, _ = proc.communicate(timeout=60)
    print(f"MEASURED exit-after-SIGINT-during-install: {time.monotonic() - started:.2f} s")
    assert proc.returncode == 130, out
    assert not descendants_running("uv", proc.pid)
    assert not (project.envs / ENV_ID).exists()  # deleted, never left to be reused
    assert project.records() == []


@pytest.mark.slow
def test_environment_that_lost_its_packages_fails_the_health_check_and_is_rebuilt(
    project: Project,
) -> None:
    first = project.run("--entry", "tiny/faults")
    assert first.returncode == 0 and "built in" in first.stdout, first.stdout
    again = project.run("--entry", "tiny/faults")
    assert "reused in" in again.stdout, again.stdout
    (site,) = (project.envs / ENV_ID).glob("lib/python*/site-packages")
    (site / "six.py").unlink()  # what an install killed mid-way, or a cleaner, leaves
    healed = project.run("--entry", "tiny/faults")
    assert healed.returncode == 0, healed.stdout
    assert "built in" in healed.stdout and "reused" not in healed.stdout
    assert (site / "six.py").is_file()
    assert {r["outcome"] for r in project.records()} == {
        "reproduced", "other_error", "ok", "wrong_result"
    }  # fmt: skip


# --- 6. malformed inputs: file:line, what to change, exit 2, nothing built ---------------


def _error_line(path: Path) -> int:
    (line,) = [n for n, t in enumerate(path.read_text().splitlines(), 1) if "# <- error" in t]
    return line


MATRIX_CASES = {
    "bad_yaml": "not valid YAML",
    "unknown_key": "unknown key 'pyhton'",
    "bad_specifier": "is neither a version nor a PEP 440 specifier",
    "empty_axis": "devices is empty; list at least one value",
    "contradictory": "selects no cell",
    "python_tag": "not allowed",
}


@pytest.mark.parametrize("case", sorted(MATRIX_CASES))
def test_malformed_matrix_fails_fast_with_file_line(project: Project, case: str) -> None:
    scenario = SCENARIOS / "matrix" / f"{case}.yaml"
    project.set_matrix(scenario.read_text())
    result = project.run()
    assert result.returncode == 2, result.stdout
    where = f"{project.root / 'matrix.yaml'}:{_error_line(scenario)}:"
    assert where in result.stdout, result.stdout
    assert MATRIX_CASES[case] in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not project.envs.exists() and not project.store.exists()


ENTRY_CASES = {
    "bad_isolation": "isolation must be 'process'",
    "missing_signature": "lacks required key(s): signature",
    "unknown_kind": "unknown variant kind 'workaroud'",
    "duplicate_variant": "duplicate variant name 'ok'",
    "bad_regex": "signature.message is not a valid regular expression",
    "id_mismatch": "entry id 'tiny/other' must equal its folder 'tiny/faults'",
    "id_traversal": "entry id '../../x' must match",
    "repro_outside": "must stay inside",
    "python_tag": "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed",
}


@pytest.mark.parametrize("case", sorted(ENTRY_CASES))
def test_malformed_entry_fails_fast_with_file_line(project: Project, case: str) -> None:
    scenario = SCENARIOS / "entries" / f"{case}.yaml"
    entry_yaml = project.root / "repros" / "tiny" / "faults" / "entry.yaml"
    entry_yaml.write_text(scenario.read_text())
    result = project.run()
    assert result.returncode == 2, result.stdout
    assert f"{entry_yaml}:{_error_line(scenario)}:" in result.stdout, result.stdout
    assert ENTRY_CASES[case] in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not project.envs.exists() and not project.store.exists()
    assert not (project.root / "signals" / "PWNED").exists()


def test_yaml_tags_construct_nothing(project: Project) -> None:
    marker = project.signals / "PWNED"
    for target, scenario in (
        (project.root / "matrix.yaml", SCENARIOS / "matrix" / "python_tag.yaml"),
        (project.root / "repros" / "tiny" / "faults" / "entry.yaml", SCENARIOS / "entries" / "python_tag.yaml"),
    ):  # fmt: skip
        saved = target.read_text()
        target.write_text(scenario.read_text().replace("PYTHON", PY).replace("MARKER", str(marker)))
        assert project.run("--list").returncode == 2
        target.write_text(saved)
    assert not marker.exists()


# --- 7. a results file whose last line was cut -------------------------------------------


@pytest.mark.slow
def test_truncated_last_line_is_named_kept_out_and_only_it_reruns(project: Project) -> None:
    first = project.run("--entry", "tiny/faults")
    assert first.returncode == 0, first.stdout
    data = project.store.read_bytes()
    cut = data[: len(data) - 40]  # the last record loses its end and its newline
    project.store.write_bytes(cut)
    lost = json.loads(data.splitlines()[-1])

    resumed = project.run("--entry", "tiny/faults", "--resume")
    assert resumed.returncode == 0, resumed.stdout
    assert f"{project.store}:{TINY_JOBS}: truncated last line kept out" in resumed.stdout
    assert f"resume: {TINY_JOBS - 1} of {TINY_JOBS} jobs already stored, 1 to run" in (
        resumed.stdout
    )
    assert f"tiny/faults::{lost['variant']}@" in resumed.stdout
    text = project.store.read_bytes()
    assert text.startswith(cut + b"\n")  # every earlier byte kept
    complete = []
    for line in text.splitlines():
        try:
            complete.append(json.loads(line))
        except ValueError:
            assert line == cut.splitlines()[-1]  # the fragment, alone on its line
    keys = Counter((r["variant"], r["trial"]) for r in complete)
    assert len(keys) == TINY_JOBS and set(keys.values()) == {1}


def test_document_without_its_marked_blocks_is_named_and_the_records_are_kept(
    project: Project,
) -> None:
    document = project.root / "repros" / "tiny" / "faults" / "document.md"
    result = subprocess.run(
        [a for a in project.argv("--entry", "tiny/faults") if a != "--no-report"],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: {document}: missing block(s)" in result.stdout
    assert "harness:verification:begin" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert len(project.records()) == TINY_JOBS  # measured before the report: all kept
