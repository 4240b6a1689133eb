from __future__ import annotations

import ast
import dataclasses

import pytest
from packaging.version import Version

from harness.execute.plan import balance, make_plan, parse_shard
from harness.spec.declared import uses_lightning
from harness.spec.entries import Entry, load_entries
from harness.spec.matrix import load_matrix
from tests.paths import REPO


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
    # the tiny entry imports no lightning: it runs in one environment per torch release
    cells = [c for c in cpu.cells if c.env.id in plan.lightning_free_envs]
    assert len(plan.jobs) == (len(cells) * 5 + len(cells) // 3) * cpu.trials


def _with_lightning(entry: Entry) -> Entry:
    return dataclasses.replace(entry, uses_lightning=True)


def test_an_entry_without_lightning_runs_once_per_torch_release(cpu, tiny_entry) -> None:
    assert not tiny_entry.uses_lightning  # its repro.py imports no lightning
    free = make_plan(cpu, [tiny_entry])
    full = make_plan(cpu, [_with_lightning(tiny_entry)])
    pairs = {(e.python, e.torch) for e in cpu.environments}
    envs = {j.cell.env for j in free.jobs}
    assert len(envs) == len(pairs) == len({(e.python, e.torch) for e in envs})
    assert len({j.cell.env for j in full.jobs}) == len(cpu.environments) > len(envs)
    for env in envs:  # the newest lightning of its torch release
        same_torch = [e for e in cpu.environments if (e.python, e.torch) == (env.python, env.torch)]
        assert Version(env.lightning) == max(Version(e.lightning) for e in same_torch)
    assert {e.id for e in envs} == set(free.lightning_free_envs)
    assert free.lightning_free == (tiny_entry.id,) and full.lightning_free == ()
    # the lightning sweep (torch 2.4.1 x every lightning line) runs it once
    sweep = make_plan(load_matrix(REPO / "matrix.yaml").expand("lightning-sweep"), [tiny_entry])
    assert {j.cell.env.id for j in sweep.jobs} == {"py3.11-torch2.4.1-lightning2.6.6"}


def test_filters_choose_among_what_they_keep(cpu, tiny_entry) -> None:
    # --env names an older lightning's environment: that is the one it runs in
    old = "py3.10-torch1.12.1-lightning1.9.5"
    plan = make_plan(cpu, [tiny_entry], env_filter=[old])
    assert {j.cell.env.id for j in plan.jobs} == {old}
    plan = make_plan(cpu, [tiny_entry], cell_filter=[f"{old}-cpu-fp32"])
    assert {j.cell.id for j in plan.jobs} == {f"{old}-cpu-fp32"}
    # both kinds of entry in one plan: each gets its own environments
    both = make_plan(cpu, [tiny_entry, _with_lightning(dataclasses.replace(tiny_entry, id="x/y"))])
    per_entry: dict[str, set[str]] = {}
    for j in both.jobs:
        per_entry.setdefault(j.entry.id, set()).add(j.cell.env.id)
    assert len(per_entry["x/y"]) == len(cpu.environments)
    assert per_entry[tiny_entry.id] == set(both.lightning_free_envs)


@pytest.mark.parametrize(
    ("code", "uses"),
    [
        ("import torch\n", False),
        ("import lightning as L\n", True),
        ("import lightning.pytorch\n", True),
        ("from pytorch_lightning import Trainer\n", True),
        ("def run():\n    from lightning.fabric import Fabric\n", True),
        ("from reprokit import import_lightning\n", True),
        ("import reprokit\nL = reprokit.import_lightning('fabric')\n", True),
        ("import importlib\nm = importlib.import_module('lightning_fabric')\n", True),
        ("import torch\n# lightning is not needed here\nX = 'a lightning talk'\n", False),
        ("from . import lightning_helpers\n", False),
    ],
)
def test_uses_lightning_is_read_from_the_code(code: str, uses: bool) -> None:
    assert uses_lightning(ast.parse(code)) is uses


def test_the_seed_entries_are_read_right() -> None:
    entries = {e.id: e for e in load_entries(REPO / "repros")}
    assert entries["lightning/gradient-clipping-optimizer-handles-unscaling"].uses_lightning
    assert not entries["pytorch/grad-scale-unscale-error"].uses_lightning


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


def test_balance_keeps_environments_whole_and_evens_the_cost(cpu, tiny_entry) -> None:
    jobs = make_plan(cpu, [tiny_entry]).jobs
    envs = list(dict.fromkeys(j.cell.env.id for j in jobs))
    # one environment a hundred times as costly as the others: it gets a shard of its own
    heavy = envs[0]
    shards = balance(jobs, 3, lambda j: 100.0 if j.cell.env.id == heavy else 1.0)
    assert [s.index for s in shards] == [1, 2, 3]
    assert shards[0].envs == (heavy,)
    assert sorted(e for s in shards for e in s.envs) == sorted(envs)
    assert sum(len(s.jobs) for s in shards) == len(jobs)
    for s in shards:
        assert {j.cell.env.id for j in s.jobs} == set(s.envs)
    light = [s.cost for s in shards[1:]]
    assert max(light) - min(light) <= max(
        sum(1.0 for j in jobs if j.cell.env.id == e) for e in envs[1:]
    )
    # environment i mod N would have put the heavy one beside three others
    assert shards[0].cost == 100.0 * sum(1 for j in jobs if j.cell.env.id == heavy)


def test_more_shards_than_environments_leaves_some_empty(cpu, tiny_entry) -> None:
    jobs = make_plan(cpu, [tiny_entry], env_filter=["*torch2.13*"]).jobs
    shards = balance(jobs, 3)
    assert [len(s.envs) for s in shards] == [1, 0, 0]


def test_fan_out_costs_jobs_by_stored_durations(cpu, tiny_entry) -> None:
    from harness.ci.fanout import fan_out, github_matrix
    from harness.outcomes import Outcome
    from harness.store.records import Record

    jobs = make_plan(cpu, [tiny_entry]).jobs
    slow_env = jobs[-1].cell.env.id  # one environment's runs took 100 s each, the others 1 s
    records = [
        Record(
            entry=j.entry.id,
            variant=j.variant.name,
            kind=j.variant.kind,
            cell=j.cell.id,
            env=j.cell.env.id,
            device=j.cell.device,
            precision=j.cell.precision,
            trial=j.trial,
            outcome=Outcome.OK,
            duration_s=100.0 if j.cell.env.id == slow_env else 1.0,
        )
        for j in jobs
    ]
    timed = fan_out(jobs, 4, records, profile="cpu", prefix="ci-cpu")
    assert timed.timed and timed.shards[0].envs == (slow_env,)
    counted = fan_out(jobs, 4, [], profile="cpu", prefix="ci-cpu")  # no durations: job counts
    sizes = [len(s.jobs) for s in counted.shards]
    per_env = max(sum(1 for j in jobs if j.cell.env.id == e) for e in {j.cell.env.id for j in jobs})
    assert not counted.timed and max(sizes) - min(sizes) <= per_env
    matrix = github_matrix(timed)["include"]
    assert [m["machine"] for m in matrix] == ["ci-cpu-1", "ci-cpu-2", "ci-cpu-3", "ci-cpu-4"]
    assert matrix[0]["envs"] == slow_env and matrix[0]["profile"] == "cpu"
    assert sum(m["jobs"] for m in matrix) == len(jobs)


def test_a_variant_with_requirements_answers_for_its_cell_and_runs_in_a_derived_one(
    cpu, tiny_entry
) -> None:
    entry = dataclasses.replace(
        tiny_entry,
        requires=("onnx>=1.14",),
        variants=tuple(
            dataclasses.replace(v, requires=("numpy<2",)) if v.name == "ok" else v
            for v in tiny_entry.variants
        ),
    )
    plan = make_plan(cpu, [entry])
    plain = make_plan(cpu, [tiny_entry])
    # the same jobs, keys and cells: what they answer for does not change
    assert [j.key for j in plan.jobs] == [j.key for j in plain.jobs]
    for job in plan.jobs:
        wanted = ("onnx>=1.14", "numpy<2") if job.variant.name == "ok" else ("onnx>=1.14",)
        # the tiny entry imports no lightning: its derived environments install none
        assert job.env == job.cell.env.with_requires(wanted, lightning=False)
        assert job.env.base == job.cell.env and not job.env.installs_lightning
        # numpy<2 where the row pins it already is the row's own: only onnx is added there
        unmet = tuple(r for r in wanted if r not in job.cell.env.pins)
        assert job.env.requirements()[-len(unmet) :] == unmet
        assert job.requested == wanted
    # --env names the cell's environment, as without requirements
    old = next(j.cell.env.id for j in plan.jobs)
    assert {j.cell.env.id for j in make_plan(cpu, [entry], env_filter=[old]).jobs} == {old}


def test_advice_the_cell_satisfies_runs_in_the_cell_and_the_rest_share_environments(
    cpu, tiny_entry
) -> None:
    entry = dataclasses.replace(
        tiny_entry,
        variants=tuple(
            dataclasses.replace(v, requires=("torch<2",)) if v.name == "ok" else v
            for v in tiny_entry.variants
        ),
    )
    jobs = [j for j in make_plan(cpu, [entry]).jobs if j.variant.name == "ok"]
    old = [j for j in jobs if Version(j.cell.env.torch) < Version("2")]
    new = [j for j in jobs if j not in old]
    assert old and new
    # torch 1.x rows already satisfy torch<2: the job runs in the cell's own environment
    assert all(j.env is j.cell.env for j in old)
    # the others need another torch: one environment per python and row pins, not per row
    derived = {j.env for j in new}
    assert all(not e.torch and e.requires == ("torch<2",) for e in derived)
    assert len(derived) < len({j.cell.env for j in new})
    assert len({e.id for e in derived}) == len(derived)


def test_the_default_profile_builds_only_its_rows_and_says_what_it_leaves_out() -> None:
    """Issue 35: a newcomer's first run built 17 derived environments; the smoke profile
    (derived: false) now runs in its rows only and names the jobs that need their own."""
    matrix = load_matrix(REPO / "matrix.yaml")
    entries = load_entries(REPO / "repros")
    smoke = make_plan(matrix.expand("smoke"), entries)
    assert smoke.jobs and all(job.env == job.cell.env for job in smoke.jobs)
    assert smoke.left_out
    by_id = {e.id: e for e in entries}
    for left in smoke.left_out:
        entry = by_id[left.entry]
        variant = next(v for v in entry.variants if v.name == left.variant)
        assert entry.requirements_for(variant), left
        assert "needs an environment of its own" in left.reason
    # a profile that builds derived environments runs the same variants there
    cpu = make_plan(matrix.expand("cpu"), entries, env_filter=["py3.11-torch2.13.0-*"])
    assert any(job.env != job.cell.env for job in cpu.jobs)
    assert not cpu.left_out


@pytest.mark.parametrize("value", ["maybe", "[true]"])
def test_a_profiles_derived_is_true_or_false(tmp_path, value: str) -> None:
    from harness.spec.matrix import MatrixError

    text = (REPO / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("    derived: false", f"    derived: {value}", 1)
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MatrixError, match="derived must be true or false"):
        load_matrix(path)
