"""The process-group runner (harness/execute/proc.py) on its own, with tiny real processes:
what a child is handed and what is read back, the group ended when its leader is done or
timed out, output and result files read within bounds. The ways a reproducer's run ends
(through run_job, both isolations) are tests/execute/test_runner.py's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.execute.proc import (
    MAX_RESULT_BYTES,
    TERM_GRACE_S,
    ProcessGroups,
    disk_full,
    read_result,
    run_isolated,
    tail_of,
)

PY = [sys.executable, "-c"]


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for whoever inherited it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2] not in "ZX"


def wait_gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def test_the_child_gets_its_job_and_its_result_is_read_back() -> None:
    script = textwrap.dedent(
        """
        import json, os, sys
        job = json.load(open(sys.argv[1]))
        json.dump({"outcome": "ok", "got": job, "cwd": os.getcwd()}, open(sys.argv[2], "w"))
        print("to stdout"); print("to stderr", file=sys.stderr)
        """
    )
    child = run_isolated([*PY, script], {"variant": "x"}, timeout_s=60)
    assert child.result is not None and child.result["got"] == {"variant": "x"}
    assert (child.exit_code, child.signal, child.timed_out) == (0, None, False)
    assert child.stdout_tail == "to stdout\n" and child.stderr_tail == "to stderr\n"
    # the child ran in a run folder of its own, which is gone with the run
    assert Path(child.result["cwd"]).name.startswith("harness-run-")
    assert not Path(child.result["cwd"]).exists()


def test_a_child_without_a_result_leaves_its_exit_status_or_signal() -> None:
    exited = run_isolated([*PY, "raise SystemExit(3)"], {}, timeout_s=60)
    assert (exited.result, exited.exit_code, exited.signal) == (None, 3, None)
    killed = run_isolated([*PY, "import os; os.kill(os.getpid(), 9)"], {}, timeout_s=60)
    assert (killed.result, killed.exit_code, killed.signal) == (None, None, signal.SIGKILL)


def test_a_result_file_that_is_not_one_says_why(tmp_path: Path) -> None:
    written = "open(__import__('sys').argv[2], 'w').write('[1, 2]')"
    child = run_isolated([*PY, written], {}, timeout_s=60)
    assert child.result is None and child.result_problem == "not a JSON object but a JSON list"


def _grandchild(tmp_path: Path, ignore_term: bool) -> str:
    """A script whose child (same process group) writes its pid and sleeps a minute."""
    pidfile = tmp_path / "grandchild.pid"
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_term else ""
    return textwrap.dedent(
        f"""
        import os, signal, sys, time
        if os.fork() == 0:
            {ignore}open({str(pidfile)!r}, "w").write(str(os.getpid())); time.sleep(60)
            os._exit(0)
        while not os.path.exists({str(pidfile)!r}) or not open({str(pidfile)!r}).read():
            time.sleep(0.01)
        """
    )


def test_a_grandchild_left_behind_by_a_child_that_exited_is_ended(tmp_path: Path) -> None:
    child = run_isolated([*PY, _grandchild(tmp_path, ignore_term=False)], {}, timeout_s=60)
    assert child.exit_code == 0 and not child.timed_out
    assert wait_gone(int((tmp_path / "grandchild.pid").read_text()))


def test_a_timeout_ends_the_group_and_waits_the_grace_only_for_its_leader(
    tmp_path: Path,
) -> None:
    """The leader ends on SIGTERM; a grandchild that ignores it gets SIGKILL at once, not
    after the grace period (which is for the leader to write what it can)."""
    script = _grandchild(tmp_path, ignore_term=True) + "time.sleep(60)\n"
    started = time.monotonic()
    child = run_isolated([*PY, script], {}, timeout_s=1.5)
    took = time.monotonic() - started
    assert child.timed_out and child.signal == signal.SIGTERM and child.result is None
    assert 1.5 <= took < 1.5 + TERM_GRACE_S - 1
    assert wait_gone(int((tmp_path / "grandchild.pid").read_text()))


def test_a_group_is_known_to_the_groups_while_it_runs_only() -> None:
    seen: list[tuple[str, int]] = []

    class Seen(ProcessGroups):
        def add(self, pgid: int) -> None:
            seen.append(("add", pgid))
            super().add(pgid)

        def discard(self, pgid: int) -> None:
            seen.append(("discard", pgid))
            super().discard(pgid)

    script = 'import os, sys; open(sys.argv[2], \'w\').write(\'{"outcome": "ok", "pgid": %d}\' % os.getpgid(0))'
    child = run_isolated([*PY, script], {}, timeout_s=60, groups=Seen())
    assert child.result is not None
    pgid = child.result["pgid"]  # its own group, led by the child: what an interrupt ends
    assert seen == [("add", pgid), ("discard", pgid)]


def test_a_tail_is_the_last_bytes_as_printable_text(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"a" * 100 + b"\x00\x1b[31mred\xff\n\tend")
    assert (
        tail_of(path, limit=20) == "[95 earlier bytes cut]\naaaaa\ufffd\ufffd[31mred\ufffd\n\tend"
    )
    path.write_bytes(b"short\n")
    assert tail_of(path, limit=20) == "short\n"
    assert tail_of(tmp_path / "never-written") == ""


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"outcome": "ok"}', ""),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b'{"outcome": ', "not UTF-8 JSON"),
        (b'"ok"', "not a JSON object but a JSON str"),
        (b'{"reason": "x"}', "it has no 'outcome'"),
        (b"[" * 100_000, "JSON nested too deeply"),
        (b" " * (MAX_RESULT_BYTES + 1), f"{MAX_RESULT_BYTES + 1} bytes long"),
    ],
    ids=["object", "binary", "cut", "string", "no-outcome", "deep", "huge"],
)
def test_a_result_file_is_read_within_bounds_or_refused_with_why(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(data)
    result, problem = read_result(path)
    assert (result is None) == bool(why) and problem.startswith(why)
    if not why:
        assert result == json.loads(data)


def test_a_disk_with_room_is_not_full_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    assert not disk_full(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_end_own_children_signals_the_children_of_this_process_only(tmp_path: Path) -> None:
    """In a process of its own: there it ends its two sleeping children (one in a session
    of its own) and leaves the grandchild that one of them started."""
    script = textwrap.dedent(
        """
        import json, subprocess, sys, time
        from harness.execute.proc import end_own_children
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        plain = subprocess.Popen(["sleep", "60"], **quiet)
        session = subprocess.Popen(["sleep", "60"], start_new_session=True, **quiet)
        parent = subprocess.Popen(
            [sys.executable, "-c", "import subprocess, time; p = subprocess.Popen(['sleep', "
             "'60'], stderr=subprocess.DEVNULL); print(p.pid, flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        grandchild = int(parent.stdout.readline())
        end_own_children()
        codes = [p.wait(10) for p in (plain, session, parent)]
        print(json.dumps({"codes": codes, "grandchild": grandchild}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["codes"] == [-signal.SIGTERM] * 3
    grandchild = found["grandchild"]
    try:
        assert alive(grandchild)  # not this process's child: not signalled
    finally:
        os.kill(grandchild, signal.SIGKILL)
