"""The record validator (harness/store/validate.py): each rule refuses what it names, with the
field at fault; text is made safe once; a valid record passes unchanged. The merge and
store examples of issue 11 go through the CLI and the store."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.__main__ import main
from harness.outcomes import Outcome
from harness.store.jsonl import Store
from harness.store.records import SCHEMA, Record
from harness.store.validate import (
    MAX_ID,
    MAX_TEXT,
    RULES,
    RecordRefused,
    safe_text,
    validate_record,
)

SURROGATE = b"file \xff name".decode("utf-8", "surrogateescape")


def good(**overrides: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "schema": SCHEMA,
        "entry": "tiny/faults",
        "variant": "ok",
        "kind": "workaround",
        "cell": "py3.11-torch1.16.0-lightning0-cpu-fp32",
        "env": "py3.11-torch1.16.0-lightning0",
        "device": "cpu",
        "precision": "fp32",
        "trial": 0,
        "outcome": "ok",
        "reason": "",
        "exception": None,
        "checks": {"moved": {"ok": True, "detail": "by 0.1"}, "_warnings": ["UserWarning: x"]},
        "duration_s": 0.5,
        "exit_code": 0,
        "signal": None,
        "stdout_tail": "",
        "stderr_tail": "",
        "versions": {"python": "3.11.4", "torch": "1.16.0"},
        "provenance": {"host": "box"},
        "started_at": "2026-11-29T23:00:00+00:00",
        "machine": "box",
        "machine_id": "0123456789ab",
        "imported_from": "",
        "isolation": "fork",
        "run_s": 0.25,
        "ran_in": "py3.11-torch1.16.0-lightning0-with-numpy-lt2",
        "requires": {"numpy": "numpy<2"},
    }
    d.update(overrides)
    return d


def test_a_valid_record_passes_unchanged() -> None:
    d = good()
    record = validate_record(d)
    assert record.to_dict() == d
    assert validate_record(record.to_dict()) == record


def test_every_rule_is_listed() -> None:
    assert [r.split()[0] for r in RULES] == [f"R{i}" for i in range(1, 13)]


# issue 11's "merge checks no types" examples, and one per rule
REFUSED = [
    ({"trial": "0"}, "trial"),
    ({"trial": -1}, "trial"),
    ({"trial": True}, "trial"),
    ({"versions": None}, "versions"),
    ({"versions": {"torch": 2}}, "versions.torch"),
    ({"provenance": ["x"]}, "provenance"),
    ({"duration_s": math.nan}, "duration_s"),
    ({"duration_s": math.inf}, "duration_s"),
    ({"duration_s": -1.0}, "duration_s"),
    ({"duration_s": "1"}, "duration_s"),
    ({"started_at": 5}, "started_at"),
    ({"started_at": "yesterday"}, "started_at"),
    ({"started_at": "2026-11-29T23:00:00"}, "started_at"),
    ({"entry": 5}, "entry"),
    ({"entry": "tiny/\x00faults"}, "entry"),
    ({"entry": "x" * 300}, "entry"),
    ({"entry": ""}, "entry"),
    ({"variant": "a b"}, "variant"),
    ({"cell": SURROGATE}, "cell"),
    ({"exception": "x"}, "exception"),
    ({"exception": {"type": "E", "message": 3}}, "exception.message"),
    ({"exception": {"message": "no type"}}, "exception.type"),
    ({"exception": {"type": "E", "extra": ""}}, "exception"),
    ({"outcome": "bogus"}, "outcome"),
    ({"kind": "other"}, "kind"),
    ({"device": "tpu"}, "device"),
    ({"precision": "fp8"}, "precision"),
    ({"isolation": "thread"}, "isolation"),
    ({"run_s": -0.5}, "run_s"),
    ({"run_s": "0.5"}, "run_s"),
    ({"checks": [1, 2]}, "checks"),
    ({"checks": {"moved": True}}, "checks.moved"),
    ({"checks": {"moved": {"ok": "yes"}}}, "checks.moved.ok"),
    ({"checks": {"moved": {"ok": True, "detail": 1}}}, "checks.moved.detail"),
    ({"checks": {"moved": {"ok": True, "why": ""}}}, "checks.moved"),
    ({"checks": {"_warnings": "w"}}, "checks._warnings"),
    ({"exit_code": 1.5}, "exit_code"),
    ({"signal": 0}, "signal"),
    ({"reason": None}, "reason"),
    ({"stderr_tail": 7}, "stderr_tail"),
    ({"schema": SCHEMA + 1}, "schema"),
    ({"bogus_field": 1}, "record"),
    ({"ran_in": None}, "ran_in"),
    ({"requires": ["numpy<2"]}, "requires"),
    ({"requires": {"numpy": 2}}, "requires.numpy"),
]


@pytest.mark.parametrize(("change", "field"), REFUSED, ids=[f for _, f in REFUSED])
def test_each_rule_refuses_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(RecordRefused) as info:
        validate_record(good(**change))
    assert info.value.field == field, info.value


def test_a_missing_field_is_named() -> None:
    d = good()
    del d["outcome"]
    with pytest.raises(RecordRefused, match="missing field.*outcome"):
        validate_record(d)


def test_text_is_made_safe_once() -> None:
    long = "y" * (MAX_TEXT * 2)
    r = validate_record(
        good(
            reason=SURROGATE + "\x00\x1b[31m\r",
            exception={"type": "ValueError", "message": SURROGATE, "frame": "", "traceback": long},
            checks={"moved": {"ok": False, "detail": "\x07bell"}},
            stderr_tail="tab\tand\nnewline stay",
        )
    )
    assert r.reason == "file \ufffd name\ufffd\ufffd"  # the colour escape removed whole
    assert r.exception is not None and r.exception.message == "file \ufffd name"
    assert len(r.exception.traceback) == MAX_TEXT and "characters cut" in r.exception.traceback
    assert r.checks["moved"]["detail"] == "\ufffdbell"
    assert r.stderr_tail == "tab\tand\nnewline stay"
    # every text encodes as UTF-8, and a second pass changes nothing
    json.dumps(r.to_dict(), ensure_ascii=False).encode("utf-8")
    assert validate_record(r.to_dict()) == r
    assert safe_text(safe_text(long)) == safe_text(long)


def test_terminal_escapes_are_removed_whole() -> None:
    """torch's own messages carry ANSI codes on a terminal (torch.load's weights_only hint
    is bold): stored, they showed as "\ufffd[1m" in every page."""
    hint = "you have two options, \x1b[1mdo those steps only if you trust the source\x1b[0m."
    assert safe_text(hint) == "you have two options, do those steps only if you trust the source."
    assert safe_text("\x1b]0;title\x07text \x1b[38;5;196mred\x1b[m \x1bM") == "text red "
    assert safe_text("a lone \x1b") == "a lone \ufffd"  # not a sequence: replaced as before
    assert safe_text("[1m stays when there is no escape") == "[1m stays when there is no escape"


def test_an_identifier_at_the_limit_passes() -> None:
    assert validate_record(good(variant="v" * MAX_ID)).variant == "v" * MAX_ID


# --- the store and merge -----------------------------------------------------------------


def test_store_names_refused_lines_with_file_line_and_field_and_quarantines_them(
    tmp_path: Path,
) -> None:
    records = tmp_path / "results" / "records"
    records.mkdir(parents=True)
    lines = [
        json.dumps(good()),
        json.dumps(good(trial="1")),
        json.dumps(good(trial=2, reason=SURROGATE)),  # stored by an older harness: made safe
        json.dumps(good(trial=3, exception="x")),
    ]
    (records / "box.jsonl").write_text("\n".join(lines) + "\n")
    store = Store(records)
    loaded = store.load()
    assert [r.trial for r in loaded.records] == [0, 2]
    assert loaded.records[1].reason == "file \ufffd name"
    assert loaded.warnings == [
        f"{records}/box.jsonl:2: refused record kept out: trial: must be an integer, got str '1'",
        f"{records}/box.jsonl:4: refused record kept out: exception: must be an object, got str 'x'",
    ]
    assert store.quarantine(loaded.refused) == []
    assert store.quarantine(loaded.refused) == []  # once
    kept = [json.loads(x) for x in (tmp_path / "results" / "quarantine" / "box.jsonl").open()]
    assert [k["source"] for k in kept] == [f"{records}/box.jsonl:2", f"{records}/box.jsonl:4"]
    assert kept[0]["line"] == lines[1] and "trial" in kept[0]["reason"]


def test_merge_refuses_bad_records_by_file_line_and_field_and_the_report_still_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 11: `merge` took any types, then every `report` crashed; `exception: "x"`
    crashed merge itself."""
    repo = tmp_path / "repo"
    (repo / "repros").mkdir(parents=True)
    source = tmp_path / "other-box.jsonl"
    bad = [
        {"trial": "0"},
        {"versions": None},
        {"duration_s": math.nan},
        {"started_at": 5},
        {"entry": 5},
        {"entry": "tiny/\x00faults"},
        {"entry": "e" * 300},
        {"exception": "x"},
    ]
    lines = [json.dumps(good(trial=7))] + [json.dumps(good(**b)) for b in bad]
    source.write_text("\n".join(lines) + "\n")
    assert main(["--repo", str(repo), "merge", str(source)]) == 2
    out = capsys.readouterr().out
    for number, change in enumerate(bad, start=2):
        (field,) = change
        assert f"{source}:{number}: refused record kept out: {field}:" in out
    assert "merged: 1 records added" in out
    assert "8 line(s) refused" in out
    stored = Store(repo / "results" / "records").load()
    assert [r.trial for r in stored.records] == [7] and not stored.warnings
    quarantined = (repo / "results" / "quarantine" / "other-box.jsonl").read_text().splitlines()
    assert len(quarantined) == len(bad)
    assert main(["--repo", str(repo), "report"]) == 0


def test_merge_of_a_missing_file_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--repo", str(tmp_path), "merge", str(tmp_path / "nope.jsonl")]) == 2
    assert f"merge: {tmp_path}/nope.jsonl: no such file or folder" in capsys.readouterr().out


def test_a_record_built_here_round_trips() -> None:
    r = Record(
        entry="e/x",
        variant="v",
        kind="baseline",
        cell="c-cpu-fp32",
        env="c",
        device="cpu",
        precision="fp32",
        trial=0,
        outcome=Outcome.OK,
    )
    assert validate_record(r.to_dict()) == r


def test_a_report_over_nothing_but_refused_lines_still_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by tests/store/test_fuzz.py: with no entry and every line refused, render_all had
    no shard to render and raised IndexError."""
    records = tmp_path / "results" / "records"
    records.mkdir(parents=True)
    (tmp_path / "repros").mkdir()
    (records / "box.jsonl").write_text(json.dumps(good(outcome="bogus")) + "\n")
    assert main(["--repo", str(tmp_path), "report"]) == 0
    out = capsys.readouterr().out
    assert "box.jsonl:1: refused record kept out: outcome: 'bogus' is not one of" in out
    assert (tmp_path / "results" / "index.html").is_file()
    assert (tmp_path / "results" / "quarantine" / "box.jsonl").is_file()
