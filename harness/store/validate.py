"""The one gate a record passes to enter the harness: checked field by field, its text made
safe once, or refused with the field at fault.

Every way in goes through ``validate_record``: the runner building a record from a child's
result file, the store loading its lines, ``merge`` reading another machine's file. A
refused record raises ``RecordRefused(field, problem)``; callers name file:line with it and
quarantine the line (store.py), or classify the run (runner.py). Nothing downstream (the
aggregation, the renderers, a fast columnar reader) needs to check again: anything that
reads records another way must refuse exactly what this refuses, rule for rule (``RULES``).

The rules, in the order they are checked (``RULES`` holds the same text):

 R1  the record is a JSON object of the current ``schema`` (older schemas are migrated by
     the store first); every field is a known field of ``Record``, and entry, variant,
     kind, cell, env, device, precision, trial and outcome are present.
 R2  identifiers (entry, variant, cell, env, and check names): a string of 1 to
     ``MAX_ID`` characters, with no control character, no lone surrogate and no
     whitespace.
 R3  closed sets: kind in KINDS, device in DEVICES, precision in PRECISIONS, outcome in
     the ``Outcome`` values, isolation in ("fork", "process").
 R4  trial: an integer (not a boolean) from 0 to ``MAX_TRIAL``.
 R5  duration_s: a number (not a boolean), finite, from 0 to ``MAX_DURATION_S``;
     run_s: null or such a number.
 R6  exit_code: null or an integer in [-2**31, 2**32); signal: null or an integer 1..255.
 R7  started_at: "" (not recorded) or an ISO 8601 timestamp with a time zone
     (``datetime.fromisoformat``), at most 64 characters.
 R8  exception: null, or an object whose keys are among type, message, frame,
     traceback, each a string, with a non-empty type.
 R9  checks: an object of check name (R2) -> {"ok": bool, "detail": str} (detail
     optional, no other key), plus the reserved name "_warnings" -> a list of strings;
     at most ``MAX_ITEMS`` names.
 R10 versions and provenance: objects of string -> string, keys under R2 rules but
     ``MAX_ID`` long, at most ``MAX_ITEMS`` pairs.
 R11 any other field is typed by its ``Record`` annotation: str, int (not bool), or
     dict[str, str] as in R10.
 R12 free text (reason, tails, exception fields, check details, warnings, mapping
     values, fields under R11) must be a string; it is never refused for its content but
     made safe: terminal escape sequences (colours, bold: torch's and lightning's messages
     carry them on a terminal) are removed whole, each lone surrogate and control character
     other than tab and newline becomes U+FFFD, and text longer than its cap (``MAX_TEXT``, ``MAX_TAIL`` for the
     output tails, ``MAX_VALUE`` for mapping values) keeps its head and tail around a
     "[N characters cut]" marker. A record that is already safe comes out unchanged.

Pure and standard-library only (plus the harness's own closed sets): safe to import from
anywhere, including a reader that mirrors it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from harness.domain import DEVICES, KINDS, PRECISIONS
from harness.outcomes import Outcome
from harness.store.records import SCHEMA, ExceptionInfo, Record

__all__ = [
    "MAX_DURATION_S",
    "MAX_ID",
    "MAX_ITEMS",
    "MAX_TAIL",
    "MAX_TEXT",
    "MAX_TRIAL",
    "MAX_VALUE",
    "RULES",
    "RecordRefused",
    "safe_text",
    "validate_record",
]

MAX_ID = 200  # characters of an identifier (entry, variant, cell, env, check or key name)
MAX_TEXT = 20_000  # characters of a free text (reason, exception fields, check detail)
MAX_TAIL = 20_000  # characters of stdout_tail / stderr_tail
MAX_VALUE = 1_000  # characters of a versions / provenance value
MAX_ITEMS = 200  # names in checks, pairs in versions / provenance, warnings
MAX_TRIAL = 10_000
MAX_DURATION_S = 10_000_000.0  # about 116 days: more is a broken clock, not a run
MAX_TIMESTAMP = 64

RULES: tuple[str, ...] = tuple(
    line.strip()
    for line in """\
R1 a JSON object of the current schema with only Record's fields and the required ones
R2 identifiers: 1..MAX_ID characters, no control character, lone surrogate or whitespace
R3 kind, device, precision, outcome and isolation from their closed sets
R4 trial: an integer (not bool), 0..MAX_TRIAL
R5 duration_s: a finite number (not bool), 0..MAX_DURATION_S; run_s: null or one
R6 exit_code: null or an integer in [-2**31, 2**32); signal: null or an integer 1..255
R7 started_at: "" or an ISO 8601 timestamp with a time zone
R8 exception: null or {type (non-empty), message, frame, traceback}: strings
R9 checks: name -> {ok: bool, detail: str}; "_warnings" -> list of strings
R10 versions, provenance: string -> string
R11 other fields by their Record annotation: str, int, dict[str, str]
R12 free text made safe: terminal escapes removed, surrogates and control characters (not tab, newline) -> U+FFFD, capped""".splitlines()
)

_REQUIRED = ("entry", "variant", "kind", "cell", "env", "device", "precision", "trial", "outcome")
_IDENTIFIERS = ("entry", "variant", "cell", "env")
_CLOSED = {
    "kind": KINDS,
    "device": DEVICES,
    "precision": PRECISIONS,
    "outcome": tuple(o.value for o in Outcome),
    "isolation": ("fork", "process"),
}
_TAILS = ("stdout_tail", "stderr_tail")
_EXCEPTION_KEYS = ("type", "message", "frame", "traceback")
_WARNINGS = "_warnings"

# what R12 removes whole: terminal escape sequences (CSI such as "\x1b[1m", OSC, and the
# two-character ones); replacing only their ESC would leave "[1m" in every page
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
# what R12 replaces: C0/C1 controls but tab and newline, DEL, and lone surrogates
# C0 and C1 controls (but tab and newline), lone surrogates, and the bidirectional
# overrides and isolates that reorder what a terminal or a page shows (U+202A-U+202E,
# U+2066-U+2069, U+061C, U+200E/U+200F)
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\u061c\u200e\u200f]"
)
# what R2 refuses in an identifier: any of the above, and whitespace of every kind
_BAD_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\s]")


class RecordRefused(ValueError):
    """A record broke a rule: ``field`` is the dotted path of the value at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def safe_text(text: str, limit: int = MAX_TEXT) -> str:
    """R12: ``text`` without terminal escape sequences, with lone surrogates and control
    characters (but tab and newline) replaced by U+FFFD, cut to ``limit`` characters around
    a marker. Idempotent."""
    if "\x1b" in text:
        text = _TERMINAL.sub("", text)
    if _UNSAFE.search(text):
        text = _UNSAFE.sub("\ufffd", text)
    if len(text) > limit:
        marker = f"\n...[{len(text) - limit} characters cut]...\n"
        keep = max(0, limit - len(marker))
        head = keep // 2
        text = text[:head] + marker + text[len(text) - (keep - head) :]
    return text


def _short(value: Any) -> str:
    text = repr(value)
    return safe_text(text if len(text) <= 60 else text[:57] + "...", 80)


def _text(field: str, value: Any, *, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise RecordRefused(field, f"must be a string, got {type(value).__name__} {_short(value)}")
    return safe_text(value, limit)


def _identifier(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise RecordRefused(field, f"must be a string, got {type(value).__name__} {_short(value)}")
    if not value:
        raise RecordRefused(field, "is empty")
    if len(value) > MAX_ID:
        raise RecordRefused(field, f"is {len(value)} characters long (at most {MAX_ID})")
    bad = _BAD_ID.search(value)
    if bad:
        raise RecordRefused(
            field,
            f"contains {ascii(bad.group())} at index {bad.start()} "
            "(no control character, lone surrogate or whitespace allowed)",
        )
    return value


def _integer(field: str, value: Any, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordRefused(
            field, f"must be an integer, got {type(value).__name__} {_short(value)}"
        )
    if not low <= value <= high:
        raise RecordRefused(field, f"must be from {low} to {high}, got {value}")
    return value


def _optional_integer(field: str, value: Any, *, low: int, high: int) -> int | None:
    return None if value is None else _integer(field, value, low=low, high=high)


def _duration(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordRefused(
            "duration_s", f"must be a number, got {type(value).__name__} {_short(value)}"
        )
    if not math.isfinite(value) or not 0 <= value <= MAX_DURATION_S:
        raise RecordRefused(
            "duration_s", f"must be a finite number from 0 to {MAX_DURATION_S:g}, got {value!r}"
        )
    return float(value) if isinstance(value, int) else value


def _run_seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordRefused("run_s", f"must be null or a number, got {_short(value)}")
    if not math.isfinite(value) or not 0 <= value <= MAX_DURATION_S:
        raise RecordRefused(
            "run_s", f"must be null or a finite number from 0 to {MAX_DURATION_S:g}, got {value!r}"
        )
    return float(value)


def _timestamp(value: Any) -> str:
    if not isinstance(value, str):
        raise RecordRefused(
            "started_at",
            f"must be an ISO 8601 timestamp string, got {type(value).__name__} {_short(value)}",
        )
    if value == "":
        return value
    if len(value) > MAX_TIMESTAMP:
        raise RecordRefused("started_at", f"is {len(value)} characters long (a timestamp?)")
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        raise RecordRefused("started_at", f"{_short(value)} is not an ISO 8601 timestamp") from None
    if stamp.tzinfo is None:
        raise RecordRefused("started_at", f"{_short(value)} has no time zone (write +00:00)")
    return value


def _choice(field: str, value: Any, *, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise RecordRefused(field, f"{_short(value)} is not one of {', '.join(allowed)}")
    return value


def _object(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordRefused(field, f"must be an object, got {type(value).__name__} {_short(value)}")
    if len(value) > MAX_ITEMS:
        raise RecordRefused(field, f"has {len(value)} items (at most {MAX_ITEMS})")
    return value


def _string_map(field: str, value: Any) -> dict[str, str]:
    return {
        _identifier(f"{field} key", k): _text(f"{field}.{k}", v, limit=MAX_VALUE)
        for k, v in _object(field, value).items()
    }


def _exception(value: Any) -> ExceptionInfo | None:
    if value is None:
        return None
    d = _object("exception", value)
    unknown = sorted(set(d) - set(_EXCEPTION_KEYS))
    if unknown:
        raise RecordRefused("exception", f"unknown key(s) {_short(unknown)}")
    kwargs = {k: _text(f"exception.{k}", d[k]) for k in _EXCEPTION_KEYS if k in d}
    if not kwargs.get("type"):
        raise RecordRefused("exception.type", "is missing or empty")
    return ExceptionInfo(**kwargs)


def _checks(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, check in _object("checks", value).items():
        if name == _WARNINGS:
            if not isinstance(check, list):
                raise RecordRefused(f"checks.{_WARNINGS}", "must be a list of strings")
            if len(check) > MAX_ITEMS:
                raise RecordRefused(f"checks.{_WARNINGS}", f"has {len(check)} items")
            out[name] = [_text(f"checks.{_WARNINGS}[{i}]", w) for i, w in enumerate(check)]
            continue
        where = f"checks.{_identifier('checks key', name)}"
        if not isinstance(check, Mapping):
            raise RecordRefused(
                where, f'must be {{"ok": bool, "detail": str}}, got {_short(check)}'
            )
        unknown = sorted(set(check) - {"ok", "detail"})
        if unknown:
            raise RecordRefused(where, f"unknown key(s) {_short(unknown)}")
        ok = check.get("ok")
        if not isinstance(ok, bool):
            raise RecordRefused(f"{where}.ok", f"must be true or false, got {_short(ok)}")
        entry: dict[str, Any] = {"ok": ok}
        if "detail" in check:
            entry["detail"] = _text(f"{where}.detail", check["detail"])
        out[name] = entry
    return out


def _by_annotation(name: str, annotation: str) -> Callable[[Any], Any]:
    kind = annotation.replace(" ", "")
    if kind == "str":
        return partial(_text, name)
    if kind == "int":
        return partial(_integer, name, low=-(2**63), high=2**63 - 1)
    if kind == "dict[str,str]":
        return partial(_string_map, name)
    raise TypeError(
        f"Record field {name!r} ({annotation}) has no rule in harness/store/validate.py; add one"
    )


_FIELD_RULES: dict[str, Callable[[Any], Any]] = {
    **{name: partial(_identifier, name) for name in _IDENTIFIERS},
    **{name: partial(_choice, name, allowed=allowed) for name, allowed in _CLOSED.items()},
    "trial": partial(_integer, "trial", low=0, high=MAX_TRIAL),
    "duration_s": _duration,
    "run_s": _run_seconds,
    "exit_code": partial(_optional_integer, "exit_code", low=-(2**31), high=2**32 - 1),
    "signal": partial(_optional_integer, "signal", low=1, high=255),
    "started_at": _timestamp,
    "exception": _exception,
    "checks": _checks,
    "versions": partial(_string_map, "versions"),
    "provenance": partial(_string_map, "provenance"),
    "reason": partial(_text, "reason"),
    **{name: partial(_text, name, limit=MAX_TAIL) for name in _TAILS},
}
_FIELDS = {f.name: f for f in dataclasses.fields(Record)}
for _name, _field in _FIELDS.items():
    if _name not in _FIELD_RULES and _name != "schema":
        _FIELD_RULES[_name] = _by_annotation(_name, str(_field.type))


def validate_record(d: Any) -> Record:
    """The Record that ``d`` (a dict as stored, at the current schema) describes, its text
    made safe (R12); raises RecordRefused naming the field at fault (R1-R11)."""
    if not isinstance(d, Mapping):
        raise RecordRefused("record", f"must be a JSON object, got {type(d).__name__}")
    schema = d.get("schema", SCHEMA)
    if isinstance(schema, bool) or schema != SCHEMA:
        raise RecordRefused("schema", f"must be {SCHEMA} here, got {_short(schema)}")
    unknown = sorted(k for k in d if k not in _FIELDS)
    if unknown:
        raise RecordRefused(
            "record", f"unknown field(s) {', '.join(_short(k) for k in unknown[:5])}"
        )
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise RecordRefused("record", f"missing field(s) {', '.join(missing)}")
    kwargs: dict[str, Any] = {}
    for name, value in d.items():
        if name == "schema":
            continue
        kwargs[name] = _FIELD_RULES[name](value)
    kwargs["outcome"] = Outcome(kwargs["outcome"])
    return Record(**kwargs)
