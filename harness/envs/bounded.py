"""Run a command with a time limit and a cap on what it prints: an interpreter asked what
it is, what it holds or whether it imports (harness/envs/backends.py, installed.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["PROBE_OUTPUT_BYTES", "Bounded", "run_bounded"]

PROBE_OUTPUT_BYTES = 1 << 20  # what a probe's stdout and stderr may keep, each


@dataclass(frozen=True)
class Bounded:
    """What a command printed (at most ``limit`` bytes of each stream) and how it ended."""

    returncode: int | None  # None: killed when the time was up
    stdout: str
    stderr: str
    printed: int  # bytes it wrote to stdout, kept or not


def run_bounded(argv: list[str], timeout: float, limit: int = PROBE_OUTPUT_BYTES) -> Bounded:
    """Run ``argv`` in a session of its own, keep the first ``limit`` bytes of its stdout
    and stderr (the rest is read and dropped: a program printing gigabytes costs no
    memory) and kill its whole group when ``timeout`` passes (a shell script's `sleep`
    holds the pipes open after the script is killed). OSError if it cannot start."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    kept = [bytearray(), bytearray()]
    counted = [0, 0]

    def drain(stream: Any, i: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            while block := stream.read1(1 << 16):
                counted[i] += len(block)
                room = limit - len(kept[i])
                if room > 0:
                    kept[i] += block[:room]

    readers = [
        threading.Thread(target=drain, args=(stream, i), daemon=True)
        for i, stream in enumerate((proc.stdout, proc.stderr))
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        code = None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left in its group, too
        proc.wait()
    for reader in readers:
        reader.join(5)  # a daemon that left the group may hold a pipe: stop waiting
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()  # type: ignore[union-attr]
    out, err = (bytes(k).decode("utf-8", "replace") for k in kept)
    return Bounded(code, out, err, counted[0])
