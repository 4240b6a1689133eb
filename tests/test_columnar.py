"""The store read by the engine (harness/columnar.py) gives what the store's own reader
gives: the same newest records, the same file:line warnings, the same lines kept out.

The property is checked on generated stores: several files of valid records, records with
a field replaced by something hostile or borderline (for the engine's predicate: Unicode,
escapes, control characters, long texts, numbers of every JSON type), older schemas,
duplicate keys, trailing commas, truncated and garbage lines, invalid UTF-8, and start
times that tie in several spellings.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.columnar import load_latest
from harness.records import SCHEMA
from harness.store import Store, latest

EXAMPLES = int(os.environ.get("COLUMNAR_EXAMPLES", "60"))

STAMPS = [
    "",
    "2026-11-30T01:02:03+00:00",
    "2026-11-30T01:02:03.000000+00:00",
    "2026-11-30T01:02:03.000+00:00",
    "2026-11-30T01:02:03.5+00:00",
    "2026-11-30T01:02:03.500000+00:00",
    "2026-11-30T02:02:03+01:00",
    "2026-11-30T01:02:03Z",
    "2026-11-30T01:02:04+00:00",
    "2026-11-30T01:02:03",
    "2026-02-30T01:02:03+00:00",
    "0999-01-01T00:00:00+00:00",
    "2026-11-30 01:02:03+00:00",
    "2026-11-30T24:00:00+00:00",
]
ODD_TEXT = st.sampled_from(
    [
        "é",
        "\u2028",
        "\x85",
        "\x7f",
        "\t",
        "\n",
        "\x00",
        "\ud800",
        "😀",
        "a b",
        "\\u0000",
        ",}",
        "'",
        "x" * 20_001,
        "y" * 1_001,
        "z" * 201,
    ]
)
TEXT = st.one_of(
    st.sampled_from(["", "a", "RuntimeError", "line one\nline two"]),
    ODD_TEXT,
    st.text(max_size=6),
)
VALUE = st.one_of(
    TEXT,
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 4, 255, 256, 10_000, 10_001, 2**31, 2**32, 2**64, 1.0, 0.5, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(TEXT, max_size=2),
    st.dictionaries(TEXT, st.one_of(TEXT, st.booleans()), max_size=2),
)


@st.composite
def record(draw: st.DrawFn) -> dict[str, Any]:
    outcome = draw(st.sampled_from(["reproduced", "ok", "other_error", "unsupported"]))
    env = draw(
        st.sampled_from(["py3.11-torch2.4.1-lightning2.5.6", "py3.10-torch1.12.1-lightning2.1.4"])
    )
    d: dict[str, Any] = {
        "schema": SCHEMA,
        "entry": draw(st.sampled_from(["pytorch/a", "pytorch/b"])),
        "variant": draw(st.sampled_from(["baseline", "workaround-1"])),
        "kind": "baseline",
        "cell": env + "-cpu-fp32",
        "env": env,
        "device": "cpu",
        "precision": "fp32",
        "trial": draw(st.integers(0, 1)),
        "outcome": outcome,
        "reason": draw(TEXT) if outcome == "unsupported" else "",
        "exception": (
            {
                "type": "RuntimeError",
                "message": draw(TEXT),
                "frame": "repro.py:3 in run",
                "traceback": "Traceback\n",
            }
            if outcome in ("reproduced", "other_error")
            else None
        ),
        "checks": {"finite": {"ok": True, "detail": "loss 0.1"}, "_warnings": ["w"]},
        "duration_s": draw(st.sampled_from([0.5, 1, 0.1, 2.675])),
        "exit_code": 0,
        "signal": None,
        "stdout_tail": "",
        "stderr_tail": "",
        "versions": {"python": "3.11.4", "torch": "2.4.1+cpu"},
        "provenance": {"host": "box", "os": "Linux"},
        "started_at": draw(st.sampled_from(STAMPS)),
        "machine": draw(st.sampled_from(["box", "other"])),
        "machine_id": draw(st.sampled_from(["0123456789ab", ""])),
        "imported_from": "",
        "isolation": "fork",
        "run_s": 0.25,
    }
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from([*d, "exception.type", "checks.finite", "versions.torch"]))
        value = draw(VALUE)
        if "." in name:  # a nested value
            outer, inner = name.split(".")
            if isinstance(d.get(outer), dict):
                d[outer] = {**d[outer], inner: value}
        else:
            d[name] = value
    if draw(st.integers(0, 7)) == 0:
        d.pop(draw(st.sampled_from(sorted(d))))
    if draw(st.integers(0, 7)) == 0:
        d[draw(st.sampled_from(["extra", "schema"]))] = draw(VALUE)
    if draw(st.integers(0, 5)) == 0:  # an older schema: migrated by the store
        d["schema"] = draw(st.sampled_from([1, 2, 3]))
        for name in ("machine", "machine_id", "imported_from"):
            d.pop(name, None)
        if d["schema"] == 1:
            d["status"] = d.pop("outcome", "ok")
    return d


@st.composite
def line(draw: st.DrawFn) -> bytes:
    text = json.dumps(draw(record()), allow_nan=True, ensure_ascii=draw(st.booleans()))
    how = draw(st.integers(0, 14))
    if how == 0:  # a duplicate key: Python keeps the last, the engine must not take it
        text = '{"trial": 7, ' + text[1:]
    elif how == 1:
        text = text[:-1] + ", }"  # a trailing comma (DuckDB's parser forgives it)
    elif how == 2:
        text = text[: draw(st.integers(0, len(text)))]  # cut short
    elif how == 3:
        text = text.replace(": ", ":").replace(", ", ",")  # compact
    elif how == 4:
        text = " " + text + "\r"
    elif how == 7:  # a duplicate key in a nested object
        text = text.replace('"python": ', '"python": "0", "python": ', 1)
        text = text.replace('"type": ', '"type": "X", "type": ', 1)
    elif how == 8:
        text = text.replace("}", ",\t}", 1)  # a trailing comma before a tab
    elif how == 9:
        text = text.replace('"ok": true', '"ok": true, "ok": false', 1)
    data = text.encode("utf-8", "surrogatepass")
    if how == 5:
        return draw(st.binary(max_size=30))
    if how == 6:
        return b""
    return data


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(st.lists(line(), max_size=10), min_size=1, max_size=3), st.booleans())
def test_the_engine_reads_a_store_as_the_store_does(files: list[list[bytes]], end: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        root.mkdir()
        for i, lines in enumerate(files):
            (root / f"m{i}.jsonl").write_bytes(b"\n".join(lines) + (b"\n" if end else b""))
        store = Store(root)
        loaded = store.load()
        got = load_latest(store)
        assert got.records() == latest(loaded.records)
        assert got.warnings == loaded.warnings
        assert got.refused == loaded.refused
        assert len(got) == len(got.records())


def test_the_engine_takes_ordinary_records_itself(tmp_path: Path) -> None:
    """Records as runs write them are read by the engine, not by Python (else the
    property above would hold because everything went the slow way)."""
    rnd = random.Random(0)
    root = tmp_path / "records"
    root.mkdir()
    lines = []
    for i in range(200):
        d = {
            "schema": SCHEMA,
            "entry": f"pytorch/e{i % 7}",
            "variant": "baseline",
            "kind": "baseline",
            "cell": "py3.11-torch2.4.1-lightning2.5.6-cpu-fp32",
            "env": "py3.11-torch2.4.1-lightning2.5.6",
            "device": "cpu",
            "precision": "fp32",
            "trial": i,
            "outcome": "reproduced",
            "reason": "",
            "exception": {
                "type": "RuntimeError",
                "message": "boom é",
                "frame": "f:1 in run",
                "traceback": "Traceback (most recent call last):\n  ...\n",
            },
            "checks": {"finite": {"ok": True, "detail": "loss 0.5"}, "_warnings": ["w"]},
            "duration_s": round(rnd.random() * 3, 3),
            "exit_code": 0,
            "signal": None,
            "stdout_tail": "",
            "stderr_tail": "",
            "versions": {"python": "3.11.4", "torch": "2.4.1+cpu"},
            "provenance": {"host": "box"},
            "started_at": f"2026-11-30T01:02:{i % 60:02d}+00:00",
            "machine": "box",
            "machine_id": "0123456789ab",
            "imported_from": "",
            "isolation": "fork",
            "run_s": 0.25,
        }
        lines.append(json.dumps(d))
    lines.append('{"schema": 4, "entry": "cut')
    (root / "box.jsonl").write_text("\n".join(lines) + "\n")
    got = load_latest(Store(root))
    assert got.python_lines == 1  # no line read by Python but the cut one
    assert len(got.warnings) == 1 and ":201: truncated line" in got.warnings[0]
    assert got.records() == latest(Store(root).load().records)
