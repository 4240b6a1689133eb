"""Property-based tests (Hypothesis) of everything that reads a record, a result file or a
YAML file: a line either loads or is named with file:line; a report never raises; no
stored record is lost; YAML either loads or is one YamlProblem with a line, quickly.

The budget here is small (``max_examples`` below) so that the suite stays fast; a longer
run, ``HYPOTHESIS_PROFILE=fuzz python -m pytest tests/store/test_fuzz.py -p no:xdist
--hypothesis-show-statistics``, is what docs/reliability.md quotes.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.execute.plan import Job
from harness.execute.proc import ChildResult, read_result
from harness.execute.runner import record_of
from harness.report.outputs import render_all
from harness.spec.entries import Entry
from harness.spec.matrix import MatrixError, load_matrix
from harness.spec.yaml_nodes import YamlProblem, compose_plain
from harness.store.jsonl import Store, latest, migrate
from harness.store.records import SCHEMA
from harness.store.validate import RecordRefused, validate_record
from tests.paths import RESOURCES

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "5000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# --- what hostile input looks like ---------------------------------------------------------

# text with what breaks encoders and terminals: lone surrogates, NUL, escapes, bidi marks
HOSTILE_CHARS = st.sampled_from(
    ["\ud800", "\udcff", "\x00", "\x1b[31m", "\r", "\u2028", "\u202e", "[/]", "<script>", "|"]
)
TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.one_of(st.text(max_size=5), HOSTILE_CHARS), max_size=8).map("".join),
    st.integers(0, 30_000).map(lambda n: "x" * n),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)


def valid() -> dict[str, Any]:
    return {
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
        "checks": {"moved": {"ok": True, "detail": "by 0.1"}},
        "duration_s": 0.5,
        "versions": {"python": "3.11.4"},
        "provenance": {"host": "box"},
        "started_at": "2026-11-29T23:00:00+00:00",
    }


FIELDS = [*valid(), "exit_code", "signal", "stdout_tail", "stderr_tail", "isolation", "run_s"]


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record with some fields replaced by anything JSON can hold, a field
    dropped or one added: mostly invalid, sometimes still valid."""
    d = valid()
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        d[name] = draw(JSON)
    if draw(st.booleans()):
        d["trial"] = draw(st.integers(0, 5))  # several keys, so that latest() has work
    if draw(st.integers(0, 9)) == 0:
        d.pop(draw(st.sampled_from(sorted(d))), None)
    if draw(st.integers(0, 9)) == 0:
        d[draw(TEXT)] = draw(JSON)
    return d


def encode(d: Any) -> bytes:
    """As a writer would store it: JSON with NaN allowed, surrogates escaped."""
    return json.dumps(d, allow_nan=True).encode("utf-8")


LINES = st.one_of(
    records().map(encode),
    st.binary(max_size=60),  # garbage, invalid UTF-8, half lines
    records().map(encode).flatmap(lambda b: st.integers(0, len(b)).map(lambda n: b[:n])),
    st.just(b"[" * 5000 + b"]" * 5000),  # nesting past json's recursion limit
)


# --- the properties --------------------------------------------------------------------------


@given(records())
def test_a_record_is_validated_or_refused_naming_a_field(d: dict[str, Any]) -> None:
    try:
        record = validate_record(d)
    except RecordRefused as exc:
        assert exc.field and exc.problem
        return
    text = json.dumps(record.to_dict(), allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # every text field encodes: no lone surrogate survives
    assert validate_record(record.to_dict()) == record  # safe once: a second pass is a no-op


@given(st.lists(LINES, max_size=12))
def test_a_line_either_loads_or_is_named_and_no_record_is_lost(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        root.mkdir()
        data = b"\n".join(lines) + b"\n"
        (root / "box.jsonl").write_bytes(data)
        loaded = Store(root).load()
        numbered = [(n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]
        named = {r.line for r in loaded.refused}
        assert len(loaded.records) + len(named) == len(numbered)
        for n, _ in numbered:
            if n in named:
                assert any(w.startswith(f"{root}/box.jsonl:{n}: ") for w in loaded.warnings)
        # no stored record is lost: every line that validates on its own is loaded
        good = 0
        for _, line in numbered:
            try:  # what the store does to a line: JSON, migration, the validator
                validate_record(migrate(json.loads(line)))
                good += 1
            except Exception:  # noqa: BLE001, S112 - counted as refused
                continue
        assert len(loaded.records) == good


@settings(max_examples=int(os.environ.get("FUZZ_REPORT_EXAMPLES", "15")))
@given(st.lists(records(), min_size=1, max_size=6))
def test_a_report_never_raises(ds: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results" / "records"
        root.mkdir(parents=True)
        (root / "box.jsonl").write_bytes(b"\n".join(map(encode, ds)) + b"\n")
        loaded = Store(root).load()
        render_all(latest(loaded.records), [], Path(tmp) / "results", workers=1)
        render_all(latest(loaded.records), [], Path(tmp) / "results", check=True, workers=1)


@pytest.fixture(scope="module")
def job() -> Job:
    from harness.spec.entries import load_entry
    from harness.spec.matrix import Cell, Environment

    entry: Entry = load_entry(RESOURCES / "entries" / "tiny" / "faults", RESOURCES / "entries")
    env = Environment("3.11", "1.16.0", "0")
    return Job(entry, entry.variants[0], Cell(env, "cpu", "fp32"), 0)


RESULTS = st.one_of(
    st.binary(max_size=80),
    JSON.map(lambda v: json.dumps(v).encode()),
    records()
    .map(lambda d: {k: v for k, v in d.items() if k not in ("schema", "entry")})
    .map(lambda d: json.dumps({"protocol": 2, "warnings": d.pop("reason", []), **d}).encode()),
)


@given(RESULTS)
def test_any_result_file_becomes_one_valid_record(job: Job, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result.json"
        path.write_bytes(data)
        result, problem = read_result(path)
    child = ChildResult(result, 0, None, False, 0.1, "", "", result_problem=problem)
    record = record_of(job, child, 60.0, {"host": "box"}, "2026-11-29T23:00:00+00:00", {})
    assert validate_record(record.to_dict()) == record
    if result is None:
        assert record.outcome.value == "crashed"


YAML_PIECES = st.sampled_from(
    [
        "a: 1\n",
        "- x\n",
        "&a [1, 2]\n",
        "*a\n",
        "b: &b {c: *b}\n",
        "[" * 80,
        "]" * 80,
        "{k: " * 70,
        "!!python/object/apply:os.system ['true']\n",
        "\t",
        "'\n",
        '"\\ud800"\n',
        "  - ",
        "key: [*a, *a, *a, *a]\n",
        "? ",
        "%YAML 1.1\n---\n",
        "\x00",
        "\ufeff",
    ]
)
YAML_TEXT = st.one_of(
    st.lists(st.one_of(YAML_PIECES, st.text(max_size=10)), max_size=12).map("".join),
    st.text(max_size=200),
)


@given(YAML_TEXT)
def test_yaml_either_composes_or_is_one_problem_with_a_line(text: str) -> None:
    try:
        compose_plain(text)
    except YamlProblem as exc:
        assert exc.line is None or exc.line >= 1
        assert exc.message


@given(st.data())
def test_a_mutated_matrix_file_loads_or_names_its_line(data: st.DataObject) -> None:
    original = (RESOURCES / "reliability" / "matrix.yaml").read_bytes()
    cut = data.draw(st.integers(0, len(original)))
    insert = data.draw(
        st.one_of(YAML_PIECES.map(str.encode), st.binary(max_size=8), st.just(b"9" * 5000))
    )
    text = original[:cut] + insert + original[cut + data.draw(st.integers(0, 10)) :]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "matrix.yaml"
        path.write_bytes(text)
        try:
            load_matrix(path)
        except MatrixError as exc:
            assert str(exc).startswith(str(path))


def test_the_strategies_reach_both_sides() -> None:
    """The record strategy makes valid and refused records alike (else the properties
    above would test one side only)."""
    seen = {True: 0, False: 0}

    @settings(max_examples=200, database=None)
    @given(records())
    def look(d: dict[str, Any]) -> None:
        try:
            validate_record(d)
            seen[True] += 1
        except RecordRefused:
            seen[False] += 1

    look()
    assert seen[True] > 5 and seen[False] > 5, seen
    assert math.isfinite(seen[True] / (seen[True] + seen[False]))
