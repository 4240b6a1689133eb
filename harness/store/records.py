"""One frozen record per (entry, variant, cell, trial, machine): the unit the store keeps.

The on-disk form is one JSON object per line with a ``schema`` field. ``SCHEMA`` is the
version written now; older versions are migrated step by step on load (see store.py),
newer ones are refused.

A record's identity is its key (entry, variant, cell, trial) *and* the machine that ran it:
``machine`` (the name given with ``--machine``, else the host name; it names the record
file) and ``machine_id`` (see provenance.machine_id: host names repeat across a fleet, so
the name alone is not enough). Per machine the newest record of a key replaces the older
ones; records of two machines are both kept.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from harness.outcomes import Outcome

__all__ = ["SCHEMA", "ExceptionInfo", "MachineKey", "Record", "RecordKey"]

# 3: outcome "related" apart from "reproduced"; 4: machine, machine_id, imported_from;
# 5: ran_in, requires (a variant's version advice runs in an environment derived from its cell)
SCHEMA = 5


@dataclass(frozen=True)
class ExceptionInfo:
    type: str  # qualified name, e.g. "RuntimeError" or "lightning...MisconfigurationException"
    message: str
    frame: str  # "file:line in function" of the frame that raised it
    traceback: str = ""  # bounded text of the traceback

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> ExceptionInfo | None:
        if not d:
            return None
        return cls(
            type=str(d.get("type", "")),
            message=str(d.get("message", "")),
            frame=str(d.get("frame", "")),
            traceback=str(d.get("traceback", "")),
        )


@dataclass(frozen=True, order=True)
class RecordKey:
    entry: str  # "pytorch/grad-scale-unscale-error"
    variant: str  # "baseline-unused-submodule"
    cell: str  # "py3.10-torch1.12.1-lightning2.1.4-cpu-fp16"
    trial: int  # 0-based

    @property
    def id(self) -> str:
        return f"{self.entry}::{self.variant}@{self.cell}#{self.trial}"


@dataclass(frozen=True, order=True)
class MachineKey:
    """Which machine ran a record: its name and its id (ids tell apart equal names)."""

    name: str  # the --machine name, else the host name; "" for a record not yet stored
    id: str  # provenance.machine_id(); "" for records migrated from schema 2 (not known)

    def __str__(self) -> str:
        return f"{self.name} ({self.id or 'id unknown'})"


@dataclass(frozen=True)
class Record:
    entry: str
    variant: str
    kind: str  # variant kind: baseline | workaround | dead_end | control
    cell: str  # cell id
    env: str  # environment id, e.g. "py3.10-torch1.12.1-lightning2.1.4"
    device: str  # cpu | cuda
    precision: str  # fp32 | fp16 | bf16
    trial: int
    outcome: Outcome
    reason: str = ""  # why: unsupported/skipped/env_failed/crashed/timeout/wrong_result detail
    exception: ExceptionInfo | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # postcondition name -> {ok, detail}
    duration_s: float = 0.0
    exit_code: int | None = None
    signal: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    # the versions really installed in the environment (not the requested pins)
    versions: dict[str, str] = field(default_factory=dict)  # python, torch, lightning, numpy
    # the machine and harness that produced it
    provenance: dict[str, str] = field(default_factory=dict)
    started_at: str = ""  # ISO 8601 UTC
    # the machine that ran it (the store stamps it when it appends: see Store.append)
    machine: str = ""
    machine_id: str = ""
    # the record file that `merge` brought it in from ("" when this machine ran it)
    imported_from: str = ""
    # how the job was isolated: "fork" (forked from the environment's warm worker) or
    # "process" (a fresh interpreter); records written before the field read as "process".
    # Records decided without a child (skipped, env_failed) carry the run's mode.
    isolation: str = "process"
    # seconds spent inside the reproducer's run(), measured in the child; None without a result
    run_s: float | None = None
    # a variant with requirements (version advice, entry.yaml ``requires``) answers for
    # ``cell`` and ``env`` but ran in an environment derived from them: its id ("" where it
    # ran in the cell's own), and the requirements it added, by package ({"numpy": "numpy<2"});
    # ``versions`` are what that environment really had
    ran_in: str = ""
    requires: dict[str, str] = field(default_factory=dict)
    schema: int = SCHEMA

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.entry, self.variant, self.cell, self.trial)

    @property
    def machine_key(self) -> MachineKey:
        return MachineKey(self.machine, self.machine_id)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["outcome"] = self.outcome.value
        # schema first, so a human reading a line sees the version at once
        return {"schema": self.schema, **{k: v for k, v in d.items() if k != "schema"}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown record fields: {sorted(unknown)}")
        kwargs = dict(d)
        kwargs["outcome"] = Outcome(d["outcome"])
        kwargs["exception"] = ExceptionInfo.from_dict(d.get("exception"))
        return cls(**kwargs)
