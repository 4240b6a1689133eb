"""harness/spec/backtracking.py: a signature regex that may backtrack catastrophically is
refused where it is loaded, so `check` names its entry.yaml line and no run, `explain` or
page ever matches it; every committed signature passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.spec.backtracking import backtracking_problem
from harness.spec.entries import EntryError, load_entries, load_entry
from tests.paths import REPO
from tests.spec.test_entries import GOOD, make

# each one takes time exponential in n on "a" * n + "!" (or the like) in Python or a browser
CATASTROPHIC = [
    r"(a+)+$",
    r"(a|a)*$",
    r"(a|ab)*c",
    r"(ab|ab)*c",
    r"(a*)*b",
    r"(a?a)+$",
    r"(\w+\s?)+$",
    r"(a|\w)*!",
    r"(x+x+)+y",
    r"^(\d+)*$",
    r"(?:a|b|)*c",
    r"(.*a){12}",
    r"boom: ((?:[a-z]+ ?)+)=",
]
# patterns the committed entries use, and look-alikes that are safe
SAFE = [
    r"boom",
    r"expected scalar type.*?but found",
    r"a.*b.*c",
    r"\d+\.\d+",
    r"(?:[A-Za-z_]\w*\.)*Error",
    r"(?:ab|cd)*",
    r"[\w.-]+ is not installed",
    r"(?i)flash ?attention.*(not|n't) (seem to be )?installed",
    r"(ab?)*c",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_an_ambiguous_repetition_is_named(pattern: str) -> None:
    re.compile(pattern)  # each is a valid regex: only the new check refuses it
    assert backtracking_problem(pattern) is not None


@pytest.mark.parametrize("pattern", SAFE)
def test_a_repetition_decided_by_the_next_character_passes(pattern: str) -> None:
    assert backtracking_problem(pattern) is None


def test_every_committed_signature_passes() -> None:
    entries = load_entries(REPO / "repros")  # the loader runs the check on each
    assert len(entries) > 50


@pytest.mark.parametrize(
    ("old", "new", "line", "what"),
    [
        ('message: "boom"', 'message: "boom: (a+)+$"', 2, "signature.message"),
        (
            '{name: baseline, kind: baseline, description: "raises"}',
            '{name: baseline, kind: baseline, description: "raises", '
            "signature: {type: RuntimeError, message: '(x|xy)*z'}}",
            4,
            "variant signature.message",
        ),
    ],
)
def test_the_loader_names_the_line_of_a_catastrophic_signature(
    tmp_path: Path, old: str, new: str, line: int, what: str
) -> None:
    d = make(tmp_path, GOOD.replace(old, new))
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert info.value.path == str(d / "entry.yaml") and info.value.line == line, str(info.value)
    assert f"{what} may backtrack catastrophically" in info.value.message


def test_check_names_the_entry_yaml_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make(tmp_path / "repros", GOOD.replace('message: "boom"', 'message: "(\\\\w+\\\\s?)+$"'))
    assert main(["--repo", str(tmp_path), "check"]) == 2
    out = capsys.readouterr()
    err = "".join(out.err.split()) + "".join(out.out.split())  # wrapped to the terminal
    assert f"{d / 'entry.yaml'}:2:" in err, err
    assert "maybacktrackcatastrophically" in err
