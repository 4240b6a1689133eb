"""Issue 11: a hostile reproducer, record, file or process cannot stop the harness. Each
test reproduces one of the issue's examples through the real CLI (or the real process)
and failed before the fix; docs/reliability.md names
them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.report.writeback import BLOCKS
from tests.e2e.test_reliability import PY, RESOURCES, Project, alive, wait_for

HOSTILE = RESOURCES / "hostile"
SURROGATE = b"file \xff name".decode("utf-8", "surrogateescape")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project(tmp_path / "proj")
    for name in ("results", "disk"):
        shutil.copytree(HOSTILE / name, p.root / "repros" / "hostile" / name)
    blocks = "".join(f"<!-- harness:{b}:begin -->\n<!-- harness:{b}:end -->\n" for b in BLOCKS)
    for document in (p.root / "repros").glob("*/*/document.md"):
        document.write_text("The entry document.\n" + blocks)
    return p


def report(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project.root), "report", *args],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def by_variant(project: Project) -> dict[str, dict[str, object]]:
    return {str(r["variant"]): r for r in project.records()}


@pytest.mark.parametrize("isolation", ["fork", "process"])
def test_bad_result_files_are_classified_and_every_other_record_is_stored(
    project: Project, isolation: str
) -> None:
    """A reproducer writing its own result file with outcome "bogus" or checks [1, 2]
    raised in the worker thread and ended the run with a traceback."""
    done = project.run(
        "--entry", "hostile/results", "--entry", "tiny/faults", "-j", "2", "--isolation", isolation
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    records = by_variant(project)
    assert set(records) == {
        "bogus-outcome",
        "list-checks",
        "not-json",
        "surrogate",
        "fine",
        "documented",
        "other",
        "ok",
        "wrong",
        "control",
    }
    bogus, checks, garbage = records["bogus-outcome"], records["list-checks"], records["not-json"]
    assert bogus["outcome"] == "crashed"
    assert str(bogus["reason"]).startswith("the run's result file was refused: outcome: 'bogus'")
    assert checks["outcome"] == "crashed"
    assert "checks: must be an object, got list [1, 2]" in str(checks["reason"])
    assert garbage["outcome"] == "crashed" and "not UTF-8 JSON" in str(garbage["reason"])
    surrogate = records["surrogate"]
    assert surrogate["outcome"] == "other_error"
    assert surrogate["exception"]["message"] == "file \ufffd name"  # type: ignore[index]
    assert records["fine"]["outcome"] == "ok"
    assert report(project).returncode == 0


def test_a_stored_line_with_a_lone_surrogate_no_longer_stops_every_report(
    project: Project,
) -> None:
    """A record stored by an older harness with a lone surrogate in its text made every
    later report fail with UnicodeEncodeError."""
    assert project.run("--entry", "tiny/faults").returncode == 0
    lines = project.lines()
    # the dead end that raises another error (records are stored in the order jobs end)
    hostile = next(d for d in map(json.loads, lines) if d["variant"] == "other" and d["exception"])
    hostile["exception"]["message"] = SURROGATE  # json.dumps writes it as \udcff
    hostile["trial"] = 1
    project.store.write_text("\n".join([*lines, json.dumps(hostile)]) + "\n")
    first = report(project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert report(project, "--check").returncode == 0
    page = (project.root / "results" / "compat" / "tiny__faults.md").read_text("utf-8")
    assert "file \ufffd name" in page


def run_on_a_full_disk(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """``run --entry hostile/disk -j 1 *args`` with TMPDIR on a real 4 MiB tmpfs, mounted
    in a private mount namespace (unshare -rm); skips where user namespaces are unavailable.
    The environment is built first on the real disk (uv needs room of its own). One job at
    a time: with two, a healthy job that ended after the filler hit ENOSPC freed its run
    folder's pages, the filler's result fitted in them and no job was cut (1 run in 10)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is absent")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {project.tmp}"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"no private tmpfs here: {probe.stderr.decode()[:200]}")
    warm = project.run("--entry", "hostile/disk", "--variant", "c-healthy")
    assert warm.returncode == 0, warm.stdout
    project.store.unlink()
    mount = f'mount -t tmpfs -o size=4m tmpfs {project.tmp} && exec "$@"'
    return subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            mount,
            "sh",
            *project.argv("--entry", "hostile/disk", "-j", "1", *args),
        ],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("isolation", ["fork", "process"])
def test_a_full_disk_stops_the_run_with_a_clear_error_and_no_crashed_record(
    project: Project, isolation: str
) -> None:
    """A reproducer that filled the disk turned the healthy jobs after it into crashed
    records ("exit status 1 without a result") that --resume then skipped. The disk is a
    real 4 MiB tmpfs mounted over TMPDIR in a private mount namespace (unshare -rm)."""
    full = run_on_a_full_disk(project, "--isolation", isolation)
    out = full.stdout + full.stderr
    assert full.returncode == 1, out
    assert "error: [Errno 28] no space left on the disk of" in out and "--resume" in out
    assert "Traceback" not in out
    assert not [r for r in project.records() if r["outcome"] == "crashed"], project.records()
    # the tmpfs went with its namespace: the disk has room again and resume measures all
    resumed = project.run("--entry", "hostile/disk", "--resume", "--variant", "*-healthy")
    assert resumed.returncode == 0, resumed.stdout
    assert {r["variant"]: r["outcome"] for r in project.records()} == {
        "b-healthy": "ok",
        "c-healthy": "ok",
    }


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if text[text.rindex(")") + 2 :].split()[1] == str(pid):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_render_workers_end_with_a_killed_report(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGKILL or SIGTERM of a report that forked render workers left them blocked for
    ever (each held its siblings' ends of the parent's pipes)."""
    proc = subprocess.Popen(
        [sys.executable, str(HOSTILE / "render_shards.py"), "200", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        text=True,
    )
    workers: list[int] = []
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "rendering\n"
        wait_for(lambda: len(_children(proc.pid)) == 2, 60, "two render workers")
        workers = _children(proc.pid)
        assert proc.poll() is None  # killed mid-report, its workers rendering or waiting
        os.kill(proc.pid, sig)
        proc.wait(30)
        started = time.monotonic()
        wait_for(lambda: not any(alive(w) for w in workers), 10, "the workers to end")
        print(f"MEASURED render workers ended {time.monotonic() - started:.2f} s after {sig.name}")
    finally:
        for w in {*workers, *_children(proc.pid)}:
            with contextlib.suppress(OSError):
                os.kill(w, signal.SIGKILL)
        proc.kill()
        proc.wait()


def test_outputs_are_written_under_temp_names_no_other_process_uses(project: Project) -> None:
    """Two reports over one results folder wrote the same `<file>.tmp`, and one exited
    with FileNotFoundError. A fixed temp name taken by another writer (here: a folder in
    its place) must not matter."""
    assert project.run("--entry", "tiny/faults").returncode == 0
    compat = project.root / "results" / "compat"
    compat.mkdir(parents=True)
    for name in ("tiny__faults.md.tmp", "tiny__faults.png.tmp"):
        (compat / name).mkdir()
    (project.root / "results" / "index.html.tmp").mkdir()
    document = project.root / "repros" / "tiny" / "faults" / "document.md.harness-tmp"
    document.mkdir()
    done = report(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (compat / "tiny__faults.md").is_file()
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "harness", "--repo", str(project.root), "report"],
            env=project.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    for p in both:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    assert not list((project.root / "results").rglob(".*.tmp"))


# --- every input bounded: YAML, numbers, paths, filters ----------------------------------


def cli(project: Project, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(project.root), *args],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


ALIAS_BOMB = "".join(
    [
        "version: 1\n",
        'a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]\n',
        *(
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n"
            for i in range(1, 10)  # 10**9 values once expanded
        ),
    ]
)
MATRIX_INPUTS = {
    "alias-bomb": (
        ALIAS_BOMB.encode(),
        ":6: not valid YAML: this value expands through aliases to 111111 values in 6 levels",
    ),
    "many-aliases": (
        ("version: 1\na: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n").encode(),
        ":3: not valid YAML: more than 100 aliases (*a)",
    ),
    "self-containing-anchor": (
        b"version: 1\nloop: &l [*l]\n",
        ":2: not valid YAML: an anchor contains itself (through an alias)",
    ),
    "5000-deep": (b"version: " + b"[" * 5000 + b"]" * 5000 + b"\n", ":1: not valid YAML: nested"),
    "5000-deep-mapping": (
        b"version: 1\nx: " + b"{a: " * 5000 + b"1" + b"}" * 5000 + b"\n",
        ":2: not valid YAML: nested more than 64 levels deep",
    ),
    "invalid-utf8": (
        b"version: 1\ndevices: [cpu]\nprecisions: [\xff\xfe]\n",
        ":3: not valid YAML: not UTF-8: byte 0xff at column 14",
    ),
    "control-character": (
        b"version: 1\ndevices: [cpu]\nprecisions: [fp32\x1f]\n",
        ":3: not valid YAML: character 0x001f is not allowed in YAML; remove it",
    ),
    "too-big": (b"#" * (2 << 20), ": not valid YAML: the file is larger than 1048576 bytes"),
    "huge-trials": (
        (SCENARIOS_MATRIX := (RESOURCES / "reliability" / "matrix.yaml").read_text())
        .replace("trials: 1,", "trials: 1000000000,")
        .encode(),
        ":3: defaults.trials must be from 1 to 100, got 1000000000",
    ),
    "huge-timeout": (
        SCENARIOS_MATRIX.replace("timeout_s: 60,", "timeout_s: 1.0e+300,").encode(),
        ":3: defaults.timeout_s must be from 0.1 to 604800, got 1e+300",
    ),
    "giant-integer": (
        SCENARIOS_MATRIX.replace(
            "memory_limit_mb: 2048", "memory_limit_mb: " + "9" * 5000
        ).encode(),
        ":3: defaults.memory_limit_mb must be a whole number",
    ),
    "giant-version": (  # found by tests/store/test_fuzz.py: packaging's int() raised ValueError
        SCENARIOS_MATRIX.replace('torch: "1.16.0"', 'torch: "' + "9" * 5000 + '"').encode(),
        ":7: torch '" + "9" * 40 + "' is not a version",
    ),
    "profile-trials": (
        SCENARIOS_MATRIX.replace("trials: 10}", "trials: 101}").encode(),
        ":12: profile 'many' trials must be from 1 to 100, got 101",
    ),
}


@pytest.mark.parametrize("name", list(MATRIX_INPUTS))
def test_hostile_matrix_files_fail_fast_with_file_line(project: Project, name: str) -> None:
    """An alias bomb kept `list` busy past 60 s; 5,000-deep nesting was a RecursionError,
    invalid UTF-8 a UnicodeDecodeError, a huge trials count hung `list`."""
    data, expected = MATRIX_INPUTS[name]
    (project.root / "matrix.yaml").write_bytes(data.replace(b"PYTHON", PY.encode()))
    started = time.monotonic()
    out = cli(project, "list")
    took = time.monotonic() - started
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert f"error: {project.root}/matrix.yaml{expected}" in out.stdout, out.stdout
    assert took < 10, f"{name} took {took:.1f} s"


def test_an_alias_bomb_in_an_entry_is_named_too(project: Project) -> None:
    (project.root / "repros" / "tiny" / "faults" / "entry.yaml").write_text(ALIAS_BOMB)
    out = cli(project, "list")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "tiny/faults/entry.yaml:6: not valid YAML: this value expands" in out.stdout


NUMBERS = [
    (("--trials", "1000000000"), "argument --trials: must be from 1 to 100, got 1000000000"),
    (("--trials", "9" * 5000), "argument --trials: '999"),
    (("--jobs", "0"), "argument -j/--jobs: must be from 1 to 256, got 0"),
    (("--jobs", "100000"), "argument -j/--jobs: must be from 1 to 256, got 100000"),
    (("--timeout", "nan"), "argument --timeout: must be a finite number from 0.1 to 604800"),
    (("--timeout", "1e12"), "argument --timeout: must be from 0.1 to 604800, got 1e+12"),
    (("--memory-limit-mb", "0"), "argument --memory-limit-mb: must be from 16 to 4194304"),
    (("--shard", "0/0"), "--shard K/N needs 1 <= K <= N, got '0/0'"),
    (("--shard", "1/1000000"), "--shard K/N: N must be from 1 to 1000, got 1000000"),
    (("--machine", "m" * 300), "argument --machine: must be 1 to 100 characters, got 300"),
]


@pytest.mark.parametrize(("args", "expected"), NUMBERS, ids=[" ".join(a)[:30] for a, _ in NUMBERS])
def test_every_numeric_option_has_a_range(
    project: Project, args: tuple[str, ...], expected: str
) -> None:
    out = cli(project, "run", "--list", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert expected in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_paths_the_user_names_are_checked_first(project: Project, tmp_path: Path) -> None:
    """`report --repo` of a missing folder and `merge` of a missing file were tracebacks."""
    missing = tmp_path / "no-such-project"
    for command in (["report"], ["report", "--check"], ["list"], ["merge", "x.jsonl"]):
        out = subprocess.run(
            [sys.executable, "-m", "harness", "--repo", str(missing), *command],
            env=project.env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"error: --repo {missing}: no such folder" in out.stdout
    out = cli(project, "merge", str(tmp_path / "other.jsonl"))
    assert out.returncode == 2 and f"merge: {tmp_path}/other.jsonl: no such file" in out.stdout
    (tmp_path / "a-file").write_text("")
    out = cli(project, "run", "--envs-dir", str(tmp_path / "a-file"))
    assert out.returncode == 2 and "is a file; name a folder" in out.stdout


TWO_PROFILES = """\
version: 1
devices: [cpu]
precisions: [fp32]
environments:
  - {torch: "1.16.0", python: ["PYTHON"], lightning: ["0"]}
  - {torch: "1.17.0", python: ["PYTHON"], lightning: ["0"]}
profiles:
  one: {description: "the first", torch: ["1.16.0"]}
  other: {description: "the second", torch: ["1.17.0"]}
default_profile: one
"""

FILTERS = [
    (("--entry", "tiny/nope"), "--entry 'tiny/nope' matches no entry; there are 4"),
    (("--variant", "nope*"), "--variant 'nope*' matches no variant of the entries selected"),
    (
        ("--env", "*torch1.17.0*"),
        "--env '*torch1.17.0*' matches no environment of profile 'one'; profile(s) other "
        "have it: add --profile other",
    ),
    (("--cell", "*-cuda-*"), "--cell '*-cuda-*' matches no cell of profile 'one'"),
    (
        ("--entry", "tiny/faults", "--variant", "unsupported"),
        "the filters select 1 (variant, cell) pair(s), none applicable: "
        "tiny/faults::unsupported on",
    ),
]


@pytest.mark.parametrize(("args", "expected"), FILTERS, ids=[" ".join(a) for a, _ in FILTERS])
@pytest.mark.parametrize("command", ["run", "list"])
def test_a_filter_that_selects_nothing_is_named_and_exits_2(
    project: Project, command: str, args: tuple[str, ...], expected: str
) -> None:
    project.set_matrix(TWO_PROFILES)
    argv = (
        ["run", "--no-report", "--envs-dir", str(project.envs)] if command == "run" else [command]
    )
    out = cli(project, *argv, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"error: no job selected: {expected}" in out.stdout, out.stdout
    assert not project.envs.exists()  # nothing built
