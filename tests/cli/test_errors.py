"""The one error path: a HarnessError raised by any command is printed as
"error: FILE:LINE: PROBLEM" (rendered: no markup shown, none swallowed) and exits 2, with no
traceback. Through the real CLI, with a bad matrix.yaml and a bad entry.yaml."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from harness.catalogue.bisect import BisectError
from harness.catalogue.export import ExportError
from harness.catalogue.scaffold import DocumentError
from harness.ci.diff import DiffError
from harness.cli import print_error
from harness.errors import HarnessError, InputError
from harness.report.writeback import WritebackError
from harness.spec.declared import DeclaredError
from harness.spec.entries import EntryError
from harness.spec.matrix import MatrixError
from harness.spec.triage import TriageError
from harness.spec.yaml_nodes import YamlProblem
from tests.paths import RESOURCES

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project of one entry (tiny/faults) and a matrix of this interpreter."""
    root = (tmp_path / "proj").resolve()
    shutil.copytree(
        RESOURCES / "entries" / "tiny",
        root / "repros" / "tiny",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    matrix = (RESOURCES / "reliability" / "matrix.yaml").read_text().replace("PYTHON", PY)
    (root / "matrix.yaml").write_text(matrix)
    (root / "results" / "records").mkdir(parents=True)
    return root


def harness(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "--repo", str(root), *args],
        cwd=root if root.is_dir() else root.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_one_error(out: subprocess.CompletedProcess[str], expected: str) -> None:
    both = out.stdout + out.stderr
    assert out.returncode == 2, both
    assert "Traceback" not in both and "[bold" not in both and "[/]" not in both, both
    errors = [line for line in out.stdout.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {expected}"], both


BISECT = ("tiny/faults", "--variant", "ok", "--device", "cpu", "--precision", "fp32")
MATRIX_COMMANDS = [
    ("list",),
    ("run", "--list"),
    ("plan",),
    ("tox-ini", "--check"),
    ("envs", "build"),
    ("envs", "prune", "--dry-run"),
    ("bisect", *BISECT, "--torch", "1.0..2.0"),
]


@pytest.mark.parametrize("command", MATRIX_COMMANDS, ids=" ".join)
def test_a_bad_matrix_is_named_by_file_and_line_and_exits_2(
    project: Path, command: tuple[str, ...]
) -> None:
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace("precisions: [fp32]", "precisions: [fp64]"))
    out = harness(project, *command)
    assert_one_error(
        out, f"{matrix}:5: unknown precision 'fp64' in precisions; known: fp32, fp16, bf16"
    )


ENTRY_COMMANDS = [
    ("list",),
    ("run", "--list"),
    ("report",),
    ("diff", "results/records", "results/records"),
    ("export", "tiny/faults", "--variant", "ok"),  # printed "[bold red]error:[/]" before
    ("msgsearch",),
    ("bisect", *BISECT, "--torch", "1.0..2.0"),
]


@pytest.mark.parametrize("command", ENTRY_COMMANDS, ids=" ".join)
def test_a_bad_entry_is_named_by_file_and_line_and_exits_2(
    project: Path, command: tuple[str, ...]
) -> None:
    entry = project / "repros" / "tiny" / "faults" / "entry.yaml"
    entry.write_text(entry.read_text().replace("kind: control,", "kind: sanity,"))
    out = harness(project, *command)
    assert_one_error(
        out,
        f"{entry}:13: unknown variant kind 'sanity'; allowed: "
        "['baseline', 'workaround', 'dead_end', 'control']",
    )


def test_text_that_looks_like_markup_is_printed_as_written(project: Path) -> None:
    """`envs build --env 'x[ab]'` printed "--env x matches ..." (rich read [ab] as a style);
    `export` of an unknown variant printed the markup itself."""
    out = harness(project, "envs", "build", "--env", "py*[ab]")
    assert_one_error(out, "--env py*[ab] matches no environment of profile 'one'")
    out = harness(project, "export", "tiny/faults", "--variant", "[red]nope")
    assert_one_error(
        out,
        "tiny/faults has no variant '[red]nope'; its variants: "
        "documented, other, ok, wrong, unsupported, control",
    )


def test_options_and_paths_the_harness_checks_take_the_same_path(
    project: Path, tmp_path: Path
) -> None:
    assert_one_error(
        harness(project, "run", "--shard", "3/2"), "--shard K/N needs 1 <= K <= N, got '3/2'"
    )
    missing = tmp_path / "nowhere"
    assert_one_error(
        harness(missing, "list"),
        f"--repo {missing}: no such folder; name the project root (the folder with "
        "matrix.yaml, repros/ and results/)",
    )
    assert_one_error(
        harness(project, "merge", str(missing)), f"merge: {missing}: no such file or folder"
    )


def test_print_error_renders_the_prefix_and_never_reads_the_problem_as_markup() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, soft_wrap=True, width=20)
    status = print_error(console, MatrixError("m.yaml", 3, "[bold]x[/] is " + "long " * 20))
    assert status == 2
    assert buffer.getvalue() == "error: m.yaml:3: [bold]x[/] is " + "long " * 20 + "\n"


def test_a_harness_error_formats_as_file_line_problem() -> None:
    assert str(HarnessError("a/b.yaml", 7, "bad")) == "a/b.yaml:7: bad"
    assert str(HarnessError(Path("a/b.yaml"), None, "bad")) == "a/b.yaml: bad"
    assert str(HarnessError("a/b.yaml", 0, "bad")) == "a/b.yaml: bad"  # 0: no line known
    assert str(InputError("--x: bad")) == "--x: bad"
    error = EntryError(Path("e/entry.yaml"), 2, "bad kind")
    assert (error.path, error.line, error.problem, error.message) == (
        "e/entry.yaml",
        2,
        "bad kind",
        "bad kind",
    )
    assert str(DocumentError("doc.md", "no title", line=4)) == "doc.md:4: no title"
    assert str(YamlProblem(3, "not YAML")) == "not YAML"  # its reader adds the path
    assert YamlProblem(3, "not YAML").line == 3


@pytest.mark.parametrize(
    "kind",
    [
        MatrixError,
        EntryError,
        DeclaredError,
        TriageError,
        WritebackError,
        YamlProblem,
        DocumentError,
        DiffError,
        ExportError,
        BisectError,
    ],
)
def test_every_user_input_error_is_a_harness_error(kind: type[Exception]) -> None:
    assert issubclass(kind, HarnessError)


def test_an_env_filter_naming_an_environment_the_profile_lacks_says_so(project: Path) -> None:
    """`run --env A --env B` where B is not the profile's (an environment a bisect built)
    ran A's jobs and dropped B without a word ("9 of 12 jobs already stored")."""
    own = f"py{PY}-torch1.16.0-lightning0"
    bisected = f"py{PY}-torch1.16.0-lightning1.8.0.post1"
    for command in (("run", "--list"), ("run", "--resume", "--no-report")):
        out = harness(project, *command, "--env", own, "--env", bisected)
        assert_one_error(
            out,
            f"--env '{bisected}' matches no environment of profile 'one'; there are 1, e.g. {own}",
        )
