"""Draw docs/architecture.svg: the stages of the harness in order, each with its module; the
report's steps in order, and the three caches under the steps that keep them. Plain SVG written from
Python (no graphviz): ``python scripts/architecture_svg.py`` writes it, ``--check`` exits 1
where the committed file differs (tests/test_docs.py runs it)."""

from __future__ import annotations

import argparse
import sys
from html import escape
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "docs" / "architecture.svg"

# (stage, its module) in the order a run goes through them
STAGES = (
    ("matrix", "spec/matrix.py"),
    ("entries", "spec/entries.py"),
    ("plan", "execute/plan.py"),
    ("environments", "envs/backends.py"),
    ("runs", "execute/steps.py"),
    ("store", "store/jsonl.py"),
    ("aggregates", "aggregate/cells.py"),
    ("reports", "report/pipeline.py"),
)
# the report's steps (harness/report/pipeline.py) in order: (what, its module)
REPORT = (
    ("nothing changed?", "report/uptodate.py"),
    ("changed since a state", "store/changes.py"),
    ("aggregate, render entries", "report/outputs.py"),
    ("splice whole files", "report/assembly.py"),
    ("write back documents", "report/writeback.py"),
)
# (cache, its module, where it lives, the report step whose cache it is)
CACHES = (
    ("store snapshots", "store/snapshot.py", "results/.cache/snapshot", 1),
    ("rendered entries", "report/cache.py", "results/.cache/render", 2),
    ("assembly of whole files", "report/assembly.py", "results/.cache/report-assembly.json", 3),
)

_W, _H = 1180, 400
_BOX_W, _BOX_H, _GAP, _TOP = 128, 58, 15, 40
_STEP_W, _STEP_GAP, _STEP_TOP = 210, 22, 170
_CACHE_H, _CACHE_TOP = 62, 290
_FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def _box(x: float, y: float, w: float, h: float, fill: str, lines: tuple[str, ...]) -> str:
    out = [
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="6" fill="{fill}" stroke="#444"/>'
    ]
    step = 15
    first = y + h / 2 - step * (len(lines) - 1) / 2 + 4
    for i, text in enumerate(lines):
        size, weight = (13, "bold") if i == 0 else (11, "normal")
        out.append(
            f'<text x="{x + w / 2:.0f}" y="{first + i * step:.0f}" font-size="{size}" '
            f'font-weight="{weight}" text-anchor="middle" {_FONT}>{escape(text)}</text>'
        )
    return "\n".join(out)


def _arrow(x1: float, y1: float, x2: float, y2: float, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return (
        f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#444" '
        f'stroke-width="1.5" marker-end="url(#arrow)"{dash}/>'
    )


def svg() -> str:
    """The picture, as text: the same input gives the same bytes."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="20" y="24" font-size="14" font-weight="bold" {_FONT}>'
        "The stages of a run, each with a module of harness/</text>",
    ]
    for i, (stage, module) in enumerate(STAGES):
        x = 20 + i * (_BOX_W + _GAP)
        parts.append(_box(x, _TOP, _BOX_W, _BOX_H, "#e8f0fb", (stage, module)))
        if i:
            parts.append(_arrow(x - _GAP, _TOP + _BOX_H / 2, x, _TOP + _BOX_H / 2))
    parts.append(
        f'<text x="20" y="{_STEP_TOP - 16}" font-size="14" font-weight="bold" {_FONT}>'
        "The report (report/pipeline.py), step by step, and the cache each step keeps</text>"
    )
    for i, (step, module) in enumerate(REPORT):
        x = 20 + i * (_STEP_W + _STEP_GAP)
        parts.append(_box(x, _STEP_TOP, _STEP_W, _BOX_H, "#fdf3d8", (step, module)))
        if i:
            parts.append(_arrow(x - _STEP_GAP, _STEP_TOP + _BOX_H / 2, x, _STEP_TOP + _BOX_H / 2))
    for cache, module, where, step in CACHES:
        x = 20 + step * (_STEP_W + _STEP_GAP)
        parts.append(_box(x, _CACHE_TOP, _STEP_W, _CACHE_H, "#e6f4e6", (cache, module, where)))
        middle = x + _STEP_W / 2
        parts.append(_arrow(middle, _STEP_TOP + _BOX_H, middle, _CACHE_TOP, dashed=True))
    parts.append(
        f'<text x="20" y="{_H - 12}" font-size="11" {_FONT}>Every cache is only a cache: '
        "report --no-cache neither reads nor writes them, --check writes none, and deleting "
        "results/.cache is always safe. Drawn by scripts/architecture_svg.py.</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def modules() -> list[str]:
    """Every module the picture names, as a path under the repository."""
    named = [m for _, m in STAGES] + [m for _, m in REPORT] + [m for _, m, _, _ in CACHES]
    return [f"harness/{m}" for m in named]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 where the file differs")
    args = parser.parse_args(argv)
    text = svg()
    if args.check:
        if not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} is stale: run python scripts/architecture_svg.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
