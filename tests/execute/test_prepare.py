"""The environment preparer (harness/execute/prepare.py) with a backend that hands out this
interpreter: what preparing gives in each isolation, the warm worker started (or not, and
why), restarted when it died, stopped when its environment is closed."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

from harness.envs.backends import BuiltEnv, EnvFailed, Prober
from harness.execute.prepare import Preparer
from harness.execute.proc import ProcessGroups
from harness.execute.warm import WarmProber
from harness.spec.matrix import Environment

MACHINE = {"host": "test", "gpu": "none"}


class Backend:
    """``built`` for every environment (its health check run by the prober, if asked), or
    the installer's failure."""

    def __init__(self, built: BuiltEnv | None, use_prober: bool = False) -> None:
        self.built = built
        self.use_prober = use_prober
        self.probers: list[Prober | None] = []

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        self.probers.append(prober)
        if self.built is None:
            raise EnvFailed("uv pip install failed:\nno such version")
        if self.use_prober and prober is not None:
            prober(self.built.python, self.built.imports)
        return self.built


def json_env(host_env: BuiltEnv) -> BuiltEnv:
    return replace(host_env, imports=(("json",),))


def test_a_failed_environment_gives_the_installers_reason(host_env: BuiltEnv) -> None:
    backend = Backend(None)
    result = Preparer(backend, "fork", ProcessGroups(), MACHINE).prepare(host_env.env)
    assert result.built is None and result.worker is None
    assert result.failure == "uv pip install failed:\nno such version"
    (prober,) = backend.probers
    assert isinstance(prober, WarmProber) and prober.worker is None  # none left running


def test_fresh_interpreters_need_no_worker(host_env: BuiltEnv) -> None:
    backend = Backend(json_env(host_env))
    result = Preparer(backend, "process", ProcessGroups(), MACHINE).prepare(host_env.env)
    assert result.built == json_env(host_env) and result.worker is None and result.note == ""
    assert backend.probers == [None]  # the backend's own health check


def test_the_health_check_that_started_a_worker_keeps_it(host_env: BuiltEnv) -> None:
    backend = Backend(json_env(host_env), use_prober=True)
    prep = Preparer(backend, "fork", ProcessGroups(), MACHINE)
    result = prep.prepare(host_env.env)
    try:
        # one import per environment: the health check's worker is the one its jobs use
        (prober,) = backend.probers
        assert isinstance(prober, WarmProber) and result.worker is prober.worker
        assert result.worker is not None and result.worker.alive
        assert result.note.startswith("warm worker imported in ")
    finally:
        if result.worker is not None:
            result.worker.stop()


def test_a_worker_is_restarted_when_it_died_and_stopped_on_close(host_env: BuiltEnv) -> None:
    prep = Preparer(Backend(json_env(host_env)), "fork", ProcessGroups(), MACHINE)
    env = host_env.env
    result = prep.prepare(env)  # checked another way: a worker is started for it
    ready = prep.accept(env, result)
    assert ready.provenance == {**MACHINE, "cuda": "none", "compute_capability": "none"}
    first = prep.worker_for(env)
    assert first is not None and first is result.worker and first.alive
    assert prep.worker_for(env) is first  # alive: the same one
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while first.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    second = prep.worker_for(env)
    try:
        assert second is not None and second is not first and second.alive
        assert second.pid != first.pid
    finally:
        prep.close(env)
    assert not second.alive and prep.ready(env).worker is None
    assert prep.worker_for(env) is None  # closed: the rest would run fresh


def test_a_worker_whose_imports_fail_leaves_fresh_interpreters_and_says_why(
    host_env: BuiltEnv,
) -> None:
    broken = replace(host_env, imports=(("json",), ("no_such_module",)))
    result = Preparer(Backend(broken), "fork", ProcessGroups(), MACHINE).prepare(host_env.env)
    assert result.built == broken and result.worker is None
    assert result.note.startswith("warm worker did not start (no_such_module: ")
    assert result.note.endswith("): fresh interpreters")
