"""Hostile reproducers: each writes the harness's result file itself (child.py passes its
path as argv[2]) and exits before the child can, or raises text no encoder takes."""

import json
import os
import sys


def _write_own(text):
    with open(sys.argv[2], "w") as f:
        f.write(text)
    os._exit(0)


def run(variant, device, precision):
    if variant == "bogus-outcome":
        _write_own(json.dumps({"protocol": 1, "outcome": "bogus", "checks": {}}))
    if variant == "list-checks":
        _write_own(json.dumps({"protocol": 1, "outcome": "ok", "checks": [1, 2]}))
    if variant == "not-json":
        _write_own("{this is not json")
    if variant == "surrogate":
        raise ValueError(b"file \xff name".decode("utf-8", "surrogateescape"))
    return {"moved": {"ok": True, "detail": "fine"}}
