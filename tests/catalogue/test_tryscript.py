"""try: how a script's end is read (tracebacks of real interpreters, the exit status), the
masked comparison, the store and its reuse across lightning, the environments selected from
the real matrix.yaml, the bisect's neighbours, --save-as through the scaffolding, and the
command on real torch (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.catalogue.trybisect import neighbours
from harness.catalogue.tryscript import (
    SCRIPT_RUNNER,
    Row,
    Seen,
    TryError,
    TryStore,
    classify,
    env_key,
    mask,
    parse_traceback,
    select_environments,
)
from harness.execute.proc import ChildResult, run_isolated
from harness.spec.matrix import Environment, load_matrix
from tests.paths import REPO


def _stderr_of(code: str, tmp_path: Path) -> str:
    script = tmp_path / "s.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    return done.stderr


def test_the_last_traceback_gives_type_and_message(tmp_path: Path) -> None:
    err = _stderr_of(
        "try:\n    {}['k']\nexcept KeyError:\n    raise RuntimeError('size 3 != 4\\nhint: x')\n",
        tmp_path,
    )
    assert "During handling" in err
    assert parse_traceback(err) == ("RuntimeError", "size 3 != 4\nhint: x")
    err = _stderr_of("import pickle\nraise pickle.UnpicklingError('Weights only')\n", tmp_path)
    assert parse_traceback(err) == ("_pickle.UnpicklingError", "Weights only")
    assert parse_traceback(_stderr_of("raise KeyError\n", tmp_path)) == ("KeyError", "")
    assert parse_traceback("some warning\n") is None
    # the header cut off the tail: the last line naming an exception
    assert parse_traceback('  File "x.py", line 1\nValueError: bad') == ("ValueError", "bad")
    # colours a library put in its message (the tail turns ESC into U+FFFD)
    assert parse_traceback(
        "Traceback (most recent call last):\n  x\nE: \ufffd[1mdo\ufffd[0m it"
    ) == ("E", "do it")


def test_masked_messages_compare_variable_parts_alike() -> None:
    a = Seen("raised", "RuntimeError", "shape [3, 4] at 0x7f00ab on cuda:0 in /a/b/c.py")
    b = Seen("raised", "RuntimeError", "shape [5, 6] at 0x7e11cd on cpu in /x/y/z.py")
    c = Seen("raised", "ValueError", "shape [3, 4] at 0x7f00ab on cuda:0 in /a/b/c.py")
    assert a.key == b.key != c.key
    assert mask("'weight' is 3") == mask("'bias' is 4")
    assert Seen("ok").key == "ok" != Seen("wrong_exit").key
    assert (
        Seen("raised", "E", "x", expected=True).key == Seen("raised", "F", "y", expected=True).key
    )


def _child(code: str, tmp_path: Path, timeout: float = 20.0) -> ChildResult:
    script = tmp_path / "script.py"
    script.write_text(code)
    job = {"script": str(script), "device": "cpu", "memory_limit_mb": 0, "flags": []}
    return run_isolated([sys.executable, str(SCRIPT_RUNNER)], job, timeout)


def test_a_script_runs_as_python_script_and_its_end_is_classified(tmp_path: Path) -> None:
    # the script sees itself as __main__ with its own folder on sys.path, argv unchanged
    ok = _child(
        "import sys, os\nassert __name__ == '__main__'\nassert sys.argv == [__file__]\n"
        "assert sys.path[0] == os.path.dirname(__file__)\n",
        tmp_path,
    )
    assert classify(ok, 20).outcome == "ok", ok.stderr_tail
    raised = classify(_child("raise ValueError('bad value 3')\n", tmp_path), 20, "bad value")
    assert (raised.outcome, raised.type, raised.message, raised.expected) == (
        "raised",
        "ValueError",
        "bad value 3",
        True,
    )
    assert classify(_child("raise ValueError('x')\n", tmp_path), 20, "bad").expected is False
    wrong = classify(_child("import sys\nsys.exit(3)\n", tmp_path), 20)
    assert wrong.outcome == "wrong_exit" and "exit status 3" in wrong.detail
    slow = classify(_child("import time\ntime.sleep(30)\n", tmp_path, timeout=1), 1)
    assert slow.outcome == "timeout"
    killed = classify(_child("import os, signal\nos.kill(os.getpid(), 9)\n", tmp_path), 20)
    assert killed.outcome == "crashed" and "SIGKILL" in killed.detail


def test_an_unsafe_expect_is_refused() -> None:
    with pytest.raises(TryError, match="--expect"):
        classify(
            ChildResult(None, 1, None, False, 0.1, "", "Traceback (most recent call last):\nE: x"),
            1,
            "(a+)+$",
        )


def test_the_store_reuses_a_run_across_lightning_only_without_lightning(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    store = TryStore(tmp_path / "try", script, "ab" * 32)
    store.append(
        {
            "sha256": "ab" * 32,
            "python": "3.11",
            "torch": "2.4.1",
            "lightning": "2.5.6",
            "device": "cpu",
            "outcome": "ok",
        }
    )
    other = Environment("3.11", "2.4.1", "2.6.6")
    assert env_key(other, "cpu", False) in store.latest(False)
    assert env_key(other, "cpu", True) not in store.latest(True)
    assert store.path.parent == tmp_path / "try"


def test_environments_come_from_the_profile_or_the_rows_a_range_selects() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    smoke = select_environments(matrix, None, None, None, (), True)
    assert [e.torch for e in smoke] == ["1.12.1", "2.13.0"]
    ranged = select_environments(matrix, None, "2.0..2.2", None, (), False)
    assert [e.torch for e in ranged] == sorted({e.torch for e in ranged}, key=lambda v: v)
    assert {e.torch.rsplit(".", 1)[0] for e in ranged} == {"2.0", "2.1", "2.2"}
    with_lightning = select_environments(matrix, None, "2.0..2.2", None, (), True)
    assert len(with_lightning) > len(ranged)  # one per torch only without lightning
    with pytest.raises(TryError, match="selects no environment"):
        select_environments(matrix, None, None, None, ("nothing*",), False)


def test_neighbours_that_differ_are_the_bisects_pairs() -> None:
    def row(torch: str, lightning: str, outcome: str) -> Row:
        return Row(Environment("3.11", torch, lightning), Seen(outcome), "stored run")

    rows = [
        row("2.0.1", "2.0.9", "ok"),
        row("2.1.2", "2.1.4", "ok"),
        row("2.1.2", "2.6.6", "ok"),
        row("2.4.1", "2.6.6", "timeout"),
        row("2.5.1", "2.6.6", "env_failed"),
        row("2.6.0", "2.6.6", "ok"),
    ]
    pairs = neighbours(rows, "torch")
    # over the row that could not be built: 2.4.1 and 2.6.0 are neighbours
    assert [(a.env.torch, b.env.torch) for a, b in pairs] == [
        ("2.1.2", "2.4.1"),
        ("2.4.1", "2.6.0"),
    ]
    lines = neighbours([row("2.4.1", "2.0.9", "ok"), row("2.4.1", "2.1.4", "timeout")], "lightning")
    assert [(a.env.lightning, b.env.lightning) for a, b in lines] == [("2.0.9", "2.1.4")]


ENV_2_13 = "py3.11-torch2.13.0-lightning2.6.6"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/opt/wheels").is_dir(), reason="the local torch 2.13.0 wheel")
def test_try_on_real_torch_tables_stores_and_saves(tmp_path: Path) -> None:
    """The command on torch 2.13.0 (built from the local CPU wheel): the real torch.load
    refuses a pickled module; the run is stored apart, read back, and saved as an entry."""
    script = REPO / "docs" / "how-to" / "try" / "weights_only_load.py"
    repo = tmp_path / "proj"
    (repo / "repros").mkdir(parents=True)
    (repo / "matrix.yaml").write_text((REPO / "matrix.yaml").read_text())
    envs = Path(os.environ.get("HARNESS_TEST_ENVS", tmp_path / "envs"))
    argv = [
        sys.executable,
        "-m",
        "harness",
        "--repo",
        str(repo),
        "try",
        str(script),
        "--env",
        ENV_2_13,
        "--expect",
        "Weights only load failed",
        "--envs-dir",
        str(envs),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "raised (--expect)" in first.stdout and "UnpicklingError" in first.stdout
    (stored,) = (repo / "results" / "try").glob("weights_only_load-*.jsonl")
    rec = json.loads(stored.read_text().splitlines()[0])
    assert (rec["torch"], rec["outcome"], rec["type"]) == (
        "2.13.0",
        "raised",
        "_pickle.UnpicklingError",
    )
    assert not (repo / "results" / "records").exists()
    again = subprocess.run(
        [*argv, "--save-as", "pytorch/weights-only"], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "stored" in again.stdout and "0 run(s)" in again.stdout
    entry = (repo / "repros" / "pytorch" / "weights-only" / "entry.yaml").read_text()
    assert 'type: "UnpicklingError"' in entry
    assert (
        repo / "repros" / "pytorch" / "weights-only" / "script.py"
    ).read_text() == script.read_text()


def test_with_takes_requirements_other_than_the_axes() -> None:
    from harness.catalogue.tryscript import check_requires

    check_requires(["pydantic<2", "numpy>=1.24,<2"])
    with pytest.raises(TryError, match="not a requirement"):
        check_requires(["pydantic<<2"])
    for axis in ("torch<2", "lightning==2.0.0", "pytorch-lightning<2"):
        with pytest.raises(TryError, match="is an axis"):
            check_requires([axis])
    # a derived environment is its own key: its runs never stand for the row's
    row = Environment("3.10", "1.12.1", "2.0.9.post0")
    derived = row.with_requires(("pydantic<2",))
    assert env_key(derived, "cpu", True) != env_key(row, "cpu", True)
