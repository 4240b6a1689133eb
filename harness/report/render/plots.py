"""Aggregates -> one PNG heatmap per entry (variants x environments, a band per
device/precision, colours as in the HTML report).

Drawn with Pillow, which matplotlib itself depends on, rather than with matplotlib's
figure machinery: a labelled matplotlib figure costs 80-140 ms to save, i.e. 4-6 minutes
for 2,500 entries, while this costs about a millisecond and gives the same picture.
The PNG itself is written here (no timestamps), so the same aggregates give the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from functools import cache, lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from harness.aggregate import EntryAggregate
from harness.report.render import COLOR, EMPTY_COLOR, LABEL, STATUSES

__all__ = ["render_png"]

CELL = 14  # pixels per cell side
PAD = 6
LINE = 13  # text line height


@cache
def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default()


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


# A palette image of 16 colours, written 4 bits a pixel (half the bytes to compress, the
# larger part of the cost). Indices: the statuses, then white, then grey levels for
# anti-aliased text (the last one black).
_INDEX = {s: i for i, s in enumerate(STATUSES)}
_WHITE = len(STATUSES)
_GREY0 = _WHITE + 1
_GREYS = 16 - _GREY0
_PALETTE_RGB = [_rgb(COLOR[s]) for s in STATUSES] + [_rgb(EMPTY_COLOR)]
_PALETTE_RGB += [(255 - 255 * (g + 1) // _GREYS,) * 3 for g in range(_GREYS)]
_PALETTE = [c for rgb in _PALETTE_RGB for c in rgb]
assert len(_PALETTE_RGB) == 16 and _GREYS >= 4
# text coverage (0..255) -> palette index; 0 marks "leave the background"
_COVER = np.array(
    [0] + [_GREY0 + min(_GREYS - 1, v * _GREYS // 256) for v in range(1, 256)], dtype=np.uint8
)


@lru_cache(maxsize=8192)
def _text(text: str) -> np.ndarray:
    """The text as palette indices (0 = background); labels repeat across entries."""
    font = _font()
    left, top, right, bottom = font.getbbox(text)
    im = Image.new("L", (max(1, right + 1), LINE), 0)
    ImageDraw.Draw(im).text((0, 0), text, fill=255, font=font)
    return _COVER[np.asarray(im)]


@lru_cache(maxsize=256)
def _column_labels(labels: tuple[str, ...]) -> np.ndarray:
    """Environment labels, read top to bottom, one per CELL-wide column."""
    masks = [_text(t) for t in labels]
    height = max(m.shape[1] for m in masks) + 2
    strip = np.zeros((len(labels) * CELL, height), dtype=np.uint8)
    n = len(labels)
    for i, m in enumerate(masks):
        # each label drawn lying down, last first; turning the strip clockwise puts it last
        strip[(n - 1 - i) * CELL : (n - 1 - i) * CELL + min(CELL, m.shape[0]), : m.shape[1]] = m[
            :CELL
        ]
    return np.ascontiguousarray(np.rot90(strip, k=-1))


def _blit(canvas: np.ndarray, mask: np.ndarray, y: int, x: int) -> None:
    h = min(mask.shape[0], canvas.shape[0] - y)
    w = min(mask.shape[1], canvas.shape[1] - x)
    if h <= 0 or w <= 0:
        return
    region = canvas[y : y + h, x : x + w]
    m = mask[:h, :w]
    np.copyto(region, m, where=m != 0)


def render_png(agg: EntryAggregate) -> bytes:
    names = [v.name for v in agg.variants] or ["(no variants)"]
    slices = agg.slices or (("", ""),)
    env_ids = [e.id for e in agg.envs]
    title = _text(agg.id)
    canvas, x0, y0 = _frame(
        tuple(names), tuple(e.label() for e in agg.envs), tuple(slices), title.shape[1]
    )
    canvas = canvas.copy()
    _blit(canvas, title, PAD, PAD)
    n_rows, n_cols = len(names), len(env_ids)
    if n_cols:
        band_h = LINE + n_rows * CELL + PAD
        # each cell's colour once (not once a slice and variant looked up)
        get = {key: _INDEX[value.status] for key, value in agg.cells.items()}.get
        for si, (d, p) in enumerate(slices):
            block = np.full((n_rows, n_cols), _WHITE, dtype=np.uint8)
            for ri, v in enumerate(agg.variants):
                name = v.name
                block[ri] = [get((name, env, d, p), _WHITE) for env in env_ids]
            pixels = np.repeat(np.repeat(block, CELL, axis=0), CELL, axis=1)
            pixels[CELL - 1 :: CELL, :] = _WHITE  # grid lines
            pixels[:, CELL - 1 :: CELL] = _WHITE
            y = y0 + si * band_h + LINE
            canvas[y : y + n_rows * CELL, x0 : x0 + n_cols * CELL] = pixels
    return _png(canvas)


@lru_cache(maxsize=64)
def _frame(
    names: tuple[str, ...],
    labels: tuple[str, ...],
    slices: tuple[tuple[str, str], ...],
    title_w: int,
) -> tuple[np.ndarray, int, int]:
    """Everything but the title and the cells, which entries mostly share: (the canvas,
    left and top of the first band's grid)."""
    n_rows, n_cols = len(names), len(labels)
    label_w = max(_text(n).shape[1] for n in names) + PAD
    cols = _column_labels(labels) if n_cols else np.zeros((0, 0), np.uint8)
    band_h = LINE + n_rows * CELL + PAD
    legend = [(s, _text(LABEL[s])) for s in STATUSES]
    legend_w = sum(CELL + 4 + m.shape[1] + 10 for _, m in legend)
    grid_w = n_cols * CELL
    width = max(PAD + label_w + grid_w + PAD, PAD + legend_w, PAD + title_w + PAD)
    top = PAD + LINE + PAD
    height = top + len(slices) * band_h + cols.shape[0] + PAD + CELL + PAD
    canvas = np.full((height, width), _WHITE, dtype=np.uint8)
    x0 = PAD + label_w
    for si, (d, p) in enumerate(slices):
        y = top + si * band_h
        _blit(canvas, _text(f"{d} / {p}"), y, x0)
        y += LINE
        for ri, name in enumerate(names):
            _blit(canvas, _text(name), y + ri * CELL + 1, PAD)
    if n_cols:
        _blit(canvas, cols, top + len(slices) * band_h, x0)
    ly, lx = height - PAD - CELL, PAD
    for s, m in legend:
        canvas[ly : ly + CELL - 2, lx : lx + CELL - 2] = _INDEX[s]
        _blit(canvas, m, ly, lx + CELL + 2)
        lx += CELL + 4 + m.shape[1] + 10
    canvas.flags.writeable = False  # shared: render_png draws on a copy
    return canvas, x0, top


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PLTE = _chunk(b"PLTE", bytes(_PALETTE))
_IEND = _chunk(b"IEND", b"")


def _png(canvas: np.ndarray) -> bytes:
    """A palette image as PNG: 4 bits a pixel, no row filter, zlib level 1 (fast; a flat
    picture compresses well anyway). Written here rather than by Pillow, whose encoder
    costs as much again around the same zlib call."""
    height, width = canvas.shape
    if width % 2:
        canvas = np.pad(canvas, ((0, 0), (0, 1)))
    rows = np.zeros(
        (height, canvas.shape[1] // 2 + 1), dtype=np.uint8
    )  # each row starts with its filter type, 0
    rows[:, 1:] = (canvas[:, 0::2] << 4) | canvas[:, 1::2]
    ihdr = struct.pack(">IIBBBBB", width, height, 4, 3, 0, 0, 0)
    return b"".join(
        (
            _SIGNATURE,
            _chunk(b"IHDR", ihdr),
            _PLTE,
            _chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)),
            _IEND,
        )
    )
