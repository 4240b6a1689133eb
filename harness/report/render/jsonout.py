"""Aggregates -> compat.json and its parts, for machines. ``schema`` is bumped on
incompatible change.

Schema 2: each entry's aggregate is one line of a part of 16 entries,
``results/aggregates/NNNN.jsonl`` (JSON Lines, entries in id order), and ``compat.json``
is their index::

    {"schema": 2, "records": <records counted>,
     "parts": [{"file": "aggregates/0000.jsonl", "ids": [<its entries' ids>]}, ...]}

A report that appends to ten entries rewrites their parts and the index, not every
entry's aggregate (at 2,500 entries a single file was 153 MB). ``read_compat`` gives the
whole document (``{"schema", "records", "entries": [...]}``) of either schema: schema 1
was the single file with every entry's dict in ``entries``.

The files are put together from each entry's JSON text (``entry_json``), so that entries
can be encoded in several processes; ``render_json`` is all of them in one."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from harness.aggregate import Aggregates, EntryAggregate

__all__ = [
    "COMPAT_FILE",
    "PART_ENTRIES",
    "SCHEMA",
    "compact_json",
    "compat_index",
    "entry_json",
    "part_name",
    "read_compat",
    "render_json",
]

SCHEMA = 2
COMPAT_FILE = "compat.json"  # under results/
PART_ENTRIES = 16  # entries a part holds
_PART = re.compile(r"aggregates/[0-9]{4,}\.jsonl")


def compact_json(data: Any) -> str:
    """``data`` as compact JSON (no space; UTF-8 text as it is, not escaped), by orjson:
    the report's JSON (each entry's aggregate, cell data, answers) is 250 MB at 2,500
    entries, which the standard library's C encoder took about 4 s of CPU to write and
    orjson writes in a fifth of that. Its text is ``json.dumps(data, ensure_ascii=False,
    separators=(",", ":"))``'s, except a float below 1e-4 written out (0.00005, not 5e-05):
    the same value (tests/report/test_jsonout.py). Where json.dumps took ``allow_nan=False``,
    none is needed: orjson would write a NaN or an infinity as null, and the aggregates hold
    none (a rate is of counts, a claimed rate is checked to lie in [0, 1], durations are
    checked finite before they are written). A dict key that is not a string, an integer
    beyond 64 bits or a lone surrogate raise TypeError, where json.dumps wrote them."""
    return orjson.dumps(data).decode("utf-8")


def entry_json(agg: EntryAggregate) -> str:
    # (a JSON text of this kind holds no raw newline: it is one line of its part)
    return compact_json(agg.to_dict())


def part_name(index: int) -> str:
    """The part of the entry at ``index`` (in id order), relative to results/."""
    return f"aggregates/{index // PART_ENTRIES:04d}.jsonl"


def compat_index(n_records: int, ids: Sequence[str]) -> bytes:
    """compat.json: the index of the parts of ``ids`` (every entry, in id order)."""
    parts = [
        {"file": part_name(first), "ids": list(ids[first : first + PART_ENTRIES])}
        for first in range(0, len(ids), PART_ENTRIES)
    ]
    doc = {"schema": SCHEMA, "records": n_records, "parts": parts}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def render_json(aggs: Aggregates) -> dict[str, bytes]:
    """Every file, by its name under results/: compat.json and the parts."""
    ids = [a.id for a in aggs.entries]
    files = {COMPAT_FILE: compat_index(aggs.n_records, ids)}
    for first in range(0, len(ids), PART_ENTRIES):
        lines = [entry_json(a) + "\n" for a in aggs.entries[first : first + PART_ENTRIES]]
        files[part_name(first)] = "".join(lines).encode("utf-8")
    return files


def read_compat(results: str | Path) -> dict[str, Any]:
    """compat.json's whole document, ``{"schema", "records", "entries": [each entry's
    dict, in id order]}``, read from results/ as a report wrote it, of schema 1 or 2.
    OSError where a file cannot be read; ValueError ("file:line: problem") where one is
    not what its schema says: a part named outside results/aggregates/, a line that is not
    the entry the index names, a part with more or fewer lines."""
    folder = Path(results)
    path = folder / COMPAT_FILE
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or type(doc.get("records")) is not int:
        raise ValueError(f"{path}: not a compat.json document")
    if doc.get("schema") == 1:
        if not isinstance(doc.get("entries"), list):
            raise ValueError(f"{path}: schema 1 without a list of entries")
        return doc
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema')!r} (this harness reads 1 and 2)")
    parts = doc.get("parts")
    if not isinstance(parts, list):
        raise ValueError(f"{path}: no list of parts")
    entries: list[Any] = []
    for k, part in enumerate(parts):
        name = part.get("file") if isinstance(part, dict) else None
        ids = part.get("ids") if isinstance(part, dict) else None
        if not (
            isinstance(name, str)
            and _PART.fullmatch(name)
            and isinstance(ids, list)
            and all(isinstance(i, str) for i in ids)
        ):
            raise ValueError(f"{path}: part {k + 1} is not a file under aggregates/ with ids")
        where = folder / name
        lines = where.read_bytes().split(b"\n")
        if lines[-1] or len(lines) - 1 != len(ids):
            raise ValueError(
                f"{where}: holds {len(lines) - 1} lines (with a last newline: "
                f"{not lines[-1]}); compat.json names {len(ids)} entries"
            )
        for n, (line, eid) in enumerate(zip(lines, ids, strict=False), start=1):
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{where}:{n}: not JSON ({exc})") from None
            if not (isinstance(entry, dict) and entry.get("id") == eid):
                raise ValueError(f"{where}:{n}: not the aggregate of {eid}, as compat.json says")
            entries.append(entry)
    return {"schema": SCHEMA, "records": doc["records"], "entries": entries}
