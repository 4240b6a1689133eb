from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.backends import CHILD, BuiltEnv
from harness.execute.warm import WarmWorker
from harness.spec.entries import Entry, load_entry
from harness.spec.matrix import Cell, Environment
from tests.paths import REPO, RESOURCES

# A test session started in the background of a non-interactive shell (`nohup ... &`) inherits
# SIGINT ignored, and so would every harness it starts: the Ctrl-C tests would then wait for
# an interrupt that is never delivered. The harness under test gets Ctrl-C as a terminal's
# foreground job would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def repo() -> Path:
    """The repository's root (read-only: copy what a test changes)."""
    return REPO


@pytest.fixture
def tiny_entry() -> Entry:
    return load_entry(RESOURCES / "entries" / "tiny" / "faults", RESOURCES / "entries")


@pytest.fixture
def host_env() -> BuiltEnv:
    """This interpreter as a target environment: the child protocol needs no torch."""
    env = Environment(
        python=f"{sys.version_info[0]}.{sys.version_info[1]}", torch="0", lightning="0"
    )
    return BuiltEnv(
        env, Path(sys.prefix), Path(sys.executable), probe={"python": sys.version.split()[0]}
    )


@pytest.fixture
def cpu_cell(host_env: BuiltEnv) -> Cell:
    return Cell(host_env.env, "cpu", "fp32")


@pytest.fixture(params=["fork", "process"])
def worker(request: pytest.FixtureRequest, host_env: BuiltEnv) -> Iterator[WarmWorker | None]:
    """Each isolation mode in turn: a warm worker of this interpreter, or None (fresh)."""
    if request.param == "process":
        yield None
        return
    warm = WarmWorker(host_env.python, CHILD, (("json",),), label="test")
    warm.start()
    yield warm
    warm.stop()
