"""bisect: the search over versions (pure, with outcomes given), the release listing and its
cache (an index answer given), the environment each version is measured in (the real
matrix.yaml), and the command on a tiny entry in real environments (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from harness.catalogue.bisect import (
    BisectError,
    Step,
    bisect,
    environment_for,
    held_torch,
    list_releases,
    parse_range,
    records_dir_for,
    run_cap,
)
from harness.spec.matrix import Environment, load_matrix
from tests.paths import REPO

VERSIONS = [f"2.{i}.0" for i in range(16)]


def _env(version: str) -> Environment:
    return Environment("3.11", version, "2.6.6")


def _search(truth: dict[str, str], stored: dict[str, str] = (), built: set[str] = frozenset()):
    stored = dict(stored)
    ran: list[str] = []

    def measure(version: str, env: Environment) -> Step:
        ran.append(version)
        return Step(version, env, truth[version], "run")

    result = bisect("torch", VERSIONS, _env, stored, lambda env: env.torch in built, measure)
    return result, ran


def test_a_single_change_is_found_in_log_steps() -> None:
    truth = {v: "unsupported" if Version(v) < Version("2.9") else "reproduced" for v in VERSIONS}
    result, ran = _search(truth)
    assert result.boundary == ("2.8.0", "2.9.0") and result.monotonic
    assert len(ran) <= 2 + 4  # the two ends and log2(14) steps
    assert [s.version for s in result.steps] == ran


def test_stored_outcomes_and_built_environments_are_preferred() -> None:
    truth = {v: "unsupported" if Version(v) < Version("2.4") else "reproduced" for v in VERSIONS}
    stored = {
        "2.0.0": "unsupported",
        "2.3.0": "unsupported",
        "2.5.0": "reproduced",
        "2.15.0": "reproduced",
    }
    result, ran = _search(truth, stored, built={"2.4.0"})
    assert result.boundary == ("2.3.0", "2.4.0")
    assert ran == ["2.4.0"]  # everything else came from the store
    assert [s.how for s in result.steps].count("stored record") == 4


def test_a_non_monotonic_history_is_reported() -> None:
    truth = {v: "ok" for v in VERSIONS}
    truth.update({"2.15.0": "reproduced", "2.3.0": "reproduced"})  # on, off, on again
    stored = {"2.3.0": "reproduced", "2.10.0": "ok"}
    result, _ = _search(truth, stored)
    assert result.boundary is not None
    assert not result.monotonic
    assert any("2.3.0 gives reproduced" in n for n in result.notes), result.notes


def test_a_third_outcome_midway_stops_the_bisect_and_says_so() -> None:
    truth = {v: "unsupported" for v in VERSIONS[:5]}
    truth.update({v: "other_error" for v in VERSIONS[5:10]})
    truth.update({v: "reproduced" for v in VERSIONS[10:]})
    result, ran = _search(truth)
    assert result.boundary is None and ran == ["2.0.0", "2.15.0", "2.7.0"]
    assert result.stopped.startswith("2.7.0 gives other_error, neither unsupported (2.0.0)")


def test_a_bad_step_must_be_the_bad_ends_error_not_merely_an_error() -> None:
    # the same outcome and type, another grade: a different error, and the search stops
    bad = "reproduced (RuntimeError, verbatim)"
    truth = {v: "ok" if Version(v) < Version("2.4") else bad for v in VERSIONS}
    truth["2.7.0"] = "reproduced (RuntimeError, other-error)"
    result, _ = _search(truth)
    assert result.boundary is None
    assert "2.7.0 gives reproduced (RuntimeError, other-error)" in result.stopped


def test_stored_ends_are_re_run_where_built_and_an_end_that_does_not_hold_stops() -> None:
    truth = {v: "ok" if Version(v) < Version("2.4") else "reproduced" for v in VERSIONS}
    stored = {"2.0.0": "ok", "2.15.0": "reproduced"}
    result, ran = _search(truth, stored, built={"2.0.0", "2.15.0"})
    assert ran[:2] == ["2.0.0", "2.15.0"] and result.boundary == ("2.3.0", "2.4.0")
    assert result.runs <= 2 + 4
    # an end whose stored runs say one thing and a run now another: nothing is bisected
    result, ran = _search(truth, {"2.0.0": "reproduced"}, built={"2.0.0"})
    assert ran == ["2.0.0"] and result.boundary is None
    assert "the end 2.0.0 does not hold" in result.stopped
    # an end stored but not built here is not built to re-check it: said, not run
    result, ran = _search(truth, stored)
    assert "2.0.0" not in ran and "2.15.0" not in ran
    assert any("2.0.0: read from stored runs, not re-run" in n for n in result.notes)


def _capped(truth, max_builds, stored=(), built=frozenset()):
    ran: list[str] = []

    def measure(version: str, env: Environment) -> Step:
        ran.append(version)
        return Step(version, env, truth[version], "run")

    result = bisect(
        "torch",
        VERSIONS,
        _env,
        dict(stored),
        lambda env: env.torch in built,
        measure,
        max_builds=max_builds,
    )
    return result, ran


def test_max_builds_caps_the_builds_and_the_boundary_spans_what_is_unmeasured() -> None:
    truth = {v: "ok" if Version(v) < Version("2.9") else "reproduced" for v in VERSIONS}
    result, ran = _capped(truth, 3)
    assert result.builds == 3 and len(ran) == 3  # the two ends and one step
    assert result.boundary == ("2.7.0", "2.15.0")
    assert result.unmeasured == [f"2.{i}.0" for i in range(8, 15)]
    assert any("not built (--max-builds 3)" in n for n in result.notes)
    # built environments cost no build: the search goes on through them
    result, ran = _capped(truth, 2, built={"2.8.0", "2.9.0"})
    assert result.boundary == ("2.8.0", "2.9.0") and result.unmeasured == []
    assert result.builds == 2
    # an end that would need a build beyond the cap is refused before anything runs
    with pytest.raises(BisectError, match="--max-builds 1 allows no further build"):
        _capped(truth, 1)


def test_the_run_cap_stops_a_search_that_keeps_failing_to_build() -> None:
    truth = {v: "env_failed" for v in VERSIONS}
    truth.update({"2.0.0": "ok", "2.15.0": "reproduced"})
    result, ran = _search(truth)
    assert len(ran) == run_cap(len(VERSIONS)) == 6
    assert result.stopped.startswith("the run cap is reached (6 runs")
    assert result.boundary is not None and result.unmeasured


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 40),
    change=st.integers(1, 39),
    stored=st.sets(st.integers(0, 39), max_size=10),
    built=st.sets(st.integers(0, 39), max_size=10),
)
def test_one_change_is_found_within_the_run_cap(n, change, stored, built) -> None:
    change = min(change, n - 1)
    versions = [f"1.{i}.0" for i in range(n)]
    truth = {v: "ok" if i < change else "bad" for i, v in enumerate(versions)}
    ran: list[str] = []

    def measure(version: str, env: Environment) -> Step:
        ran.append(version)
        return Step(version, env, truth[version], "run")

    result = bisect(
        "torch",
        versions,
        lambda v: Environment("3.11", v, "2.6.6"),
        {versions[i]: truth[versions[i]] for i in stored if i < n},
        lambda env: versions.index(env.torch) in built,
        measure,
    )
    assert result.boundary == (versions[change - 1], versions[change])
    assert not result.stopped and result.monotonic
    assert len(ran) == result.runs <= run_cap(n)


def test_same_outcome_at_both_ends_says_so() -> None:
    result, ran = _search(dict.fromkeys(VERSIONS, "ok"))
    assert result.boundary is None and ran == ["2.0.0", "2.15.0"]
    assert "no change to bisect" in result.notes[0]


def test_an_unbuildable_version_is_skipped_not_counted() -> None:
    truth = {v: "unsupported" if Version(v) < Version("2.8") else "reproduced" for v in VERSIONS}
    truth["2.7.0"] = "env_failed"
    result, _ = _search(truth)
    assert result.boundary == ("2.6.0", "2.8.0")
    assert "2.7.0: environment could not be built, skipped" in result.notes


def test_an_end_that_cannot_be_built_stops_the_bisect_before_the_other_is_built() -> None:
    truth = {v: "reproduced" for v in VERSIONS}
    truth["2.0.0"] = "env_failed"
    with pytest.raises(BisectError) as info:
        _search(truth)
    assert "2.0.0: its environment could not be built" in str(info.value)
    ran: list[str] = []

    def measure(version: str, env: Environment) -> Step:
        ran.append(version)
        return Step(version, env, truth[version], "run")

    with pytest.raises(BisectError):
        bisect("torch", VERSIONS, _env, {}, lambda env: False, measure)
    assert ran == ["2.0.0"]  # the far end (2.15.0) was never built


def test_ranges_are_checked() -> None:
    assert parse_range("2.0..2.13") == (Version("2.0"), Version("2.13"))
    for bad in ("2.0", "2.13..2.0", "x..y"):
        with pytest.raises(BisectError):
            parse_range(bad)


def _index() -> dict:
    files = {
        "2.3.0": ["torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl"],
        "2.3.1": ["torch-2.3.1-cp312-cp312-manylinux1_x86_64.whl"],  # no cp311 wheel
        "2.4.0": ["torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl"],
        "2.4.1": ["torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"],
        "2.5.0rc1": ["torch-2.5.0rc1-cp311-cp311-manylinux1_x86_64.whl"],
        "2.9.0": ["torch-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"],
    }
    return {"releases": {v: [{"filename": f} for f in fs] for v, fs in files.items()}}


def test_releases_are_listed_filtered_and_cached(tmp_path: Path) -> None:
    calls: list[str] = []

    def fetch(url: str) -> dict:
        calls.append(url)
        return _index()

    found, source = list_releases(
        "torch", Version("2.3"), Version("2.5"), lambda v: "3.11", tmp_path, fetch, now=1000.0
    )
    assert found == ["2.3.0", "2.4.0", "2.4.1"] and calls == ["https://pypi.org/pypi/torch/json"]
    again, source = list_releases(
        "torch", Version("2.0"), Version("3.0"), lambda v: "3.11", tmp_path, fetch, now=2000.0
    )
    assert again == ["2.3.0", "2.4.0", "2.4.1", "2.9.0"] and len(calls) == 1 and "cached" in source
    # an end written short stands for its series: ..2.4 includes 2.4.1, 2.4..2.9 starts at 2.4.0
    short, _ = list_releases(
        "torch", Version("2.4"), Version("2.4"), lambda v: "3.11", tmp_path, fetch, now=2000.0
    )
    assert short == ["2.4.0", "2.4.1"]
    exact, _ = list_releases(
        "torch", Version("2.3.0"), Version("2.4.0"), lambda v: "3.11", tmp_path, fetch, now=2000.0
    )
    assert exact == ["2.3.0", "2.4.0"]
    list_releases(
        "torch", Version("2.0"), Version("3.0"), lambda v: "3.11", tmp_path, fetch, now=1e9
    )
    assert len(calls) == 2  # a day later the index is asked again
    assert json.loads((tmp_path / "pypi-torch.json").read_text())["fetched"] == 1e9


def test_each_version_gets_the_matrix_pairing() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    full = {e.id for e in matrix.expand("full").environments}
    for row in matrix.rows:  # a version the matrix lists is measured in its own environment
        if not row.interpreter:
            assert environment_for(matrix, "torch", row.torch).id in full
    # torch 2.4 spans three rows of the cross: the newest lightning of all of them
    assert environment_for(matrix, "torch", "2.4.0").id == "py3.11-torch2.4.0-lightning2.6.6"
    assert environment_for(matrix, "torch", "2.0.0").id == "py3.11-torch2.0.0-lightning2.3.3"
    held = environment_for(matrix, "torch", "2.4.0", with_lightning="2.6.6")
    assert held.lightning == "2.6.6"
    light = environment_for(matrix, "lightning", "2.5.0", with_torch="2.4.1")
    assert (light.torch, light.lightning, light.python) == ("2.4.1", "2.5.0", "3.11")


def test_each_release_gets_the_pins_of_the_row_it_belongs_to() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    app_pins = ("pydantic<2", "setuptools<70", "lightning-cloud==0.5.32")
    # lightning 1.8 belongs to the rows that list 1.8.6: their pins (setuptools with
    # pkg_resources, lightning.app's pydantic), never the newest torch row's
    old = environment_for(matrix, "lightning", "1.8.0.post1")
    assert old.torch == "2.4.1" and all(p in old.pins for p in app_pins), old
    assert environment_for(matrix, "lightning", "2.6.3").torch == "2.15.0"  # its own newest row
    # held at one torch, each lightning still takes the pins of its own row at that torch
    held = environment_for(matrix, "lightning", "1.9.2", with_torch="2.4.1")
    assert held.pins == old.pins
    new = environment_for(matrix, "lightning", "2.5.3", with_torch="2.4.1")
    assert new.pins == ("setuptools",) and new.torch == "2.4.1"
    # on the torch axis, a held lightning takes the pins of the row that lists its line
    pinned = environment_for(matrix, "torch", "2.4.0", with_lightning="1.9.5")
    assert all(p in pinned.pins for p in app_pins), pinned
    # the torch a lightning bisect holds: the newest the matrix crosses with every line
    lines = ["1.8.0", "1.9.5", "2.0.0", "2.3.3", "2.6.6"]
    assert held_torch(matrix, lines) == "2.4.1"
    assert held_torch(matrix, ["2.5.0", "2.6.6"]) == "2.8.0"
    assert held_torch(matrix, ["1.8.0", "1.9.5", "2.6.6", "9.0.0"]) is None  # no row has 9.0


def test_a_bisects_own_environments_keep_their_records_out_of_the_report(tmp_path: Path) -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    records = tmp_path / "results" / "records"
    named = matrix.expand("lightning-sweep").environments[0]
    assert records_dir_for(named, matrix, records) == records
    own = environment_for(matrix, "lightning", "1.8.0.post1")
    assert records_dir_for(own, matrix, records) == tmp_path / "results" / "bisect"


# -- envs build, in real environments (six standing in for torch, as in test_reliability) --


@pytest.mark.slow
def test_envs_build_builds_then_reuses_and_names_a_failure(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from harness.envs.backends import STANDIN_VAR

    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    matrix = (REPO / "tests" / "resources" / "reliability" / "matrix_env_failures.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(matrix.replace("PYTHON", py))
    (tmp_path / "repros").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), STANDIN_VAR: "six=={torch}"}
    env.pop("HARNESS_ENVS_DIR", None)

    def build() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness", "--repo", str(tmp_path), "envs", "build"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )

    first = build()
    assert first.returncode == 1, first.stdout + first.stderr  # some cannot be built
    assert "built  " in first.stdout and "failed " in first.stdout
    second = build()
    assert "reused " in second.stdout and "built  " not in second.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "nope", "--torch", "2.0..2.13"], "has no variant 'nope'"),
        (["--variant", "baseline-fabric-plugin", "--torch", "2.13..2.0"], "is above"),
        (["--variant", "baseline-fabric-plugin", "--torch", "2.0"], "a range is A..B"),
        (
            ["--variant", "baseline-fabric-plugin", "--precision", "bf16", "--torch", "2.0..2.1"],
            "runs on cpu, cuda at fp16 only",
        ),
    ],
)
def test_bisect_refuses_bad_requests_before_listing_anything(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.__main__ import main

    argv = [
        "--repo",
        str(REPO),
        "bisect",
        "lightning/gradient-clipping-optimizer-handles-unscaling",
    ]
    argv += ["--device", "cpu"] + (["--precision", "fp16"] if "--precision" not in args else [])
    assert main(argv + args) == 2
    assert message in capsys.readouterr().out


# -- the harness side's rules: what two steps must share, which stored runs count, the plan --


def _entry(folder: str):
    from harness.spec.entries import load_entry

    return load_entry(REPO / "repros" / folder, REPO / "repros")


def test_a_steps_outcome_carries_the_raised_type_and_its_grade() -> None:
    from harness.catalogue.bisect import outcome_key

    entry = _entry("pytorch/grad-scale-unscale-error")
    documented = "GradScaler unscale_() encountered None gradient for param 0"
    assert outcome_key(entry, "ok") == "ok"
    verbatim = outcome_key(entry, "reproduced", "RuntimeError", documented)
    assert verbatim == "reproduced (RuntimeError, verbatim)"
    # two other errors of one outcome class: the type tells them apart
    other = outcome_key(entry, "other_error", "RuntimeError", "something else")
    assert other == "other_error (RuntimeError, other-error)"
    assert outcome_key(entry, "other_error", "ValueError", "something else") != other


def _record(env: str, outcome: str, variant: str):
    """The fields of a stored record the search reads (a record's own class, trimmed)."""
    from types import SimpleNamespace

    from harness.outcomes import Outcome

    return SimpleNamespace(
        entry="pytorch/grad-scale-unscale-error",
        variant=variant,
        device="cpu",
        precision="fp32",
        env=env,
        outcome=Outcome(outcome),
        exception=None,
    )


def test_stored_runs_of_another_lightning_count_only_for_a_reproducer_without_it() -> None:
    from harness.catalogue.bisect import same_run, stored_outcomes

    entry = _entry("pytorch/grad-scale-unscale-error")  # imports no lightning
    variant = entry.variants[0]
    name = variant.name
    records = [
        _record("py3.11-torch2.4.1-lightning2.3.3", "ok", name),
        _record("py3.11-torch2.5.1-lightning2.6.6", "unsupported", name),
        _record("py3.10-torch2.4.1-lightning2.6.6", "crashed", name),  # another python
        _record("py3.11-torch2.4.1-lightning2.3.3", "crashed", "control"),
    ]
    wanted = {
        same_run(False)("py3.11-torch2.4.1-lightning2.6.6"): "2.4.1",
        same_run(False)("py3.11-torch2.5.1-lightning2.6.6"): "2.5.1",
    }
    assert stored_outcomes(records, entry, variant, "cpu", "fp32", wanted) == {
        "2.4.1": "ok",
        "2.5.1": "unsupported",
    }
    # with lightning imported, only the same environment counts
    exact = {same_run(True)("py3.11-torch2.4.1-lightning2.6.6"): "2.4.1"}
    lightning_entry = type(entry)(**{**entry.__dict__, "uses_lightning": True})
    assert stored_outcomes(records, lightning_entry, variant, "cpu", "fp32", exact) == {}
    assert same_run(True)("py3.11-torch2.4.1-lightning2.6.6-with-numpy-lt2") is None


def test_the_build_plan_names_each_environment_and_its_download(tmp_path: Path) -> None:
    from harness.catalogue.bisect import build_plan, may_build

    listing = tmp_path / "index"
    listing.mkdir()
    names = {
        "2.5.0": ["torch-2.5.0-cp311-cp311-manylinux1_x86_64.whl"],
        "2.6.0": ["torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl"],
    }
    sizes = {"torch-2.5.0-cp311-cp311-manylinux1_x86_64.whl": 906_000_000}
    sizes["torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl"] = 766_000_000
    (listing / "pypi-torch.json").write_text(
        json.dumps({"fetched": 0, "files": names, "sizes": sizes})
    )
    uv = tmp_path / "uv"
    (uv / "archive-v0" / "abc" / "lightning-2.6.6.dist-info").mkdir(parents=True)
    builds = [may_build(Environment("3.11", v, "2.6.6"), listing, uv) for v in ("2.5.0", "2.6.0")]
    assert builds[0].bytes == 906_000_000
    assert "lightning 2.6.6 in the uv cache" in builds[0].said
    lines = build_plan(builds, 6, 1)
    assert lines[0].startswith("environments it may build: 2, at most 1 of them (--max-builds 1)")
    assert "0.9 GB" in lines[-1]  # the largest one alone
    assert "1.7 GB" in build_plan(builds, 6, None)[-1]
    unlisted = may_build(Environment("3.11", "9.9.9", "2.6.6"), listing, uv)
    assert unlisted.bytes is None and "size not listed" in unlisted.said


def test_an_end_this_call_just_ran_is_not_run_again() -> None:
    truth = {v: "ok" if Version(v) < Version("2.4") else "reproduced" for v in VERSIONS}
    ran: list[str] = []

    def measure(version: str, env: Environment) -> Step:
        ran.append(version)
        return Step(version, env, truth[version], "run")

    stored = {"2.0.0": "ok", "2.15.0": "reproduced"}
    result = bisect("torch", VERSIONS, _env, stored, lambda env: True, measure, fresh=["2.15.0"])
    assert ran[0] == "2.0.0" and "2.15.0" not in ran
    assert result.boundary == ("2.3.0", "2.4.0")


def test_a_reproducer_without_lightning_runs_where_its_torch_is_already_built(
    tmp_path: Path,
) -> None:
    """The issue's bisect built torch 2.4.0 and 2.1.1 beside stored runs of the same torch in
    another lightning's environment: a lightning-free entry's step now goes to a built
    environment of its torch and python, whatever its lightning; an entry that imports
    lightning keeps the matrix's pairing."""
    from rich.console import Console

    from harness.catalogue.bisect import BisectRequest, _Bisection
    from harness.config import Config
    from harness.envs.backends import MARKER

    matrix = load_matrix(REPO / "matrix.yaml")
    envs = tmp_path / "envs"
    built = envs / "py3.11-torch2.4.1-lightning2.3.3"
    built.mkdir(parents=True)
    (built / MARKER).write_text("{}")
    cfg = Config(repo=REPO)
    cfg.envs_root = str(envs)

    def env_of(entry_id: str, version: str) -> str:
        entry = _entry(entry_id)
        variant = entry.variants[0]
        request = BisectRequest(entry_id, variant.name, "cpu", "fp32", "torch", "2.4..2.5")
        run = _Bisection(request, cfg, Console(file=None), matrix, entry, variant)
        return run.env_of(version).id

    free = "pytorch/grad-scale-unscale-error"  # imports no lightning
    assert env_of(free, "2.4.1") == "py3.11-torch2.4.1-lightning2.3.3"
    assert env_of(free, "2.5.1") == "py3.11-torch2.5.1-lightning2.6.6"  # nothing built: the pairing
    lightning = "lightning/gradient-clipping-optimizer-handles-unscaling"
    assert env_of(lightning, "2.4.1") == "py3.11-torch2.4.1-lightning2.6.6"
