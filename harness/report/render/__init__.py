"""Renderers: aggregates -> Markdown, HTML, JSON and PNG. Pure functions returning text or
bytes; report.py decides where they go. What they share (glyphs, colours, names) is here."""

from __future__ import annotations

from harness.aggregate import FLAKY
from harness.outcomes import Outcome

__all__ = ["GLYPH", "COLOR", "LABEL", "STATUSES", "entry_slug"]

# every status a cell can show, in legend order
STATUSES: tuple[str, ...] = (*(o.value for o in Outcome), FLAKY)

GLYPH = {
    Outcome.REPRODUCED.value: "✖",
    Outcome.RELATED.value: "◆",  # the variant's own expected error, not the documented one
    Outcome.OK.value: "✔",
    Outcome.OTHER_ERROR.value: "!",
    Outcome.WRONG_RESULT.value: "≠",
    Outcome.UNSUPPORTED.value: "–",
    Outcome.SKIPPED.value: "·",
    Outcome.CRASHED.value: "✸",  # glyphs that plain fonts have: an emoji shows as a box in a headless browser
    Outcome.TIMEOUT.value: "⊘",
    Outcome.ENV_FAILED.value: "⚠",
    FLAKY: "~",
}

LABEL = {s: s.replace("_", " ") for s in STATUSES}

# colour-blind-safe-ish palette; reproduced (the documented error) stands out in red
COLOR = {
    Outcome.REPRODUCED.value: "#d7301f",
    Outcome.RELATED.value: "#e7298a",
    Outcome.OK.value: "#1a9850",
    Outcome.OTHER_ERROR.value: "#fc8d59",
    Outcome.WRONG_RESULT.value: "#984ea3",
    Outcome.UNSUPPORTED.value: "#bdbdbd",
    Outcome.SKIPPED.value: "#e0e0e0",
    Outcome.CRASHED.value: "#67001f",
    Outcome.TIMEOUT.value: "#4575b4",
    Outcome.ENV_FAILED.value: "#8c6d31",
    FLAKY: "#fee08b",
}
EMPTY_COLOR = "#ffffff"


def entry_slug(entry_id: str) -> str:
    """File name stem of an entry's outputs: 'pytorch/x-y' -> 'pytorch__x-y'."""
    return entry_id.replace("/", "__")
