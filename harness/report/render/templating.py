"""The Jinja2 environment of the HTML renderers: the markup is in templates/, the page's
stylesheet and script in static/ (put into the page whole), read from the package as
installed (pyproject.toml's package-data).

Escaping is the XSS defence. Autoescape is on, and every ``{{ value }}`` is escaped by the
environment's ``finalize`` as Python's ``html.escape(quote=True)`` writes it (``&#x27;``,
``&quot;``: the bytes the page has always had); a value goes in as it is only when it is
markup already (``Markup``: what a template or ``script_json`` made). Jinja's own escaping
(``|e``, ``|join``, ``|replace``, ``~``) writes quotes as other entities: keep it off text.

Whitespace: a template under templates/ is written one element a line, indented for the
reader, while the page stays the few long lines it has always been: its lines are joined,
the spaces around each line break dropped with it (``_JoinLines``). So a space
between two elements is written inside a line, and a line break that the page keeps is
written ``{{ "\\n" }}``. Files under static/ are left as they are.
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
from pathlib import Path
from typing import Any

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

from harness.report.render import entry_slug

__all__ = ["ROOT", "environment", "escape_text", "template_digest"]

ROOT = Path(__file__).parent  # holds templates/ and static/
_JOINED = "templates/"
_LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*")


def escape_text(value: Any) -> Markup:
    """``value`` as it goes on the page: markup as it is, anything else escaped."""
    if hasattr(value, "__html__"):
        return value  # type: ignore[no-any-return]
    return Markup(html.escape(str(value), quote=True))


class _JoinLines(Extension):
    """Joins a template's lines (see the module's docstring), before Jinja reads it."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is None or not name.startswith(_JOINED):
            return source
        return _LINE_BREAK.sub("", source.strip("\n"))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one environment (templates are compiled once per process, on first use)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROOT),
        autoescape=True,
        finalize=escape_text,
        undefined=jinja2.StrictUndefined,  # a misspelt name fails the report, not the page
        extensions=[_JoinLines],
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.filters["slug"] = entry_slug  # an entry's id as its outputs' file names write it
    return env


def template_digest() -> str:
    """A digest of every file under templates/ and static/, by name and bytes (the render
    cache's key covers them: harness/report/cache.py)."""
    root = ROOT  # read when called: the tests point it at a copy
    h = hashlib.sha256()
    for path in sorted(p for d in ("templates", "static") for p in (root / d).rglob("*")):
        if path.is_file():
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
