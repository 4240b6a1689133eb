"""One job -> one Record: the child's own verdict, or the exit status when it left none."""

from __future__ import annotations

import datetime as dt
import os
import signal as signals
import time
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.envs.backends import CHILD, BuiltEnv
from harness.execute.memory import Bound
from harness.execute.plan import Job
from harness.execute.proc import ChildResult, ProcessGroups, run_isolated, strays_text
from harness.execute.warm import Refused, WarmWorker
from harness.outcomes import Outcome
from harness.store.records import Record
from harness.store.validate import RecordRefused, validate_record

__all__ = [
    "decided_record",
    "env_failed_record",
    "fallback",
    "record_of",
    "run_job",
    "unservable_record",
    "versions_of",
]

CHILD_PROTOCOL = 2
CUDA_START_KEY = "cuda_start_s"  # in a record's provenance: the child's CUDA context start
OOM_MARKERS = (
    "MemoryError",
    "std::bad_alloc",
    "Cannot allocate memory",
    "can't allocate memory",
    "out of memory",
)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def job_file(
    job: Job, memory_limit_mb: int, skip: str | None = None, deadline: float | None = None
) -> dict[str, Any]:
    """The child's job; ``skip``: the cell cannot run here (no CUDA), and the child only
    imports the reproducer and checks the variant before recording ``skipped`` with it;
    ``deadline``: when the harness ends it (epoch seconds), which the reproducer may read."""
    v = job.variant
    extra: dict[str, Any] = {"skip": skip} if skip else {}
    if deadline is not None:
        extra["deadline"] = round(deadline, 3)
    return {
        **extra,
        "protocol": CHILD_PROTOCOL,
        "repro": str(job.entry.repro),
        "variant": v.name,
        "device": job.cell.device,
        "precision": job.cell.precision,
        "signature": job.entry.signature.to_dict(),
        "variant_signature": v.signature.to_dict() if v.signature else None,
        "memory_limit_mb": memory_limit_mb,
        "parent_pid": os.getpid(),  # the run ends itself if this process dies
    }


def fallback(child: ChildResult, timeout_s: float) -> tuple[Outcome, str]:
    """Classify a child that left no result, from how it ended. Pure."""
    if child.memory_exceeded:  # ended by the harness for the host memory it held
        return Outcome.CRASHED, child.memory_exceeded
    if child.worker_failure:  # the warm worker that held the job died or hung
        if child.timed_out:
            return Outcome.TIMEOUT, (
                f"{child.worker_failure}; ended after the {timeout_s:g} s limit "
                "(the job's process group and the worker were killed)"
            )
        return Outcome.CRASHED, child.worker_failure
    if child.timed_out:
        return Outcome.TIMEOUT, (
            f"ran past the {timeout_s:g} s limit; its process group was ended "
            f"(SIGTERM, then SIGKILL)"
        )
    if child.signal is not None:
        try:
            name = signals.Signals(child.signal).name
        except ValueError:
            name = f"signal {child.signal}"
        if child.signal == signals.SIGKILL and any(m in child.stderr_tail for m in OOM_MARKERS):
            return Outcome.CRASHED, f"out of memory: killed by {name}"
        return Outcome.CRASHED, f"killed by {name} without a Python exception"
    if any(m in child.stderr_tail for m in OOM_MARKERS):
        return Outcome.CRASHED, f"out of memory: exit status {child.exit_code} without a result"
    if child.result_problem:
        return Outcome.CRASHED, (
            f"exit status {child.exit_code}; the run's result file was refused: "
            f"{child.result_problem}"
        )
    return Outcome.CRASHED, f"exit status {child.exit_code} without a result"


def _base(job: Job) -> dict[str, Any]:
    # cell and env: what the record answers for; ran_in: the environment derived from it
    # for the variant's requirements (version advice), where it ran instead; "" where the
    # cell already satisfied every one of them (requires then says what was asked)
    ran_in = job.env
    return {
        "entry": job.entry.id,
        "variant": job.variant.name,
        "kind": job.variant.kind,
        "cell": job.cell.id,
        "env": job.cell.env.id,
        "device": job.cell.device,
        "precision": job.cell.precision,
        "trial": job.trial,
        "ran_in": ran_in.id if ran_in != job.cell.env else "",
        "requires": {canonicalize_name(Requirement(r).name): r for r in job.requested},
    }


# at most this many distributions a derived environment holds beyond its row's are listed
# (the record holds MAX_ITEMS pairs, the probe's versions among them); the rest are counted
MAX_BEYOND_ROW = 150


def versions_of(built: BuiltEnv) -> dict[str, str]:
    """The versions a record carries: those the health check imported, and, in a derived
    environment, every distribution it really holds beyond its row's (read from the
    environment, not from the request: a requirement's dependencies, whatever a name
    installed); where the backend cannot tell that, what was installed of each package
    its requirements name."""
    found = built.versions()
    seen = {canonicalize_name(k) for k in found}  # the probe names modules: pytorch_lightning
    if built.beyond_row is not None:
        beyond = [(k, v) for k, v in built.beyond_row.items() if k not in seen]
        found.update(beyond[:MAX_BEYOND_ROW])
        if len(beyond) > MAX_BEYOND_ROW:
            found["distributions-not-listed"] = str(len(beyond) - MAX_BEYOND_ROW)
        return found
    for requirement in built.env.requires:
        name = canonicalize_name(Requirement(requirement).name)
        if name in built.installed and name not in seen:
            found[name] = built.installed[name]
    return found


def _from_result(res: dict[str, Any], env_versions: dict[str, str]) -> dict[str, Any]:
    """The record fields a child's result file gives, as they are (validate_record judges
    them): its warnings go under checks["_warnings"], its versions over the probe's."""
    fields = {k: res[k] for k in ("outcome", "reason", "exception", "checks", "run_s") if k in res}
    checks = fields.get("checks")
    if checks is None:
        fields["checks"] = checks = {}
    if res.get("warnings") and isinstance(checks, dict):
        fields["checks"] = {**checks, "_warnings": res["warnings"]}
    found = res.get("versions")
    if found is None:
        fields["versions"] = dict(env_versions)
    elif isinstance(found, dict):
        fields["versions"] = {**env_versions, **found}
    else:
        fields["versions"] = found  # refused below, naming the field
    if fields.get("exception") is None:
        fields.pop("exception", None)
    return fields


def record_of(
    job: Job,
    child: ChildResult,
    timeout_s: float,
    provenance: dict[str, str],
    started_at: str,
    env_versions: dict[str, str],
    isolation: str = "process",
) -> Record:
    """The run's record, every field through validate_record. A result file that breaks a
    rule does not end the run: the job is ``crashed`` with the rule in its reason."""
    common: dict[str, Any] = {
        **_base(job),
        "duration_s": child.duration_s,
        "exit_code": child.exit_code,
        "signal": child.signal,
        "stdout_tail": child.stdout_tail,
        "stderr_tail": child.stderr_tail,
        "provenance": provenance,
        "started_at": started_at,
        "isolation": isolation,
    }
    res = child.result
    said = strays_text(child.strays) if child.strays else ""
    started_cuda = res.get("cuda_start_s") if res is not None else None
    if isinstance(started_cuda, (int, float)) and not isinstance(started_cuda, bool):
        # the CUDA context start this child measured: the next plan's estimate (budget.py)
        common["provenance"] = {**provenance, CUDA_START_KEY: f"{float(started_cuda):.3f}"}
    if res is not None:
        fields = _from_result(res, env_versions)
        checks = fields["checks"]
        warned = checks.get("_warnings", []) if isinstance(checks, dict) else None
        if said and isinstance(warned, list):  # the daemons ended after its process died
            fields["checks"] = {**checks, "_warnings": [*warned, said]}
        try:
            return validate_record({**common, **fields})
        except RecordRefused as exc:
            outcome = Outcome.CRASHED
            reason = f"the run's result file was refused: {exc}"
    else:
        outcome, reason = fallback(child, timeout_s)
    if said:
        reason = f"{reason}; {said}"
    return validate_record(
        {**common, "outcome": outcome.value, "reason": reason, "versions": dict(env_versions)}
    )


def run_job(
    job: Job,
    built: BuiltEnv,
    *,
    timeout_s: float,
    memory_limit_mb: int,
    provenance: dict[str, str],
    groups: ProcessGroups | None = None,
    worker: WarmWorker | None = None,
    skip: str | None = None,
    bound: Bound | None = None,
) -> Record:
    """Run one job: forked from ``worker`` (isolation "fork") unless the variant asks for
    a fresh interpreter or the worker refuses to fork, else in a fresh interpreter.
    ``skip``: why its cell cannot run here; the child imports the reproducer and checks
    the variant, then records ``skipped`` (in the worker even for a variant that asks for
    a fresh interpreter: nothing of it runs)."""
    started_at = now()
    payload = job_file(job, memory_limit_mb, skip, deadline=time.time() + timeout_s)
    child: ChildResult | None = None
    isolation = "process"
    fresh = job.variant.isolation == "process" and not skip
    if worker is not None and not fresh and worker.refusal is None:
        ran = worker.run(payload, timeout_s, job.id, bound)
        if isinstance(ran, Refused):
            started_at = now()
        else:
            child, isolation = ran, "fork"
    if child is None:
        child = run_isolated(
            [str(built.python), *(["-I"] if built.isolated else []), str(CHILD)],
            payload,
            timeout_s,
            groups=groups,
            bound=bound,
        )
    return record_of(job, child, timeout_s, provenance, started_at, versions_of(built), isolation)


def env_failed_record(
    job: Job, reason: str, provenance: dict[str, str], isolation: str = "process"
) -> Record:
    return validate_record(
        {
            **_base(job),
            "outcome": Outcome.ENV_FAILED.value,
            "reason": reason,
            "versions": {
                "python_requested": job.cell.env.python,
                "torch_requested": job.cell.env.torch,
                "lightning_requested": job.cell.env.lightning,
            },
            "provenance": provenance,
            "started_at": now(),
            "isolation": isolation,
        }
    )


def unservable_record(
    job: Job, reason: str, provenance: dict[str, str], isolation: str = "process"
) -> Record:
    """A variant whose requirements the package index cannot serve in its cell (no set of
    releases satisfies them with the cell's own, or a build of another index): the advice
    cannot be followed there, which is ``unsupported``, with the resolver's words."""
    env = job.env
    return validate_record(
        {
            **_base(job),
            "outcome": Outcome.UNSUPPORTED.value,
            "reason": (
                f"the variant's requirements {' '.join(env.requires)} are not met: {reason}"
                if env.interpreter
                else f"the variant's requirements {' '.join(env.requires)} cannot be "
                f"installed with {job.cell.env.id}'s own: {reason}"
            ),
            "versions": {
                "python_requested": job.cell.env.python,
                "torch_requested": job.cell.env.torch,
                "lightning_requested": job.cell.env.lightning,
            },
            "provenance": provenance,
            "started_at": now(),
            "isolation": isolation,
        }
    )


def decided_record(
    job: Job,
    outcome: Outcome,
    reason: str,
    built: BuiltEnv,
    provenance: dict[str, str],
    isolation: str = "process",
) -> Record:
    """A job decided before running (harness/envs/capabilities.py): skipped, unsupported, or
    env_failed (the environment lacks what the variant needs)."""
    return validate_record(
        {
            **_base(job),
            "outcome": outcome.value,
            "reason": reason,
            "versions": versions_of(built),
            "provenance": provenance,
            "started_at": now(),
            "isolation": isolation,
        }
    )
