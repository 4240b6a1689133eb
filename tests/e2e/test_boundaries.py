"""Issue 25: nothing escapes a run, nothing outside the project is touched, no file type
stops the store. Each numbered item of the issue is caused here through the real CLI
(real daemons, links, FIFOs, sparse files, a hanging interpreter) and failed before its
fix; docs/reliability.md's round-three table names them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report.writeback import BLOCKS
from tests.catalogue.test_export import DEMO_REPRO, DEMO_YAML
from tests.e2e.test_hostile import cli
from tests.e2e.test_reliability import REPO, RESOURCES, Project

BOUNDARIES = RESOURCES / "boundaries"
LINUX = sys.platform.startswith("linux")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


def _running_with(mark: str) -> list[int]:
    """Live processes (zombies aside) whose last argument is ``mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark.encode() in argv and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def no_daemon_left(mark: str) -> Iterator[None]:
    """Kills what the test left (only where the harness failed to)."""
    try:
        yield
    finally:
        for pid in _running_with(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# --- 1. a process outlives the run ----------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="PR_SET_CHILD_SUBREAPER is Linux's")
@pytest.mark.parametrize("isolation", ["fork", "process"])
def test_a_daemon_a_variant_leaves_is_ended_with_its_run_and_the_record_says_so(
    tmp_path: Path, isolation: str
) -> None:
    """fork, setsid, fork, close every descriptor, sleep: recorded ``ok`` while the
    grandchild (PPID 1, its own session) went on running after the run."""
    project = Project(tmp_path / "proj", isolation=isolation)
    shutil.copytree(BOUNDARIES / "daemon", project.root / "repros" / "boundaries" / "daemon")
    mark = str(project.signals)  # the daemons' last argument
    with no_daemon_left(mark):
        out = project.run("--entry", "boundaries/daemon", "-j", "1", "--timeout", "4")
        assert out.returncode == 0, out.stdout + out.stderr
        left = _running_with(mark)
        assert left == [], f"{left} outlived the run"
    records = {r["variant"]: r for r in project.records()}
    assert {v: r["outcome"] for v, r in records.items()} == {
        "leaves": "ok",
        "leaves-and-hangs": "timeout",
        "leaves-and-dies": "crashed",
    }
    warned = records["leaves"]["checks"]["_warnings"]  # type: ignore[index]
    assert any(
        "ended 1 process the run left running outside its process group" in w for w in warned
    )
    for variant in ("leaves-and-hangs", "leaves-and-dies"):
        reason = str(records[variant]["reason"])
        assert "ended 1 process the run left running outside its process group" in reason


# --- 2. report deletes files outside the project ---------------------------------------------


def _report(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(project, "report", *args, timeout=120)


def _outside_files(folder: Path, *names: str) -> dict[Path, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    old = time.time() - 3600  # older than any grace a cache clean allows
    files = {}
    for name in names:
        path = folder / name
        path.write_bytes(b"not the harness's: " + name.encode())
        os.utime(path, (old, old))
        files[path] = path.read_bytes()
    return files


def _with_records(project: Project) -> None:
    blocks = "".join(f"<!-- harness:{b}:begin -->\n<!-- harness:{b}:end -->\n" for b in BLOCKS)
    for document in (project.root / "repros").glob("*/*/document.md"):
        document.write_text("The entry document.\n" + blocks)
    out = project.run("--entry", "tiny/faults")
    assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("link", ["snapshot", "render", ".cache"])
def test_report_never_writes_or_deletes_through_a_linked_cache_folder(
    project: Project, tmp_path: Path, link: str
) -> None:
    """With results/.cache/snapshot or /render a link to another folder, `report` (exit 0)
    unlinked files there; with results/.cache a link, it wrote its caches there."""
    _with_records(project)
    first = _report(project)
    assert first.returncode == 0, first.stdout + first.stderr
    cache = project.root / "results" / ".cache"
    elsewhere = tmp_path / "elsewhere"
    files = _outside_files(elsewhere, "a.jsonl.json", "b.json", "c.bin", "notes.txt")
    place = cache if link == ".cache" else cache / link
    shutil.rmtree(place)
    place.symlink_to(elsewhere, target_is_directory=True)
    again = _report(project)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "Traceback" not in out
    assert sorted(elsewhere.iterdir()) == sorted(files), "the report wrote or deleted there"
    assert all(path.read_bytes() == data for path, data in files.items())
    assert f"{place}: is a link (to {elsewhere})" in " ".join(out.split())


# --- 3. export -o overwrites anything --------------------------------------------------------


def test_export_writes_only_where_it_may(project: Project, tmp_path: Path) -> None:
    """`export -o results/records/vm.jsonl` replaced the committed records; `-o` an
    entry.yaml broke the project; `-o` a link wrote into its target; `-o` a folder or a
    missing parent was a traceback."""
    _with_records(project)
    demo = project.root / "repros" / "demo" / "err"  # an entry that exports
    demo.mkdir(parents=True)
    shutil.copy(REPO / "repros" / "reprokit.py", project.root / "repros")
    (demo / "entry.yaml").write_text(DEMO_YAML)
    (demo / "repro.py").write_text(DEMO_REPRO)
    for name in ("source.md", "document.md"):
        (demo / name).write_text("x\n")
    store = project.store.read_bytes()
    entry = (project.root / "repros" / "tiny" / "faults" / "entry.yaml").read_bytes()
    target = tmp_path / "victim.py"
    target.write_text("precious\n")
    (tmp_path / "link.py").symlink_to(target)
    (tmp_path / "folder").mkdir()
    existing = tmp_path / "existing.py"
    existing.write_text("old\n")

    def export(where: Path | str, *more: str) -> subprocess.CompletedProcess[str]:
        return cli(project, "export", "demo/err", "--variant", "control", "-o", str(where), *more)

    refused = {
        project.store: "lies inside the project's results/",
        "results/records/m.jsonl": "lies inside the project's results/",
        project.root / "repros" / "tiny" / "faults" / "entry.yaml": "inside the project's repros/",
        tmp_path / "link.py": f"is a link (to {target})",
        tmp_path / "folder": "is a folder; name a file in it",
        tmp_path / "no" / "such" / "x.py": f"no such folder {tmp_path / 'no' / 'such'}",
        existing: "exists; pass --force to replace it",
    }
    for where, expected in refused.items():
        out = export(where, "--force") if where != existing else export(where)
        text = out.stdout + out.stderr
        assert out.returncode == 2, (where, text)
        assert expected in " ".join(text.split()), (where, text)
        assert "Traceback" not in text and "wrote" not in text
    assert project.store.read_bytes() == store
    assert (project.root / "repros" / "tiny" / "faults" / "entry.yaml").read_bytes() == entry
    assert target.read_text() == "precious\n" and existing.read_text() == "old\n"
    assert list((tmp_path / "folder").iterdir()) == []

    fresh = export(tmp_path / "fresh.py")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "def control(" in (tmp_path / "fresh.py").read_text()
    forced = export(existing, "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert existing.read_text() == (tmp_path / "fresh.py").read_text()


# --- 4, 5. FIFOs, folders, dangling links named *.jsonl ---------------------------------------


def _odd_files(folder: Path) -> list[Path]:
    """A FIFO, a folder, a dangling link and a link to an endless device, each *.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    fifo, directory = folder / "fifo.jsonl", folder / "folder.jsonl"
    dangling, device = folder / "dangling.jsonl", folder / "zero.jsonl"
    os.mkfifo(fifo)
    directory.mkdir()
    (directory / "inner.jsonl").write_text("")
    dangling.symlink_to(folder / "nowhere")
    device.symlink_to("/dev/zero")
    return [fifo, directory, dangling, device]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_only_regular_files_are_record_files(project: Project, tmp_path: Path) -> None:
    """A FIFO hung `report`, `run --resume` and `merge`; a folder named x.jsonl killed
    `run --resume` and `merge` with IsADirectoryError; a dangling link killed `report` and
    `run` with FileNotFoundError."""
    _with_records(project)
    records = project.root / "results" / "records"
    odd = _odd_files(records)
    kinds = ("a FIFO", "a folder", "a dangling link", "a character device")

    def named_and_skipped(out: subprocess.CompletedProcess[str]) -> None:
        text = " ".join((out.stdout + out.stderr).split())
        assert "Traceback" not in text, text
        for path, kind in zip(odd, kinds, strict=True):
            assert f"{path}: not a regular file ({kind}); skipped" in text, (kind, text)

    for command in (["report"], ["report", "--check"], ["report", "--no-cache"]):
        out = _report(project, *command[1:])
        assert out.returncode in (0, 1), out.stdout + out.stderr  # --check: stale is 1
        named_and_skipped(out)
    resumed = project.run("--resume", "--entry", "tiny/faults", timeout=60)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "5 of 5 jobs already stored, 0 to run" in resumed.stdout
    named_and_skipped(resumed)

    other = tmp_path / "other"
    theirs = _odd_files(other)
    given = [theirs[0], theirs[1], theirs[3]]  # a dangling link given is "no such file"
    merged = cli(project, "merge", str(other), *map(str, given), timeout=60)
    text = " ".join((merged.stdout + merged.stderr).split())
    assert merged.returncode == 0, text
    assert "Traceback" not in text
    for path, kind in zip(theirs, kinds, strict=True):
        assert f"{path}: not a regular file ({kind}); skipped" in text, (kind, text)


# --- 6. one line of 2 GiB --------------------------------------------------------------------


def _peak_rss_mb(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float, str]:
    """Exit status, peak resident memory (MiB) and output of ``argv``, measured in a
    fresh process whose only child it is."""
    probe = (
        "import resource, subprocess, sys, json;"
        "out = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True);"
        "print(json.dumps([out.returncode, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, out.stdout + out.stderr]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(argv)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, kib, text = json.loads(done.stdout)
    return code, kib / 1024, text


@pytest.mark.skipif(not LINUX, reason="ru_maxrss in KiB and sparse files")
def test_a_record_file_of_one_2_gib_line_is_read_in_bounded_memory_and_time(
    project: Project,
) -> None:
    """A 2 GiB record file of one line without a newline: `report` ran 180 s and reached
    9 GB before it was killed. The file is sparse: it costs no disk."""
    _with_records(project)
    huge = project.root / "results" / "records" / "huge.jsonl"
    with open(huge, "wb") as f:
        f.truncate(2 << 30)
    argv = [sys.executable, "-m", "harness", "--repo", str(project.root), "report"]
    started = time.monotonic()
    code, peak, text = _peak_rss_mb(argv, project.env(), project.root)
    took = time.monotonic() - started
    print(f"MEASURED report-2GiB-line: {took:.1f} s, peak RSS {peak:.0f} MiB")
    assert code == 0, text
    assert f"{huge}:1: truncated last line kept out" in " ".join(text.split())
    assert "2147483648 bytes long" in text
    assert peak < 600, f"{peak:.0f} MiB"
    quarantined = (project.root / "results" / "quarantine" / "huge.jsonl").read_bytes()
    assert len(quarantined) < 1 << 20  # a bounded head of the line, not the line


# --- 7, 8. bounded inputs --------------------------------------------------------------------


def test_new_on_json_nested_100000_deep_is_named(project: Project, tmp_path: Path) -> None:
    """`new` on JSON nested 100,000 deep: a RecursionError traceback."""
    doc = tmp_path / "deep.json"
    doc.write_text('{"id": "x/y/z", "a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    out = cli(project, "new", str(doc), "--format", "deadends-json")
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text and "RecursionError" not in text
    assert "nested more than" in text and str(doc) in text.replace("\n", "")
    assert not (project.root / "repros" / "x").exists()


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("sleep 3600\n", "did not answer within"),
        ("head -c 10000000 /dev/zero | tr '\\0' 'x'\n", "x" * 200),
    ],
    ids=["hangs", "prints-10-MB"],
)
def test_run_python_refuses_a_program_that_is_not_a_python(
    project: Project, tmp_path: Path, body: str, shown: str
) -> None:
    """`run --python` at a shell script that sleeps: silent, still hanging at 120 s; at one
    that prints 10 MB: the 10 MB printed as an environment name, then a traceback."""
    script = _script(tmp_path, "fake-python", body)
    started = time.monotonic()
    out = project.run("--python", str(script), timeout=120)
    took = time.monotonic() - started
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[:2000]
    assert f"--python {script}: not a Python with torch" in " ".join(text.split())
    assert shown in text
    assert len(text) < 5000 and "Traceback" not in text
    assert took < 60, f"{took:.0f} s"
    assert not project.store.exists(), "nothing is stored"


# --- 12. no raw markup ------------------------------------------------------------------------


def test_error_lines_print_no_raw_markup(project: Project) -> None:
    """`[bold red]error:[/]` printed as it is by the commands that print errors unmarked."""
    (project.root / "bad.yaml").write_text("version: 1\nnot: [valid\n")
    runs = [
        cli(project, "export", "tiny/faults", "--variant", "nope"),
        cli(project, "envs", "build", "--matrix", "bad.yaml"),
    ]
    for out in runs:
        text = out.stdout + out.stderr
        assert out.returncode == 2, text
        assert "error:" in text
        assert "[bold red]" not in text and "[/]" not in text, text
