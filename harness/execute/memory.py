"""Host memory bounded for every job, CUDA jobs included: one job never takes the machine.

An address-space limit (RLIMIT_AS, which the child sets on CPU cells) breaks CUDA, whose
driver reserves huge virtual ranges; what bounds a CUDA job is what it really holds. Two
ways, chosen at run time (``choose``):

- **cgroup v2**: where this process's own group has the memory controller and the harness may
  make groups under it (a delegated subtree: ``cgroup.controllers`` lists ``memory`` and the
  group's folder is writable), each job's process group runs in a child group of its own with
  ``memory.max`` set to its bound (and ``memory.swap.max`` 0): the kernel ends it there, and
  ``memory.events`` says so (``oom_kill``). A group that holds processes cannot delegate
  (cgroup v2's rule of no internal processes): the harness moves itself into a leaf of its
  own (``harness``) first, only where it is the only process of its group.
- **an RSS watchdog** elsewhere (cgroup v1, a group not delegated, another OS with /proc): a
  thread reads the memory the job's processes hold of their own (``Private_Clean`` and
  ``Private_Dirty`` of ``/proc/PID/smaps_rollup``: what a forked child shares with its warm
  worker is not its own) every ``POLL_S`` and ends the job's process group (SIGKILL) when the
  sum passes the bound.

Either way the job's result says why it ended (``ChildResult.memory_exceeded``), and the run
goes on: the record is ``crashed`` with that reason (harness/execute/runner.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "POLL_S",
    "Bound",
    "CgroupBound",
    "RssWatchdog",
    "Watch",
    "choose",
    "held_mib",
    "own_cgroup",
]

POLL_S = 0.2  # how often the watchdog reads what the job's processes hold
CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024 * 1024


@dataclass
class Watch:
    """One job's bound, while it runs: ``exceeded`` says why it was ended (empty while not)."""

    pgid: int
    limit_mb: int
    exceeded: str = ""
    peak_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)


class Bound:
    """How a job's host memory is bounded; ``watch(pgid)`` around the wait for the job."""

    how = "none"

    def __init__(self, limit_mb: int) -> None:
        self.limit_mb = limit_mb

    @contextlib.contextmanager
    def watch(self, pgid: int) -> Iterator[Watch]:
        yield Watch(pgid, self.limit_mb)


def _group_members(pgid: int) -> list[int]:
    """The processes of process group (or session) ``pgid``: the job's, its children's."""
    members = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    text = f.read()
                fields = text[text.rindex(")") + 2 :].split()
            except (OSError, ValueError):
                continue
            if int(fields[2]) == pgid or int(fields[3]) == pgid:  # its group, its session
                members.append(int(name))
    return members


def _own_kib(pid: int) -> int:
    """What process ``pid`` holds of its own (private pages, KiB); 0 once it is gone."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return total


def held_mib(pgid: int) -> float:
    """What the processes of ``pgid`` hold of their own, MiB."""
    return sum(_own_kib(pid) for pid in _group_members(pgid)) / 1024


class RssWatchdog(Bound):
    """A thread per job that ends its process group when what it holds passes the bound."""

    how = "RSS watchdog"

    def __init__(self, limit_mb: int, poll_s: float = POLL_S) -> None:
        super().__init__(limit_mb)
        self.poll_s = poll_s

    @contextlib.contextmanager
    def watch(self, pgid: int) -> Iterator[Watch]:
        w = Watch(pgid, self.limit_mb)
        thread = threading.Thread(target=self._poll, args=(w,), daemon=True, name=f"rss-{pgid}")
        thread.start()
        try:
            yield w
        finally:
            w._stop.set()
            thread.join()

    def _poll(self, w: Watch) -> None:
        while not w._stop.wait(self.poll_s):
            held = held_mib(w.pgid)
            w.peak_mb = max(w.peak_mb, held)
            if held > w.limit_mb:
                w.exceeded = (
                    f"out of host memory: its processes held {held:.0f} MiB of their own, over "
                    f"the job's bound of {w.limit_mb} MiB (memory_limit_mb; the harness's RSS "
                    "watchdog ended its process group with SIGKILL)"
                )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(w.pgid, signal.SIGKILL)
                return


def own_cgroup(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> Path | None:
    """This process's cgroup v2 folder (``0::/path`` of /proc/self/cgroup), or None."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            folder = root / line[3:].strip().lstrip("/")
            return folder if (folder / "cgroup.controllers").is_file() else None
    return None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


class CgroupBound(Bound):
    """A child group per job under ``parent`` (memory delegated to it), ``memory.max`` its bound."""

    how = "cgroup v2 memory.max"

    def __init__(self, limit_mb: int, parent: Path) -> None:
        super().__init__(limit_mb)
        self.parent = parent
        self._count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def watch(self, pgid: int) -> Iterator[Watch]:
        w = Watch(pgid, self.limit_mb)
        with self._lock:
            self._count += 1
            group = self.parent / f"job-{os.getpid()}-{self._count}"
        try:
            group.mkdir()
            (group / "memory.max").write_text(str(self.limit_mb * MIB))
        except OSError:  # the group could not be made here after all: the watchdog bounds it
            with contextlib.suppress(OSError):
                group.rmdir()
            with RssWatchdog(self.limit_mb).watch(pgid) as watched:
                yield watched
            return
        try:
            with contextlib.suppress(OSError):  # no swap accounting: nothing to bound
                (group / "memory.swap.max").write_text("0")
            for pid in _group_members(pgid):
                with contextlib.suppress(OSError):  # ended already
                    (group / "cgroup.procs").write_text(str(pid))
            yield w
        finally:
            events = dict(
                zip(
                    _words(group / "memory.events")[::2],
                    _words(group / "memory.events")[1::2],
                    strict=False,
                )
            )
            peak = _words(group / "memory.peak")
            if peak:
                w.peak_mb = int(peak[0]) / MIB
            if int(events.get("oom_kill", "0")) > 0:
                w.exceeded = (
                    f"out of host memory: its processes passed the job's bound of "
                    f"{self.limit_mb} MiB (memory_limit_mb; cgroup v2 memory.max, the "
                    "kernel ended them there)"
                )
            _remove(group)


def _remove(group: Path) -> None:
    """The job's group, once its processes are gone (they may take a moment to leave)."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except OSError:
            threading.Event().wait(0.02)


def _delegated(folder: Path) -> Path | None:
    """A folder under which job groups with a memory.max can be made, or None: ``folder``
    itself where memory is enabled for its children, else after moving this process (the
    only one of its group) into a leaf ``harness`` and enabling memory."""
    if "memory" not in _words(folder / "cgroup.controllers") or not os.access(folder, os.W_OK):
        return None
    if "memory" in _words(folder / "cgroup.subtree_control"):
        return folder
    procs = _words(folder / "cgroup.procs")
    if procs != [str(os.getpid())]:
        return None  # other processes live in it: the harness does not move them
    try:
        leaf = folder / "harness"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (folder / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        return None
    return folder


def choose(limit_mb: int, root: Path = CGROUP_ROOT) -> Bound:
    """cgroup v2 where this machine lets the harness make memory-bounded groups, else the
    RSS watchdog; no bound for a limit of 0."""
    if limit_mb <= 0:
        return Bound(limit_mb)
    folder = own_cgroup(root)
    parent = _delegated(folder) if folder is not None else None
    return CgroupBound(limit_mb, parent) if parent is not None else RssWatchdog(limit_mb)
