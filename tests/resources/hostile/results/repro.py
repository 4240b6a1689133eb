"""Hostile reproducers: each writes the harness's result file itself (found in the caller
child.py's frame, in a fresh interpreter and in a warm worker's fork alike) and exits
before the child can, or raises text no encoder takes."""

import json
import os
import sys


def _result_path():
    frame = sys._getframe(1)
    while frame is not None:
        if "result_path" in frame.f_locals:
            return frame.f_locals["result_path"]
        frame = frame.f_back
    raise RuntimeError("child.py's result_path is not on the stack")


def _write_own(text):
    with open(_result_path(), "w") as f:
        f.write(text)
    os._exit(0)


def bogus_outcome(device, precision):
    _write_own(json.dumps({"protocol": 1, "outcome": "bogus", "checks": {}}))


def list_checks(device, precision):
    _write_own(json.dumps({"protocol": 1, "outcome": "ok", "checks": [1, 2]}))


def not_json(device, precision):
    _write_own("{this is not json")


def surrogate(device, precision):
    raise ValueError(b"file \xff name".decode("utf-8", "surrogateescape"))


def fine(device, precision):
    return {"moved": {"ok": True, "detail": "fine"}}


VARIANTS = {
    "bogus-outcome": bogus_outcome,
    "list-checks": list_checks,
    "not-json": not_json,
    "surrogate": surrogate,
    "fine": fine,
}
