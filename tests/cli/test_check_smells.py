"""`harness check --smells` through the real CLI: the stored records' smells, exit 1 while
one is unexplained, 0 once entry.yaml says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.spec.test_entries import GOOD, make

BLOCKS = "".join(
    f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
    for b in ("measured-versions", "measured-rates", "verification")
)


def record(variant: str, kind: str, outcome: str, trial: int, detail: str) -> dict[str, object]:
    exc = {"type": "RuntimeError", "message": "boom", "frame": "repro.py:1 in run"}
    return {
        "schema": 4,
        "entry": "demo/err",
        "variant": variant,
        "kind": kind,
        "cell": "py3.11-torch2.5.1-lightning2.4.0-cpu-fp32",
        "env": "py3.11-torch2.5.1-lightning2.4.0",
        "device": "cpu",
        "precision": "fp32",
        "trial": trial,
        "outcome": outcome,
        "exception": exc if outcome == "reproduced" else None,
        "checks": {} if outcome == "reproduced" else {"trained": {"ok": True, "detail": detail}},
        "started_at": f"2024-05-01T10:00:0{trial}Z",
        "machine": "box",
        "machine_id": "abc",
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    d = make(tmp_path / "repros", GOOD, entry_id="demo/err")
    (d / "document.md").write_text(BLOCKS)
    records = tmp_path / "results" / "records"
    records.mkdir(parents=True)
    lines = [record("baseline", "baseline", "reproduced", t, "") for t in (0, 1)]
    lines += [record("control", "control", "ok", t, "w") for t in (0, 1)]
    (records / "box.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path


def test_an_unexplained_smell_fails_and_an_explained_one_passes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(repo), "check", "demo/*"]) == 0  # without --smells: not read
    assert main(["--repo", str(repo), "check", "--smells"]) == 1
    out = capsys.readouterr().out
    assert "smells demo/err: 1 smell, 1 unexplained" in out
    assert "smell: postcondition trained: never-fails: holds in all 2 runs" in out
    yaml = repo / "repros" / "demo" / "err" / "entry.yaml"
    yaml.write_text(
        yaml.read_text() + 'smells:\n  never-fails:\n    trained: "fails in tests/x.py"\n'
    )
    assert main(["--repo", str(repo), "check", "--smells"]) == 0
    out = capsys.readouterr().out
    assert "explained: postcondition trained: never-fails: fails in tests/x.py" in out
    assert "1 smell in 1 of 1 entries, 0 unexplained" in out
