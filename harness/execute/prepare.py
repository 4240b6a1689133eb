"""Environments prepared ahead of their jobs: built or reused (harness/envs/backends.py),
health-checked, with their warm worker started where isolation is "fork"; then held while
their jobs run (the built environment, the provenance its records carry, the worker,
restarted when it died) and closed when the scheduler says they are finished."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from harness.envs.backends import CHILD, BuiltEnv, CannotServe, EnvBackend, EnvFailed
from harness.envs.provenance import cuda_provenance
from harness.execute.proc import ProcessGroups
from harness.execute.warm import WarmProber, WarmWorker, WorkerFailed
from harness.spec.matrix import Environment

__all__ = ["Prepared", "Preparer", "ReadyEnv"]


@dataclass(frozen=True)
class Prepared:
    """What preparing an environment gave: built (or failed) and its warm worker."""

    built: BuiltEnv | None
    failure: str = ""
    worker: WarmWorker | None = None
    note: str = ""
    # the package index cannot serve the environment's requirements (backends.CannotServe)
    cannot_serve: bool = False


@dataclass
class ReadyEnv:
    """A prepared environment while its jobs run."""

    built: BuiltEnv
    provenance: dict[str, str]  # the machine's, with CUDA's as the environment sees it
    worker: WarmWorker | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one restart at a time


def _last_line(exc: BaseException) -> str:
    """A worker's failure in one line: the last, where the exception is named."""
    lines = str(exc).strip().splitlines()
    return lines[-1] if lines else "no reason given"


class Preparer:
    """``prepare`` runs in a slot of its own (a pool thread), ``worker_for`` in a job's;
    ``accept``, ``close`` and ``close_all`` in the run loop's thread."""

    def __init__(
        self,
        backend: EnvBackend,
        isolation: str,
        groups: ProcessGroups,
        machine: dict[str, str],
    ) -> None:
        self.backend = backend
        self.isolation = isolation
        self.groups = groups
        self.machine = machine
        self._ready: dict[Environment, ReadyEnv] = {}

    def prepare(self, env: Environment) -> Prepared:
        """Build or health-check ``env`` and start its warm worker. With isolation "fork"
        the worker's imports are the health check (one import)."""
        prober = WarmProber(CHILD, self.groups, env.id) if self.isolation == "fork" else None
        try:
            built = self.backend.ensure(env, prober)
        except EnvFailed as exc:
            if prober is not None:
                prober.discard()
            return Prepared(None, str(exc), cannot_serve=isinstance(exc, CannotServe))
        if prober is None:
            return Prepared(built)
        if prober.worker is None and not prober.failure:  # checked another way: start one now
            prober.worker, prober.failure = self._start(env, built)
        worker = prober.worker
        if worker is None:
            return Prepared(
                built, note=f"warm worker did not start ({prober.failure}): fresh interpreters"
            )
        return Prepared(
            built, worker=worker, note=f"warm worker imported in {worker.import_s:.1f} s"
        )

    def _start(self, env: Environment, built: BuiltEnv) -> tuple[WarmWorker | None, str]:
        """A warm worker for ``built``, or None and why it did not start."""
        worker = WarmWorker(built.python, CHILD, built.imports, self.groups, env.id, built.isolated)
        try:
            found = worker.start()
        except WorkerFailed as exc:
            worker.stop()
            return None, _last_line(exc)
        if found.missing:
            worker.stop()
            return None, "; ".join(f"{k}: {v}" for k, v in found.missing.items())
        return worker, ""

    def accept(self, env: Environment, result: Prepared) -> ReadyEnv:
        """Hold what preparing ``env`` built (``result.built`` is not None) for its jobs."""
        assert result.built is not None
        ready = ReadyEnv(
            result.built, cuda_provenance(self.machine, result.built.probe), result.worker
        )
        self._ready[env] = ready
        return ready

    def ready(self, env: Environment) -> ReadyEnv:
        return self._ready[env]

    def worker_for(self, env: Environment) -> WarmWorker | None:
        """The environment's warm worker, started anew when the last one died or hung;
        None when there is none (the job runs in a fresh interpreter)."""
        ready = self._ready[env]
        with ready.lock:
            worker = ready.worker
            if worker is None or worker.alive:
                return worker
            worker.stop()
            # where a new one does not start, the rest of this environment runs fresh
            ready.worker, _ = self._start(env, ready.built)
            return ready.worker

    def close(self, env: Environment) -> None:
        """Stop ``env``'s warm worker: its jobs are done (or the run is ending)."""
        ready = self._ready.get(env)
        if ready is not None and ready.worker is not None:
            ready.worker.stop()
            ready.worker = None

    def close_all(self) -> None:
        for env in list(self._ready):
            self.close(env)
