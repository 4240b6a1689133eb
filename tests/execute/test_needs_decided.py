"""A variant that needs torch.compile (entry.yaml ``needs``) in an environment whose torch
refuses this Python is recorded `unsupported` with torch's reason, without a run; the same
environment's other variants run (harness.execute.steps.run_matrix, in this process)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from harness.envs.backends import BuiltEnv, Prober
from harness.execute.steps import run_matrix
from harness.spec.entries import Entry
from harness.spec.matrix import Environment
from tests.execute.test_steps import GOOD, state_for


class Torch20:
    """This interpreter, probed as torch 2.0.1 on Python 3.11 (the reproducer needs none)."""

    def ensure(self, env: Environment, prober: Prober | None = None) -> BuiltEnv:
        probe = {"python": "3.11.7", "torch": "2.0.1+cpu", "torch_cuda": "None"}
        return BuiltEnv(env, Path(sys.prefix), Path(sys.executable), probe=probe, imports=())


def test_a_variant_that_needs_compile_is_decided_before_it_runs(
    tmp_path: Path, tiny_entry: Entry
) -> None:
    compiles = dataclasses.replace(tiny_entry.variant("ok"), needs=("torch.compile",))
    entry = dataclasses.replace(
        tiny_entry,
        variants=tuple(compiles if v.name == "ok" else v for v in tiny_entry.variants),
    )
    state, _ = state_for(tmp_path, entry, [GOOD], "process")
    state.backend = Torch20()
    run_matrix(state)
    records = [json.loads(x) for x in (tmp_path / "records" / "m.jsonl").read_text().splitlines()]
    by = {(r["variant"], r["device"]): r for r in records}
    assert by[("ok", "cpu")]["outcome"] == "unsupported"
    assert "Python 3.11+ not yet supported for torch.compile" in by[("ok", "cpu")]["reason"]
    assert by[("ok", "cpu")]["duration_s"] == 0
    assert by[("documented", "cpu")]["outcome"] == "reproduced"  # needs nothing: it ran
