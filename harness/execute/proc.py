"""Run one child process isolated: its own process group, a memory limit, a wall-clock
timeout that ends the whole group, output captured to bounded files, the result read
from a file and the exit status as the fallback.

Daemons: a process that leaves the run's group and session (fork, setsid,
fork) is not ended by the group's kill. The job's own process is a child subreaper
(harness/inenv/child.py) and ends them when it ends; when it dies first they are
reparented here, this process being a subreaper too (Linux, ``become_subreaper``), and
``end_strays`` finds them by the run's token in their environment and ends them. On
other systems there is no subreaper: only the process group is ended, as before.

This is isolation "process" (a fresh interpreter per job); harness/execute/warm.py is isolation
"fork" (a warm worker per environment forks a child per job) and returns the same
``ChildResult``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.execute.memory import Bound

__all__ = [
    "TOKEN_VAR",
    "ChildResult",
    "DiskFull",
    "ProcessGroups",
    "become_subreaper",
    "end_own_children",
    "end_strays",
    "new_token",
    "read_result",
    "run_isolated",
    "signal_group",
    "strays_text",
    "tail_of",
]

TAIL_BYTES = 8192
MAX_RESULT_BYTES = 4 << 20  # a result file beyond this is refused unread
TERM_GRACE_S = 5.0


@dataclass(frozen=True)
class ChildResult:
    result: dict[str, Any] | None  # what the child wrote, or None if it wrote nothing usable
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    timed_out: bool
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    result_problem: str = ""  # why a result file that was there is not ``result``
    # set when the warm worker that held the job died or hung: why there is no result
    worker_failure: str | None = None
    # "pid (name)" of each daemon the run left that was found and ended after its process
    # died (those it ended itself are in its result's warnings)
    strays: tuple[str, ...] = ()
    # why its processes were ended for the host memory they held (harness/execute/memory.py)
    memory_exceeded: str = ""


def tail_of(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a file as safe text (binary garbage replaced)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    # keep printable text and line breaks only: control bytes from a child stay out of reports
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else "\ufffd" for ch in text)
    if size > limit:
        text = f"[{size - limit} earlier bytes cut]\n" + text
    return text


class DiskFull(OSError):
    """The disk under a run folder is full: nothing a child leaves there is its own
    outcome, so the run stops (no record) instead of storing it as ``crashed``."""

    def __init__(self, where: Path | str, what: str = "the run folders' TMPDIR") -> None:
        super().__init__(
            errno.ENOSPC,
            f"no space left on the disk of {where} ({what}); the run stops "
            "here, no record is stored for the jobs it cut. Free space (or point TMPDIR "
            "elsewhere) and rerun with --resume, or pass --keep-going to record env_failed "
            "for what cannot run and go on",
        )
        self.where = str(where)


FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
PROBE_BYTES = 64 * 1024


def disk_full(folder: Path) -> bool:
    """True when ``folder``'s disk cannot take a small file (ENOSPC, EDQUOT): asked after
    a child left no usable result, so that a full disk is not blamed on the child."""
    probe = folder / f".space-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.errno in FULL_ERRNOS
    try:
        written = 0
        while written < PROBE_BYTES:  # a short write is room for part of it: go on
            written += os.write(fd, b"\0" * (PROBE_BYTES - written))
        os.fsync(fd)
    except OSError as exc:
        return exc.errno in FULL_ERRNOS
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()
    return False


def read_result(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A child's result file -> (the object, "") or (None, why it cannot be one). Its
    fields are judged later, by validate_record."""
    try:
        size = path.stat().st_size
        if size > MAX_RESULT_BYTES:
            return None, f"{size} bytes long (at most {MAX_RESULT_BYTES})"
        loaded = json.loads(path.read_bytes().decode("utf-8"))
    except RecursionError:
        return None, "JSON nested too deeply"
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError included
        return None, f"not UTF-8 JSON: {str(exc)[:200]}"
    if not isinstance(loaded, dict):
        return None, f"not a JSON object but a JSON {type(loaded).__name__}"
    if "outcome" not in loaded:
        return None, "it has no 'outcome'"
    return loaded, ""


TOKEN_VAR = "HARNESS_RUN_TOKEN"  # in a run's environment: what its daemons are known by
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_tokens = itertools.count(1)


def new_token(kind: str = "job") -> str:
    """A token no other run of this process carries: ``<pid>.<kind><n>``."""
    return f"{os.getpid()}.{kind}{next(_tokens)}"


@functools.cache
def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux 3.4+): a daemon
    whose run's process died is reparented here, not to init, so that ``end_strays`` can
    end it. Once per process; False where it cannot be (another OS)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _stat(pid: str) -> tuple[int, str, int, str] | None:
    """(parent, state, process group, name) of a process (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        end = text.rindex(")")
        fields = text[end + 2 :].split()
        return int(fields[1]), fields[0], int(fields[2]), text[text.index("(") + 1 : end]
    except (OSError, ValueError, IndexError):
        return None


def _carries(pid: int, token: str | None) -> bool:
    """True when ``pid``'s environment holds ``token`` (None: any token of this process's
    runs). A zombie's cannot be read: False."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    prefix = f"{TOKEN_VAR}={os.getpid()}." if token is None else f"{TOKEN_VAR}={token}"
    want = prefix.encode()
    return any(
        item.startswith(want) if token is None else item == want for item in env.split(b"\0")
    )


def end_strays(
    token: str | None,
    *,
    keep: Collection[int] = (),
    groups: Collection[int] = (),
    grace: float = TERM_GRACE_S,
    live: bool = True,
    after: Collection[int] = (),
) -> list[str]:
    """Kill and reap, again and again, each child of this process (a subreaper: the
    daemons of runs whose process died are reparented here) whose environment carries
    ``token`` (None: any run's), and reap the zombies of process ``groups`` (a run's
    members reparented here). ``keep``: children started here (their Popen reaps them);
    ``live``: False reaps the zombies only; ``after``: processes (killed, not children of
    this one) to wait for first, whose children are reparented when they end. Returns
    "pid (name)" of each live one outside ``groups``: the daemons."""
    me = os.getpid()
    escaped: list[str] = []
    seen: set[int] = set()
    deadline = time.monotonic() + grace
    for pid in after:
        while time.monotonic() < deadline:
            st = _stat(str(pid))
            if st is None or st[1] in ("Z", "X"):
                break
            time.sleep(0.005)
    while time.monotonic() < deadline:
        found = []
        with contextlib.suppress(OSError):
            for name in os.listdir("/proc"):
                if not name.isdigit() or int(name) in keep:
                    continue
                st = _stat(name)
                if st is None or st[0] != me:
                    continue
                pid, (_, state, pgid, comm) = int(name), st
                zombie = state in ("Z", "X")
                if zombie and pgid in groups or live and not zombie and _carries(pid, token):
                    found.append(pid)
                    if not zombie and pgid not in groups and pid not in seen:
                        seen.add(pid)
                        escaped.append(f"{pid} ({comm})")
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in found:
            _reap(pid, deadline)
    return escaped


def _reap(pid: int, deadline: float) -> None:
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() > deadline:
            return
        time.sleep(0.005)


def strays_text(escaped: Collection[str]) -> str:
    """What a record says of the daemons a run left (child.strays_text's words)."""
    items = list(escaped)
    n = len(items)
    more = f" and {n - 10} more" if n > 10 else ""
    return (
        f"ended {n} process{'' if n == 1 else 'es'} the run left running outside its "
        f"process group: {', '.join(items[:10])}{more}"
    )


class ProcessGroups:
    """The process groups now running, so that an interrupt can end every one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self.stopping = False

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            stopping = self.stopping
        if stopping:  # started by a worker thread after kill_all took its list: end it now
            signal_group(pgid, signal.SIGKILL)

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def kill_all(self) -> None:
        with self._lock:
            self.stopping = True
            groups = list(self._groups)
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
            # members reparented here (this process is a subreaper) are reaped here
            end_strays(None, keep=groups, groups=groups, grace=0.05, live=False)
            time.sleep(0.05)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)
        with self._lock:  # a run registered since: its Popen reaps it, not end_strays
            started = set(self._groups) | set(groups)
        # the daemons of every run: their runs' processes are gone or going
        end_strays(None, keep=started, groups=groups)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def end_own_children(sig: int = signal.SIGTERM) -> None:
    """Signal every process this one started that is still running (Linux /proc): an
    installer or a health check that a worker thread waits on, when the run is interrupted."""
    me = str(os.getpid())
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            if text[text.rindex(")") + 2 :].split()[1] == me:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole group, then SIGKILL what is left after a grace period."""
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(TERM_GRACE_S)
    signal_group(proc.pid, signal.SIGKILL)  # also grandchildren that outlived the leader
    proc.wait()


def run_isolated(
    argv: list[str],
    job: dict[str, Any],
    timeout_s: float,
    groups: ProcessGroups | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    bound: Bound | None = None,
) -> ChildResult:
    """Run ``argv + [job.json, result.json]`` in a new session and collect what it left;
    ``bound`` holds its host memory (harness/execute/memory.py).
    Raises DiskFull when the run folder's disk is full before the child starts, or when
    the child left no usable result and the disk is full after it."""
    become_subreaper()
    token = new_token()
    env = {**(os.environ if env is None else env), TOKEN_VAR: token}
    with tempfile.TemporaryDirectory(prefix="harness-run-") as tmp:
        work = Path(tmp)
        job_path = work / "job.json"
        result_path = work / "result.json"
        try:
            job_path.write_text(json.dumps(job))
        except OSError as exc:
            if exc.errno in FULL_ERRNOS:
                raise DiskFull(work.parent) from exc
            raise
        out_path, err_path = work / "stdout", work / "stderr"
        started = time.monotonic()
        timed_out = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [*argv, str(job_path), str(result_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: a timeout ends all of it
                cwd=cwd or tmp,
                env=env,
            )
            if groups is not None:
                groups.add(proc.pid)
            # the bound holds the job until every process of its group has ended
            with (bound or Bound(0)).watch(proc.pid) as held:
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _end_group(proc)
                except BaseException:
                    _end_group(proc)  # Ctrl-C or any error here: never leave the child behind
                    raise
                finally:
                    if groups is not None:
                        groups.discard(proc.pid)
                # a child that exited may have left a group behind (a forked grandchild)
                signal_group(proc.pid, signal.SIGKILL)
        duration = time.monotonic() - started
        result, problem = None, ""
        if result_path.is_file() and not timed_out:
            result, problem = read_result(result_path)
        strays: list[str] = []
        if proc.returncode != 0 or result is None:
            # it died before it could end its daemons (it wrote its result after): they
            # are this process's now, and so are its group's zombies
            strays = end_strays(token, groups=(proc.pid,))
        if result is None and not timed_out and disk_full(work):
            raise DiskFull(work.parent)
        rc = proc.returncode
        return ChildResult(
            result=result,
            exit_code=rc if rc is not None and rc >= 0 else None,
            signal=-rc if rc is not None and rc < 0 else None,
            timed_out=timed_out,
            duration_s=round(duration, 3),
            stdout_tail=tail_of(out_path),
            stderr_tail=tail_of(err_path),
            result_problem=problem,
            strays=tuple(strays),
            memory_exceeded=held.exceeded,
        )
