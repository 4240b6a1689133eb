"""Aggregates -> compat.json, for machines. ``schema`` is bumped on incompatible change."""

from __future__ import annotations

import json

from harness.aggregate import Aggregates

__all__ = ["SCHEMA", "render_json"]

SCHEMA = 1


def render_json(aggs: Aggregates) -> str:
    data = aggs.to_dict()
    assert data["schema"] == SCHEMA
    # compact on purpose: the C encoder only runs without indent (10x faster on big results)
    # check_circular=False: the aggregates are trees; skipping the check changes no byte
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False) + "\n"
