"""Aggregates -> one PNG heatmap per entry (variants x environments, a band per
device/precision, colours as in the HTML report).

Drawn with Pillow, which matplotlib itself depends on, rather than with matplotlib's
figure machinery: a labelled matplotlib figure costs 80-140 ms to save, i.e. 4-6 minutes
for 2,500 entries, while this costs about a millisecond and gives the same picture.
Pillow writes no timestamps, so the same aggregates give the same bytes.
"""

from __future__ import annotations

import io
from functools import cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from harness.aggregate import EntryAggregate
from harness.render import COLOR, EMPTY_COLOR, LABEL, STATUSES

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


_PALETTE = np.array([_rgb(COLOR[s]) for s in STATUSES] + [_rgb(EMPTY_COLOR)], dtype=np.uint8)
_EMPTY = len(STATUSES)
_INDEX = {s: i for i, s in enumerate(STATUSES)}


def _text_width(text: str) -> int:
    return int(_font().getlength(text)) + 1


def render_png(agg: EntryAggregate) -> bytes:
    font = _font()
    names = [v.name for v in agg.variants] or ["(no variants)"]
    slices = agg.slices
    n_rows, n_cols = len(names), max(1, len(agg.envs))
    label_w = max(_text_width(n) for n in names) + PAD
    col_labels = [e.label() for e in agg.envs]
    col_h = (max((_text_width(t) for t in col_labels), default=0)) + PAD
    band_h = LINE + n_rows * CELL + PAD
    legend_items = [(s, LABEL[s]) for s in STATUSES]
    legend_w = sum(CELL + 4 + _text_width(t) + 10 for _, t in legend_items)
    grid_w = n_cols * CELL
    width = max(PAD + label_w + grid_w + PAD, PAD + legend_w, PAD + _text_width(agg.id) + PAD)
    height = PAD + LINE + PAD + max(1, len(slices)) * band_h + col_h + PAD + CELL + PAD

    # cell colours as one index array, coloured and scaled up with numpy
    top = PAD + LINE + PAD
    index = np.full((max(1, len(slices)) * (n_rows + 1), n_cols), _EMPTY, dtype=np.uint8)
    for si, (d, p) in enumerate(slices):
        for ri, v in enumerate(agg.variants):
            for ci, e in enumerate(agg.envs):
                value = agg.cells.get((v.name, e.id, d, p))
                if value is not None:
                    index[si * (n_rows + 1) + ri + 1, ci] = _INDEX[value.status]
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    x0 = PAD + label_w
    for si in range(max(1, len(slices))):
        y = top + si * band_h + LINE
        block = index[si * (n_rows + 1) + 1 : si * (n_rows + 1) + 1 + n_rows]
        pixels = np.repeat(np.repeat(_PALETTE[block], CELL, axis=0), CELL, axis=1)
        pixels[CELL - 1 :: CELL, :, :] = 255  # white grid lines
        pixels[:, CELL - 1 :: CELL, :] = 255
        img[y : y + n_rows * CELL, x0 : x0 + grid_w] = pixels
    # legend swatches
    ly = height - PAD - CELL
    lx = PAD
    swatches = []
    for s, text in legend_items:
        img[ly : ly + CELL - 2, lx : lx + CELL - 2] = _PALETTE[_INDEX[s]]
        swatches.append((lx + CELL + 2, text))
        lx += CELL + 4 + _text_width(text) + 10

    im = Image.fromarray(img, "RGB")
    draw = ImageDraw.Draw(im)
    draw.text((PAD, PAD), agg.id, fill=(0, 0, 0), font=font)
    for si, (d, p) in enumerate(slices):
        y = top + si * band_h
        draw.text((x0, y), f"{d} / {p}", fill=(0, 0, 0), font=font)
        for ri, name in enumerate(names):
            draw.text((PAD, y + LINE + ri * CELL + 1), name, fill=(0, 0, 0), font=font)
    for x, text in swatches:
        draw.text((x, ly), text, fill=(0, 0, 0), font=font)
    if col_labels:
        # environment labels: drawn once on a horizontal strip, turned upright in one go
        strip = Image.new("RGB", (col_h, grid_w), (255, 255, 255))
        sdraw = ImageDraw.Draw(strip)
        for ci, text in enumerate(col_labels):  # turned clockwise: the last row goes left
            sdraw.text((2, (len(col_labels) - 1 - ci) * CELL), text, fill=(0, 0, 0), font=font)
        im.paste(strip.transpose(Image.Transpose.ROTATE_270), (x0, top + max(1, len(slices)) * band_h))
    out = io.BytesIO()
    im.save(out, format="PNG", optimize=False)
    return out.getvalue()
