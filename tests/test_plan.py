from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.plan import make_plan, parse_shard

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cpu():
    return load_matrix(REPO / "matrix.yaml").expand("cpu")


def test_jobs_follow_variant_devices_and_precisions(cpu, tiny_entry) -> None:
    plan = make_plan(cpu, [tiny_entry])
    per_cell = {}
    for job in plan.jobs:
        per_cell.setdefault(job.cell.id, []).append(job.variant.name)
    # 'unsupported' is declared for fp16 only: absent from fp32/bf16 cells, and listed why
    fp32 = next(c for c in per_cell if c.endswith("-cpu-fp32"))
    fp16 = next(c for c in per_cell if c.endswith("-cpu-fp16"))
    assert "unsupported" not in per_cell[fp32] and "unsupported" in per_cell[fp16]
    assert any(n.variant == "unsupported" and "fp16 only" in n.reason for n in plan.not_applicable)
    assert len(plan.jobs) == len(cpu.cells) * 5 + len(cpu.cells) // 3


def test_ids_are_stable_and_unique(cpu, tiny_entry) -> None:
    a = [j.id for j in make_plan(cpu, [tiny_entry]).jobs]
    b = [j.id for j in make_plan(cpu, [tiny_entry]).jobs]
    assert a == b and len(set(a)) == len(a)
    assert a[0].startswith("tiny/faults::") and "@py" in a[0] and a[0].endswith("#0")


def test_filters(cpu, tiny_entry) -> None:
    plan = make_plan(cpu, [tiny_entry], variant_filter=["ok"], env_filter=["*torch2.13*"])
    assert {j.variant.name for j in plan.jobs} == {"ok"}
    assert {j.cell.env.torch for j in plan.jobs} == {"2.13.0"}
    assert make_plan(cpu, [tiny_entry], entry_filter=["nope/*"]).jobs == ()


def test_shards_partition_the_jobs_by_environment(cpu, tiny_entry) -> None:
    full = {j.id for j in make_plan(cpu, [tiny_entry]).jobs}
    shards = [make_plan(cpu, [tiny_entry], shard=(k, 3)).jobs for k in (1, 2, 3)]
    ids = [{j.id for j in s} for s in shards]
    assert set.union(*ids) == full and sum(len(s) for s in ids) == len(full)
    envs = [{j.cell.env.id for j in s} for s in shards]
    assert not (envs[0] & envs[1]) and not (envs[1] & envs[2])


@pytest.mark.parametrize("text", ["0/2", "3/2", "x", "1/0", "1-2"])
def test_bad_shard_is_named(text: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(text)
