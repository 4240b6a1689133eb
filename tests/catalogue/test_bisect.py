"""bisect: the search over versions (pure, with outcomes given), the release listing and its
cache (an index answer given), the environment each version is measured in (the real
matrix.yaml), and the command on a tiny entry in real environments (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_a_third_outcome_is_reported_and_the_first_change_bisected() -> None:
    truth = {v: "unsupported" for v in VERSIONS[:5]}
    truth.update({v: "other_error" for v in VERSIONS[5:10]})
    truth.update({v: "reproduced" for v in VERSIONS[10:]})
    result, _ = _search(truth)
    assert result.boundary == ("2.4.0", "2.5.0")
    assert any(n.startswith("non-monotonic: ") and "other_error" in n for n in result.notes)


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
