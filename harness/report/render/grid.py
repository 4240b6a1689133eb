"""The torch x lightning grid of one variant on one device/precision, and where along each
axis an outcome first and last appears (the layout of Lightning's own compatibility table).

Pure functions over plain values: the caller passes one ``GridCell`` per measured
environment (a python version may split one torch x lightning pair into several
environments: their statuses are joined, never one hidden behind another).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

__all__ = ["AxisRange", "Grid", "GridCell", "axis_ranges", "make_grid", "release_order"]


@dataclass(frozen=True)
class GridCell:
    torch: str  # the public release, e.g. "2.4.1" (local labels such as +cu121 dropped)
    lightning: str
    status: str  # an outcome value, or "flaky"
    text: str  # what the cell shows (a glyph, or a glyph per trial outcome)


@dataclass(frozen=True)
class Grid:
    torches: tuple[str, ...]  # rows, oldest first
    lightnings: tuple[str, ...]  # columns, oldest first
    cells: dict[tuple[str, str], tuple[GridCell, ...]]  # (torch, lightning) -> measured

    def text(self, torch: str, lightning: str) -> str:
        """The cell's text; "" where the pair was not measured (never inferred)."""
        return " ".join(c.text for c in self.cells.get((torch, lightning), ()))


@dataclass(frozen=True)
class AxisRange:
    """Along one axis at a fixed value of the other: where ``status`` was seen."""

    fixed: str  # the fixed version (a torch release for a per-torch range)
    measured: tuple[str, ...]  # the versions measured along the axis, oldest first
    hits: tuple[str, ...]  # those where the status was seen in every trial

    @property
    def first(self) -> str | None:
        return self.hits[0] if self.hits else None

    @property
    def last(self) -> str | None:
        return self.hits[-1] if self.hits else None

    @property
    def contiguous(self) -> bool:
        """False when the status comes and goes along the axis (e.g. fixed, then back)."""
        if not self.hits:
            return True
        i, j = self.measured.index(self.hits[0]), self.measured.index(self.hits[-1])
        return list(self.measured[i : j + 1]) == list(self.hits)


@functools.lru_cache(maxsize=4096)  # the same few releases in every grid of every entry
def _key(text: str) -> tuple[int, Version | str]:
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


def release_order(versions: Iterable[str]) -> tuple[str, ...]:
    """The distinct releases, oldest first (a text that is not a version after them all)."""
    return tuple(sorted(set(versions), key=_key))


def make_grid(cells: Iterable[GridCell]) -> Grid:
    by_pair: dict[tuple[str, str], list[GridCell]] = defaultdict(list)
    for c in cells:
        by_pair[(c.torch, c.lightning)].append(c)
    torches = release_order(t for t, _ in by_pair)
    lightnings = release_order(lit for _, lit in by_pair)
    return Grid(torches, lightnings, {k: tuple(v) for k, v in by_pair.items()})


def _ranges(
    grid: Grid, status: str, fixed_axis: Sequence[str], along: Sequence[str], per_torch: bool
) -> tuple[AxisRange, ...]:
    out = []
    for fixed in fixed_axis:
        measured, hits = [], []
        for v in along:
            pair = (fixed, v) if per_torch else (v, fixed)
            seen = grid.cells.get(pair)
            if not seen:
                continue
            measured.append(v)
            if all(c.status == status for c in seen):
                hits.append(v)
        if measured:
            out.append(AxisRange(fixed, tuple(measured), tuple(hits)))
    return tuple(out)


def axis_ranges(
    grid: Grid, status: str = "reproduced"
) -> tuple[tuple[AxisRange, ...], tuple[AxisRange, ...]]:
    """(per torch: along lightning; per lightning: along torch) where ``status`` was seen."""
    return (
        _ranges(grid, status, grid.torches, grid.lightnings, per_torch=True),
        _ranges(grid, status, grid.lightnings, grid.torches, per_torch=False),
    )
