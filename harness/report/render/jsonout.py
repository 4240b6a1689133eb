"""Aggregates -> compat.json, for machines. ``schema`` is bumped on incompatible change.

The file is put together from each entry's JSON text (``entry_json``), so that entries can
be encoded in several processes; ``render_json`` is the whole in one."""

from __future__ import annotations

import json

from harness.aggregate import Aggregates, EntryAggregate

__all__ = ["SCHEMA", "entry_json", "json_document", "render_json"]

SCHEMA = 1


def entry_json(agg: EntryAggregate) -> str:
    # compact on purpose: the C encoder only runs without indent (10x faster on big results)
    # check_circular=False: the aggregates are trees; skipping the check changes no byte
    return json.dumps(
        agg.to_dict(),
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
        check_circular=False,
    )


def json_document(n_records: int, entries: bytes) -> bytes:
    """The file around its entries' JSON (comma-separated, in entry order, UTF-8): the
    bytes that json.dumps gives for ``Aggregates.to_dict()`` with the options above."""
    return b'{"schema":%d,"records":%d,"entries":[' % (SCHEMA, n_records) + entries + b"]}\n"


def render_json(aggs: Aggregates) -> str:
    return json_document(
        aggs.n_records, ",".join(map(entry_json, aggs.entries)).encode("utf-8")
    ).decode("utf-8")
