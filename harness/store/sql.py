"""SQL for DuckDB without values quoted into its text: a statement's values go to it as
named parameters (``Params``). Only where DuckDB takes no parameter, a file path in a view's
table function or in COPY ... TO, is the path written into the text, by ``path_literal``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["Params", "path_literal"]


class Params:
    """The values of one statement's named parameters: ``p(value)`` is the placeholder of
    ``value`` in the text (``$p0``, ``$p1``, ...; a value used twice has one), and
    ``p.values`` what ``con.execute(sql, p.values)`` binds. DuckDB takes a parameter's value
    as a constant when it plans the statement: a pattern is compiled once, not per row."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._names: dict[tuple[str, str], str] = {}

    def __call__(self, value: str | int | float | Sequence[str]) -> str:
        if not isinstance(value, (str, int, float)):
            value = list(value)
        key = (type(value).__name__, repr(value))
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"p{len(self._names)}"
            self.values[name] = value
        return "$" + name


def path_literal(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> str:
    """A file path (or a list of them) as a SQL string literal (or a list of literals), for
    where DuckDB takes no parameter. Any path the file system allows is written exactly:
    quotes are doubled, a newline or backslash stays as it is (DuckDB's string literals
    have no escapes); NUL, which no path holds, is refused."""
    if not isinstance(path, (str, os.PathLike)):
        return "[" + ", ".join(path_literal(p) for p in path) + "]"
    text = os.fspath(path)
    if "\0" in text:
        raise ValueError(f"a path with a NUL character: {text!r}")
    return "'" + text.replace("'", "''") + "'"
