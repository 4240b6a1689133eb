"""A JSON document the harness is handed (a knowledge-base record given to `new`, one kept
beside an entry), read strictly: bounded in size before it is parsed, every key once (the
last of two did win), no NaN or infinity, and no text a page or a terminal cannot
take (a lone surrogate, a control character other than tab and newline). Imports nothing of
the harness."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_RECORD_BYTES", "JsonRefused", "strict_loads"]

MAX_RECORD_BYTES = 1 << 20  # a deadends.dev record is a few KB
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


class JsonRefused(ValueError):
    """``str()`` says what is wrong and where (a key's path)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonRefused(f"the key {key!r} is given twice in one object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number")


def strict_loads(text: str) -> Any:
    """``text`` parsed strictly; raises JsonRefused (or json's ValueError) saying why."""
    if len(text) > MAX_RECORD_BYTES:
        raise JsonRefused(f"longer than {MAX_RECORD_BYTES} characters")
    data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # no recursion: the depth is bounded by the caller, this never recurses
        where, value = stack.pop()
        if isinstance(value, str):
            bad = _NOT_TEXT.search(value)
            if bad is not None:
                what = (
                    "a lone surrogate"
                    if "\ud800" <= bad.group() <= "\udfff"
                    else "a control character"
                )
                raise JsonRefused(
                    f"{where or 'the document'} holds U+{ord(bad.group()):04X} ({what}); remove it"
                )
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((f"{where}.{k}" if where else k, v))
                stack.append((f"{where}.{k} (a key)" if where else f"{k} (a key)", k))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return data
