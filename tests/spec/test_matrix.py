"""harness.spec.matrix: loading, validation and expansion; pure, no environments, no network."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from packaging.version import Version

from harness.domain import parse_env_id
from harness.spec.matrix import (
    AXES,
    Cell,
    Environment,
    Excluded,
    Matrix,
    MatrixError,
    Rule,
    describe,
    load_matrix,
)
from tests.paths import REPO, RESOURCES

__all__: list[str] = []

REAL = REPO / "matrix.yaml"
RESOURCES = RESOURCES / "matrix"


@pytest.fixture(scope="module")
def real() -> Matrix:
    return load_matrix(REAL)


@pytest.fixture(scope="module")
def small() -> Matrix:
    return load_matrix(RESOURCES / "valid.yaml")


# --- records -------------------------------------------------------------------------------


def test_environment_and_cell_ids() -> None:
    env = Environment("3.10", "1.12.1", "2.1.4", pins=("numpy<2", "setuptools<70"))
    assert env.id == "py3.10-torch1.12.1-lightning2.1.4"
    assert env.requirements() == ("torch==1.12.1", "lightning==2.1.4", "numpy<2", "setuptools<70")
    cell = Cell(env, "cpu", "bf16")
    assert cell.id == "py3.10-torch1.12.1-lightning2.1.4-cpu-bf16"
    assert [cell.value(axis) for axis in AXES] == ["3.10", "1.12.1", "2.1.4", "cpu", "bf16"]


def test_a_derived_environment_is_the_cells_with_the_variants_requirements() -> None:
    env = Environment("3.10", "1.12.1", "2.1.4", pins=("numpy<2", "setuptools<70"))
    numpy2 = env.with_requires(("numpy>=2", "onnx==1.16.*"))
    # the row's torch, lightning and pins, a pin of a package the variant names replaced
    assert numpy2.requirements() == (
        "torch==1.12.1",
        "lightning==2.1.4",
        "setuptools<70",
        "numpy>=2",
        "onnx==1.16.*",
    )
    assert numpy2.base == env and env.base == env and not env.requires
    # a readable id of its own (a folder, a lock): the cell's, and what it changed
    assert numpy2.id == "py3.10-torch1.12.1-lightning2.1.4-with-numpy-ge2-onnx-eq1.16.x"
    assert parse_env_id(numpy2.id) == parse_env_id(env.id)  # it names the cell's versions
    assert numpy2 != env and env.with_requires(()) == env
    # torch and lightning are the row's axes: a requirement on one replaces the row's pin
    assert env.with_requires(("torch>=2.6",)).requirements()[:2] == ("lightning==2.1.4", "numpy<2")
    for name in ("lightning<2.0", "Lightning<2.0"):
        reqs = env.with_requires((name,)).requirements()
        assert reqs == ("torch==1.12.1", "numpy<2", "setuptools<70", name)
    # for a reproducer that imports no lightning, the derived environment installs none (it
    # plays no part in what it measures, and would hold torch back: lightning 2.6 needs 2.1)
    free = env.with_requires(("torch<1.12",), lightning=False)
    assert free.requirements() == ("numpy<2", "setuptools<70", "torch<1.12")
    assert free.id == "py3.10-with-torch-lt1.12-and-numpy-lt2-and-setuptools-lt70-no-lightning"
    assert free.base == env
    assert env.with_requires((), lightning=False) == env
    # an id stays a file name and within the record's identifier limit however long the list
    many = env.with_requires(
        tuple(f"package-number-{i}>=1.0; python_version>'3'" for i in range(20))
    )
    assert len(Cell(many, "cuda", "bf16").id) <= 200 and "/" not in many.id and " " not in many.id
    assert many.id.startswith(env.id + "-with-")


def test_advice_the_row_already_satisfies_keeps_the_rows_release_as_pip_would() -> None:
    old = Environment("3.10", "1.12.1", "1.9.5", pins=("numpy<2", "setuptools<70"))
    # torch<2.1 on torch 1.12.1 is satisfied: no derived environment, 1.12.1 stays
    for advice in (("torch<2.1",), ("torch<2",), ("lightning<2.0",), ("numpy<2",)):
        assert old.with_requires(advice) is old
        assert old.with_requires(advice, lightning=False) is old
    assert old.satisfied_by("torch<2.1") == "torch 1.12.1"
    assert old.satisfied_by("lightning<2.0") == "lightning 1.9.5"
    assert old.satisfied_by("numpy<2") == "numpy<2"  # the row's own pin, word for word
    # pytorch-lightning is its own distribution: the row's lightning does not provide it
    assert old.satisfied_by("pytorch-lightning<2.0") == ""
    assert old.with_requires(("pytorch-lightning<2.0",)).requires == ("pytorch-lightning<2.0",)
    # a release the row does not have, a local build, a range the pin does not fix
    for unmet in ("torch>=2", "torch==1.12.1+cu113", "numpy<1.25", "lightning>=2"):
        assert old.satisfied_by(unmet) == ""
    # a package the row does not pin: only what its environment recorded as installed
    assert old.satisfied_by("onnx>=1.14") == ""
    assert old.satisfied_by("onnx>=1.14", installed={"onnx": "1.16.0"}) == "onnx 1.16.0"
    assert old.satisfied_by("onnx>=1.17", installed={"onnx": "1.16.0"}) == ""
    assert old.with_requires(("onnx>=1.14",), installed={"ONNX": "1.16.0"}) is old
    assert old.satisfied_by("numpy<1.25", installed={"numpy": "1.24.4"}) == "numpy 1.24.4"
    # extras and markers add what no pin says: never judged satisfied by the row
    assert old.satisfied_by("torch[opt-einsum]<2") == ""
    assert old.satisfied_by("torch<2; python_version>'3'") == ""


def test_a_pin_narrower_than_the_requirement_satisfies_it_as_pip_would() -> None:
    """A row pinning setuptools<70 meets setuptools<81 (whatever it installed is below 70):
    lightning 1.9's rows keep their own environment for a variant that asks for both, where
    before they derived one that replaced the pin with setuptools 80 and measured another
    release than the cell's."""
    app = ("numpy<2", "setuptools<70", "pydantic<2", "fastapi>=0.80,<0.89")
    old = Environment("3.10", "1.12.1", "1.9.5", pins=app)
    assert old.satisfied_by("setuptools<81") == "setuptools<70"
    assert old.satisfied_by("setuptools<=70") == "setuptools<70"
    assert old.satisfied_by("numpy<=2") == "numpy<2"
    assert old.satisfied_by("fastapi>=0.70,<0.90") == "fastapi>=0.80,<0.89"
    assert old.satisfied_by("fastapi<0.90") == "fastapi>=0.80,<0.89"
    asked = ("lightning<2.0", "pydantic<2", "fastapi>=0.80,<0.89", "setuptools<81")
    assert old.with_requires(asked) is old
    # wider, of the other side, or not a bound: not shown satisfied, the requirement applies
    for unmet in (
        "setuptools<60",
        "setuptools<70.0.0rc1",
        "setuptools>=60",
        "fastapi>=0.85",
        "numpy~=1.26",
        "numpy!=1.25",
        "numpy==1.*",
    ):
        assert old.satisfied_by(unmet) == "", unmet
    assert old.with_requires(("setuptools<60",)).requires == ("setuptools<60",)
    # an exact pin is judged by the requirement's specifier, as before
    exact = Environment("3.10", "1.12.1", "1.9.5", pins=("numpy==1.24.4",))
    assert exact.satisfied_by("numpy<1.25") == "numpy 1.24.4"


def test_only_the_package_the_row_does_not_satisfy_changes() -> None:
    old = Environment("3.10", "1.12.1", "2.1.4", pins=("numpy<2", "setuptools<70"))
    partly = old.with_requires(("torch<2.1", "numpy>=2"))
    # torch<2.1 is the row's 1.12.1: its pin stays; numpy>=2 replaces the row's numpy<2
    assert partly.requires == ("numpy>=2",)
    assert partly.requirements() == (
        "torch==1.12.1",
        "lightning==2.1.4",
        "setuptools<70",
        "numpy>=2",
    )
    assert partly.id == "py3.10-torch1.12.1-lightning2.1.4-with-numpy-ge2"
    assert partly.base == old


def test_pytorch_lightning_is_installed_beside_the_rows_lightning_as_pip_leaves_it() -> None:
    """``pip install lightning==2.6.6 "pytorch-lightning<2.0"`` leaves both: two
    distributions, ``lightning.pytorch`` from the first, ``pytorch_lightning`` from the second
    (lightning 2.6 even depends on pytorch-lightning, and resolves with 1.9.5). A derived
    environment once replaced the row's lightning with it, and code importing
    ``lightning.pytorch`` ran pytorch_lightning 1.9 where a user's would still fail."""
    row = Environment("3.11", "2.13.0", "2.6.6", pins=("setuptools",), find_links=("/w",))
    for name in ("pytorch-lightning<2.0", "pytorch_lightning<2.0", "PyTorch-Lightning<2.0"):
        derived = row.with_requires((name,))
        assert (derived.torch, derived.lightning) == ("2.13.0", "2.6.6")
        # pytorch_lightning 1.x imports pkg_resources: the row's setuptools is bounded
        assert derived.requirements() == (
            "torch==2.13.0",
            "lightning==2.6.6",
            "setuptools<81",
            name,
        )
        assert derived.base == row and derived.installs_lightning
    # its id is the cell's with what it added: the row's torch, lightning and pins stay
    derived = row.with_requires(("pytorch-lightning<2.0",))
    assert derived.id == "py3.11-torch2.13.0-lightning2.6.6-with-pytorch-lightning-lt2.0"
    # lightning itself is the row's distribution: a requirement on it replaces the row's
    pinned = row.with_requires(("lightning<2.0",))
    assert pinned.lightning == "" and pinned.requirements() == (
        "torch==2.13.0",
        "setuptools<81",
        "lightning<2.0",
    )
    # both named: the row's lightning replaced, pytorch-lightning beside the new one
    both = row.with_requires(("lightning<2.0", "pytorch-lightning<2.0"))
    assert both.requirements() == (
        "torch==2.13.0",
        "setuptools<81",
        "lightning<2.0",
        "pytorch-lightning<2.0",
    )


def test_rows_of_one_torch_with_other_pins_derive_environments_named_apart() -> None:
    """A requirement that replaces the row's lightning leaves the torch naming the row; two
    rows of that torch with other pins (1.9's app pins, 2.0's none) once derived one folder
    name for two environments, and building one removed the other under its running jobs
    (a re-measure recorded ModuleNotFoundError from inside pytorch_lightning)."""
    app = ("numpy<2", "setuptools<70", "pydantic<2")
    old = Environment("3.10", "1.12.1", "1.8.6", pins=app)
    new = Environment("3.10", "1.12.1", "2.0.9.post0", pins=("numpy<2", "setuptools<70"))
    a, b = (row.with_requires(("lightning>=1.9,<2.0",)) for row in (old, new))
    assert a.requirements() != b.requirements() and a != b
    assert a.id != b.id
    assert a.id == (
        "py3.10-torch1.12.1-with-lightning-lt2.0-ge1.9-and-numpy-lt2-and-setuptools-lt70"
        "-and-pydantic-lt2"
    )
    # where torch and lightning both stay, they name the row and its pins with it
    kept = old.with_requires(("onnx>=1.14",))
    assert kept.id == "py3.10-torch1.12.1-lightning1.8.6-with-onnx-ge1.14"


def test_cells_whose_requests_resolve_alike_share_one_derived_environment() -> None:
    rows = [Environment("3.11", t, "2.6.6", pins=("setuptools",)) for t in ("2.10.0", "2.11.0")]
    a, b = (row.with_requires(("torch<2",), lightning=False) for row in rows)
    # the same requirements, so the same environment: one folder, one build
    assert a == b and hash(a) == hash(b) and a.id == b.id
    assert a.requirements() == ("setuptools", "torch<2")
    assert a.id == "py3.11-with-torch-lt2-and-setuptools-no-lightning"
    assert (a.base, b.base) == tuple(rows)  # each still knows the cell it answers for
    assert len({a, b}) == 1
    # another row's pins, wheel folders or python: another environment, another id
    pinned = Environment("3.11", "2.0.1", "2.3.3", pins=("numpy<2", "setuptools<70"))
    linked = Environment("3.11", "2.13.0", "2.6.6", pins=("setuptools",), find_links=("/w",))
    older = Environment("3.10", "2.10.0", "2.6.6", pins=("setuptools",))
    others = [e.with_requires(("torch<2",), lightning=False) for e in (pinned, linked, older)]
    assert len({a.id, *(o.id for o in others)}) == 4
    # a requirement that keeps the row's torch keeps the row's name: one per row, as before
    numpy2 = [row.with_requires(("numpy>=2",)) for row in rows]
    assert numpy2[0] != numpy2[1] and numpy2[0].id.startswith(rows[0].id + "-with-")


def test_records_sort_by_version_not_by_text() -> None:
    envs = [
        Environment("3.9", "1.10.2", "1.9.5"),
        Environment("3.10", "1.9.0", "1.9.5"),
        Environment("3.11", "2.13.0", "2.6.6"),
        Environment("3.11", "2.6.0", "2.6.6"),
    ]
    assert [env.torch for env in sorted(envs)] == ["1.9.0", "1.10.2", "2.6.0", "2.13.0"]
    env = envs[0]
    cells = [Cell(env, d, p) for d in ("cuda", "cpu") for p in ("bf16", "fp32", "fp16")]
    assert [f"{c.device}-{c.precision}" for c in sorted(cells)] == [
        "cpu-fp32",
        "cpu-fp16",
        "cpu-bf16",
        "cuda-fp32",
        "cuda-fp16",
        "cuda-bf16",
    ]


def test_rule_patterns_are_versions_specifiers_or_names() -> None:
    env = Environment("3.10", "1.10.2", "2.0.9.post0")
    cell = Cell(env, "cuda", "fp16")

    def rule(**conditions: tuple[str, ...]) -> Rule:
        return Rule(tuple(conditions.items()), "why")

    assert rule(torch=("1.10.2",)).matches(cell)
    assert rule(torch=("==1.10.*",), python=(">=3.10",)).matches(cell)
    assert rule(lightning=(">=2.0",)).matches(cell)  # a post release is not a pre-release
    assert rule(device=("cpu", "cuda")).matches(cell)  # any of a list
    assert not rule(torch=("1.10",)).matches(cell)  # an exact version, not a prefix
    assert not rule(torch=("<1.11",), device=("cpu",)).matches(cell)  # every axis must match


# --- the real matrix.yaml ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "cells", "environments", "excluded", "trials"),
    [
        ("smoke", 6, 2, 0, 1),
        ("cpu", 177, 59, 12, 3),
        ("lightning-sweep", 27, 9, 0, 3),
        ("torch-sweep", 45, 15, 0, 3),
        ("gpu-nightly", 177, 59, 12, 3),
        ("full", 354, 59, 24, 1),
    ],
)
def test_real_profiles_expand(
    real: Matrix, profile: str, cells: int, environments: int, excluded: int, trials: int
) -> None:
    expansion = real.expand(profile)
    assert expansion.profile == profile
    assert len(expansion.cells) == cells
    assert len(expansion.environments) == environments
    assert len(expansion.excluded) == excluded
    assert expansion.trials == trials


def test_real_smoke_is_the_default_and_its_ids(real: Matrix) -> None:
    assert real.default_profile == "smoke"
    expansion = real.expand()
    assert expansion == real.expand("smoke")
    assert [cell.id for cell in expansion.cells] == [
        "py3.10-torch1.12.1-lightning2.1.4-cpu-fp32",
        "py3.10-torch1.12.1-lightning2.1.4-cpu-fp16",
        "py3.10-torch1.12.1-lightning2.1.4-cpu-bf16",
        "py3.11-torch2.13.0-lightning2.6.6-cpu-fp32",
        "py3.11-torch2.13.0-lightning2.6.6-cpu-fp16",
        "py3.11-torch2.13.0-lightning2.6.6-cpu-bf16",
    ]
    newest = expansion.environments[-1]
    assert newest.find_links == ("/opt/wheels",)
    assert newest.requirements() == ("torch==2.13.0", "lightning==2.6.6", "setuptools")
    assert expansion.environments[0].pins == ("numpy<2", "setuptools<70")


def test_real_settings(real: Matrix) -> None:
    assert (real.trials, real.timeout_s, real.memory_limit_mb) == (1, 300.0, 8192)
    assert real.devices == ("cpu", "cuda")
    assert real.precisions == ("fp32", "fp16", "bf16")
    assert all(profile.description for profile in real.profiles.values())
    assert all(row.why for row in real.rows)


def test_real_full_crosses_torch_with_every_lightning_line_that_fits(real: Matrix) -> None:
    envs = real.expand("full").environments
    torches = sorted({env.torch for env in envs}, key=Version)
    assert torches == sorted({row.torch for row in real.rows}, key=Version)
    assert torches[0] == "1.10.2" and torches[-1] == "2.15.0"
    # no hole between 1.10 and the newest: every minor line 1.10..1.13 and 2.0..2.15
    minors = [tuple(Version(t).release[:2]) for t in torches]
    assert minors == [(1, m) for m in range(10, 14)] + [(2, m) for m in range(16)]
    by_torch: dict[str, list[str]] = {}
    for env in envs:
        by_torch.setdefault(env.torch, []).append(env.lightning)
    # the lightning sweep: every line at torch 2.4.1
    assert sorted(by_torch["2.4.1"], key=Version) == [
        "1.8.6",
        "1.9.5",
        "2.0.9.post0",
        "2.1.4",
        "2.2.5",
        "2.3.3",
        "2.4.0",
        "2.5.6",
        "2.6.6",
    ]
    # within the table: lightning 2.1 (torch 1.12..2.1) at 1.12.1, 1.13.1, 2.0.1, 2.1.2
    assert sorted(t for t, ls in by_torch.items() if "2.1.4" in ls) == sorted(
        ["1.12.1", "1.13.1", "2.0.1", "2.1.2", "2.4.1"], key=Version
    )
    assert envs[0] == Environment(
        "3.9",
        "1.10.2",
        "1.8.6",
        pins=(
            "numpy<2",
            "setuptools<70",
            "pydantic<2",
            "fastapi>=0.80,<0.89",
            "lightning-cloud==0.5.32",
        ),
    )


def test_real_exclusions_keep_reason_and_line(real: Matrix) -> None:
    lines = REAL.read_text(encoding="utf-8").splitlines()
    excluded = real.expand("full").excluded
    by_id = {ex.cell.id: ex for ex in excluded}
    wheels = by_id["py3.10-torch1.10.2-lightning1.9.5-cpu-fp32"]
    assert "Python <= 3.9" in wheels.reason
    lightning2 = by_id["py3.9-torch1.10.2-lightning2.0.9.post0-cuda-bf16"]
    assert lightning2.reason == "lightning 2.0 requires torch >= 1.11"
    for ex in excluded:
        name, _, line = ex.where.partition(":")
        assert name == "matrix.yaml"
        assert lines[int(line) - 1].lstrip().startswith("- ")  # the rule's first line
        assert ex.cell not in real.expand("full").cells
    # every rule of the real file excludes something, each line named in --list
    assert {ex.where for ex in excluded} == {real.where(rule) for rule in real.rules}


def test_expansion_is_deterministic_and_sorted(real: Matrix) -> None:
    again = load_matrix(REAL)
    for name in real.profiles:
        expansion = real.expand(name)
        assert expansion == again.expand(name)
        assert list(expansion.cells) == sorted(expansion.cells)
        shuffled = list(expansion.cells)
        random.Random(0).shuffle(shuffled)
        assert tuple(sorted(shuffled)) == expansion.cells
        assert [ex.cell for ex in expansion.excluded] == sorted(
            ex.cell for ex in expansion.excluded
        )
        assert len({cell.id for cell in expansion.cells}) == len(expansion.cells)


def test_describe_lists_environments_cells_and_exclusions(real: Matrix) -> None:
    lines = describe(real.expand("full"))
    assert lines[0].startswith("profile full: 354 cells in 59 environments")
    assert "py3.11-torch2.13.0-lightning2.6.6" in lines
    assert "  find-links: /opt/wheels" in lines
    assert lines.count("  cells: cpu-fp32 cpu-fp16 cpu-bf16 cuda-fp32 cuda-fp16 cuda-bf16") == 59
    assert "excluded:" in lines
    excluded = lines[lines.index("excluded:") + 1 :]
    assert len(excluded) == 24
    assert all(line.startswith("  py") and "(matrix.yaml:" in line for line in excluded)
    assert all(isinstance(line, str) for line in lines)


# --- expansion on a small matrix -----------------------------------------------------------


def test_small_matrix_expands_product_then_rules_then_profile(small: Matrix) -> None:
    assert (small.trials, small.timeout_s, small.memory_limit_mb) == (2, 60.0, 1024)
    assert len(small.candidates()) == 4 * 2 * 2
    full = small.expand("all")
    assert len(full.cells) == 10
    assert {ex.where for ex in full.excluded} == {"valid.yaml:16", "valid.yaml:19"}
    assert sorted(ex.cell.id for ex in full.excluded if ex.where == "valid.yaml:19") == [
        "py3.11-torch2.6.0-lightning2.5.6-cuda-bf16",
        "py3.11-torch2.6.0-lightning2.5.6-cuda-fp32",
    ]
    cpu = small.expand("small")
    assert all(cell.device == "cpu" for cell in cpu.cells)
    assert [cell.id for cell in cpu.cells] == [
        "py3.9-torch1.10.2-lightning1.9.5-cpu-fp32",
        "py3.9-torch1.10.2-lightning1.9.5-cpu-bf16",
        "py3.11-torch2.6.0-lightning2.5.6-cpu-fp32",
        "py3.11-torch2.6.0-lightning2.5.6-cpu-bf16",
        "py3.11-torch2.6.0-lightning2.6.6-cpu-fp32",
        "py3.11-torch2.6.0-lightning2.6.6-cpu-bf16",
    ]
    # a profile's excluded list holds only the cells it selects
    assert cpu.excluded == tuple(ex for ex in full.excluded if ex.cell.device == "cpu")
    assert all(isinstance(ex, Excluded) for ex in cpu.excluded)
    gpu = small.expand("gpu")
    assert gpu.trials == 5  # a profile's trials override the default
    assert len(gpu.cells) == 4
    assert small.profiles["gpu"].selections == {"device": ("cuda",)}  # a scalar is a list of one


def test_expand_unknown_profile(small: Matrix) -> None:
    with pytest.raises(MatrixError, match="unknown profile 'nightly'; profiles: all, gpu, small"):
        small.expand("nightly")


# --- bad input: one scenario file each, the line asserted -----------------------------------


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("bad_yaml", 6, "not valid YAML: while parsing a flow sequence (started on line 5)"),
        ("unknown_key_row", 12, "unknown key 'pyhton' in an environments row; allowed keys: "),
        ("unknown_key_defaults", 5, "allowed keys: trials, timeout_s, memory_limit_mb"),
        ("bad_specifier", 16, "torch '<1.x' is neither a version nor a PEP 440 specifier"),
        ("empty_axis", 5, "precisions is empty; list at least one value"),
        ("empty_axis_row", 9, "lightning is empty; list at least one value"),
        ("profile_unknown_value", 24, "selects torch '9.9', which is not on the torch axis"),
        ("profile_unknown_axis", 24, "unknown key 'cuda' in profile 'small'; allowed keys: "),
        ("exclude_matches_nothing", 20, "exclude matches nothing: remove it or fix it"),
        ("exclude_no_reason", 19, "exclude rule has no reason"),
        ("exclude_redundant", 20, "excludes nothing that the rule(s) on line(s) 19 do not"),
        ("duplicate_environment", 15, "the row at line 11 already makes it"),
        ("default_profile_missing", 29, "default_profile 'smoke' is not a profile"),
        ("unknown_device", 6, "unknown device 'tpu' in devices; known: cpu, cuda"),
        ("unknown_device_in_rule", 19, "unknown device 'mps'; devices in this matrix: cpu, cuda"),
        ("unknown_precision", 7, "unknown precision 'fp8' in precisions; known: fp32, fp16, bf16"),
        ("contradictory", 22, "selects no cell: the exclude rule(s) on line(s) 16, 20 exclude"),
        ("profile_selects_nothing", 21, "no cell has torch 1.10.2 and lightning 2.6.6"),
        ("unquoted_python", 8, 'quote it ("3.10"): unquoted, YAML reads it as a number'),
        ("newer_version", 2, "matrix format version 2 is not understood"),
    ],
)
def test_bad_input_names_file_line_and_fix(name: str, line: int, message: str) -> None:
    path = RESOURCES / f"{name}.yaml"
    marked = [
        number
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "# <- error" in text
    ]
    assert marked == [line], "the scenario file marks the line the error must name"
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    error = caught.value
    assert (error.path, error.line) == (str(path), line)
    assert str(error) == f"{path}:{line}: {error.message}"
    assert message in error.message


def test_duplicate_key(tmp_path: Path) -> None:
    text = (RESOURCES / "valid.yaml").read_text(encoding="utf-8")
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace("devices: [cpu, cuda]\n", "devices: [cpu]\ndevices: [cuda]\n"))
    with pytest.raises(MatrixError, match=r"matrix.yaml:5: key 'devices' appears twice"):
        load_matrix(path)


def test_pins_are_requirements_and_never_torch(tmp_path: Path) -> None:
    text = (RESOURCES / "valid.yaml").read_text(encoding="utf-8")
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace('["numpy<2"]', '["numpy<2", "torch>=1"]'))
    with pytest.raises(MatrixError, match=r":10: pin 'torch>=1' pins torch; set it with the"):
        load_matrix(path)
    path.write_text(text.replace('["numpy<2"]', '["numpy<<2"]'))
    with pytest.raises(MatrixError, match=r":10: pin 'numpy<<2' is not a requirement string"):
        load_matrix(path)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match="cannot read the matrix file") as caught:
        load_matrix(tmp_path / "absent.yaml")
    assert caught.value.line is None
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    with pytest.raises(MatrixError, match="the matrix file is empty"):
        load_matrix(empty)


def test_yaml_tags_construct_nothing(tmp_path: Path) -> None:
    text = (RESOURCES / "valid.yaml").read_text(encoding="utf-8")
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace('"pretend"', "!!python/object/apply:os.getcwd []"))
    with pytest.raises(MatrixError, match=r":19: YAML tag .*python/object/apply.* is not allowed"):
        load_matrix(path)


def test_an_interpreter_without_torch_expands_against_the_real_rules() -> None:
    """Issue 36, item 6: `run --python` / `plan --python` at an interpreter without torch
    died on an exclude rule (InvalidVersion: 'none'); a missing package matches no version
    pattern, and the cells are planned (their records are env_failed, with the reason)."""
    from harness.envs.backends import MISSING
    from harness.spec.matrix import Environment, load_matrix
    from tests.paths import REPO

    matrix = load_matrix(REPO / "matrix.yaml")
    env = Environment(python="3.11", torch=MISSING, lightning=MISSING)
    expansion = matrix.expand_for(env, "cpu")
    assert expansion.cells and all(c.env == env for c in expansion.cells)


def test_a_derived_environment_pins_what_an_old_lightning_needs_to_import() -> None:
    from harness.spec.matrix import import_needs

    newest = Environment("3.11", "2.13.0", "2.6.6", pins=("setuptools",))
    old = newest.with_requires(("pytorch-lightning<2.0",))
    # pytorch_lightning 1.9.5 imports pkg_resources: the unbounded pin is bounded
    assert old.requirements() == (
        "torch==2.13.0",
        "lightning==2.6.6",
        "setuptools<81",
        "pytorch-lightning<2.0",
    )
    assert old.id == "py3.11-torch2.13.0-lightning2.6.6-with-pytorch-lightning-lt2.0"
    # a requirement that admits no 1.x changes nothing; a pin already below stays
    assert newest.with_requires(("pytorch-lightning>=2.1",)).pins == ("setuptools",)
    assert import_needs(("lightning<2.0",), ("numpy<2", "setuptools<70")) == (
        "numpy<2",
        "setuptools<70",
    )
    assert import_needs(("lightning==1.9.*",), ()) == ("setuptools<81",)
    # the variant's own setuptools requirement wins
    assert import_needs(("lightning<2.0", "setuptools<75"), ("setuptools",)) == ("setuptools",)
