"""Aggregates -> index.html, one page with a row per entry; the section files
(sections/NNNN.js) with each entry's section (heatmaps, rates and verdicts); and the data
files (cells/NNNN.js) with the details of each cell's trials.

The page is what a reader opens, and holds what is read first: the counts, the box, a row
per entry (at 2,500 entries a page with every section would be 60 MB, too slow to
open). An entry's section is loaded when the entry is opened (its row, a #e-<slug> link),
from its section file (``SECTION_FILE_ENTRIES`` consecutive entries a file): a line per
entry, ``harnessSection(slug, markup)``, the markup its template's output. The trial
details (exceptions, machines, versions, durations) are wanted for one cell at a time, so
the page loads them when a cell is first hovered or clicked. Both through a ``<script src>``
element: that works from file:// as well as from a server, and nothing comes from the
network. A data
file holds ``CELL_FILE_ENTRIES`` consecutive entries (in id order): a few files rather
than one per entry, since creating a file costs more than writing its bytes.

The markup is in templates/ (page.html, entry.html, contents_row.html, heatmap.html), the
page's stylesheet and script in static/ (report.css, report.js), rendered by Jinja2
(render/templating.py); this module chooses what each template is given.

Safety: the templates autoescape every run-derived text (as ``html.escape`` does); the data
files are JSON (in function calls) with ``<``, ``>`` and ``&`` written as ``\\u003c``-style
escapes, and the page's script puts their texts on the page with ``textContent`` only,
never ``innerHTML``. A section file's markup is the template's, escaped as the page's own;
the script parses it inert (``DOMParser``: no script runs) and moves the section in.

The page is put together from parts (``html_part``), each a run of consecutive entries, so
that the entries can be rendered in several processes (and cached: harness/report/cache.py);
a part's rows and section files' lines are its entries' templates' output, one after
another. ``render_html`` is the whole page in one, ``section_files`` its section files.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from markupsafe import Markup

from harness.aggregate import (
    VERDICTS,
    Aggregates,
    EntryAggregate,
    EnvInfo,
    Texts,
    VariantAggregate,
    documented_failure_text,
    slice_id,
)
from harness.aggregate.model import CellKey
from harness.report.render import COLOR, GLYPH, LABEL, STATUSES, entry_slug
from harness.report.render.columns import (
    Group,
    env_columns,
    join_cells,
    public_version,
    version_key,
)
from harness.report.render.jsonout import compact_json
from harness.report.render.templating import environment

__all__ = [
    "ANSWERS_FILE",
    "HtmlPart",
    "assemble_html",
    "CELL_FILE_ENTRIES",
    "SECTION_FILE_ENTRIES",
    "cell_file_name",
    "cell_files",
    "data_files",
    "html_part",
    "render_cell_data",
    "render_html",
    "script_json",
    "section_file_name",
    "section_files",
    "variant_title",
    "word_pool",
]

_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_OUTCOME_INDEX = {
    s: i for s, i in _STATUS_INDEX.items()
}  # Outcome is a str: its value hashes alike
_VERDICTS = VERDICTS


def script_json(data: Any) -> str:
    """JSON that is inert inside a <script> element whatever its strings hold."""
    text = compact_json(data)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _js_string(text: str) -> str:
    """``text`` as a JavaScript string literal in a script file of its own (never inside a
    <script> element, where ``script_json``'s escapes are needed): markup stays as it is,
    a third smaller than with ``<`` and ``>`` escaped."""
    quoted = compact_json(text)
    return quoted.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


CELL_FILE_ENTRIES = 64
# an entry's section is some 25 kB at 2,500 entries (59 environments): a reader who opens one
# loads 16 of them
SECTION_FILE_ENTRIES = 16
ANSWERS_FILE = "answers.js"  # the box's data (render/answers.py), relative to index.html


def cell_file_name(index: int) -> str:
    """The data file of the entry at ``index`` (in id order), relative to index.html (the
    page's script names it alike: report.js's ``fileOf``)."""
    return f"cells/{index // CELL_FILE_ENTRIES:04d}.js"


def section_file_name(index: int) -> str:
    """The section file of the entry at ``index`` (in id order), relative to index.html: its
    section of the page, which the page loads when the entry is opened (the page's script
    names it alike: report.js's ``fileOf``)."""
    return f"sections/{index // SECTION_FILE_ENTRIES:04d}.js"


def _machine_text(p: dict[str, str]) -> str:
    parts = [p.get("host", "") or "unknown host"]
    hw = ", ".join(x for x in (p.get("os", ""), p.get("cpu", ""), p.get("gpu", "")) if x)
    if hw:
        parts.append(hw)
    if p.get("driver") or p.get("cuda"):
        parts.append(f"driver {p.get('driver', '') or '?'}, CUDA {p.get('cuda', '') or '?'}")
    if p.get("harness_version") or p.get("git_rev"):
        parts.append(
            f"harness {p.get('harness_version', '') or '?'} @ {p.get('git_rev', '') or '?'}"
        )
    return "; ".join(parts)


def _versions_text(v: dict[str, str]) -> str:
    return ", ".join(f"{k} {v[k]}" for k in sorted(v))


# statuses whose colour is dark enough for white text
_TEXT_ON_DARK = ("reproduced", "related", "crashed", "timeout", "wrong_result", "env_failed", "ok")


@dataclass(frozen=True)
class _Status:
    """A status as the page's legend and stylesheet show it."""

    index: int  # its class: .s{index}
    colour: str
    text_colour: str
    glyph: str
    label: str


_LEGEND = tuple(
    _Status(i, COLOR[s], "#fff" if s in _TEXT_ON_DARK else "#000", GLYPH[s], LABEL[s])
    for s, i in _STATUS_INDEX.items()
)


@dataclass(frozen=True)
class _Count:
    name: str
    count: int


@dataclass(frozen=True)
class HtmlPart:
    """The page's share of a run of consecutive entries: what the header counts, the rows
    of the contents table and the entries' lines of the section files."""

    entries: int
    runs: int
    verdicts: tuple[int, ...]  # per verdict, in VERDICTS order
    slices: frozenset[str]
    contents: str
    sections: str  # a line per entry: harnessSection(slug, its section's markup)
    torches: frozenset[str] = frozenset()  # the public releases measured (the box's lists)
    lightnings: frozenset[str] = frozenset()


def _verdict_counts(a: EntryAggregate) -> list[int]:
    c = [0] * len(_VERDICTS)
    for v in a.verdicts:
        c[_VERDICTS.index(v.verdict)] += 1
    return c


def html_part(
    entries: Sequence[EntryAggregate],
    torch_only: Collection[str] = (),
    corrections: Mapping[str, tuple[str, str]] | None = None,
) -> HtmlPart:
    """The part of ``entries`` (consecutive entries; what it holds does not depend on where
    they stand among all entries: the page finds an entry's section and data files from its
    row's place, report.js's ``fileOf``). ``torch_only``: the ids of the entries whose
    reproducers import no lightning (drawn with one column per torch release);
    ``corrections``: entry id -> (knowledge-base id, domain) of the entries whose record
    `corrections` corrects or says why not."""
    row = environment().get_template("templates/contents_row.html")
    section = environment().get_template("templates/entry.html")
    contents: list[str] = []
    sections: list[str] = []
    totals = [0] * len(_VERDICTS)
    for a in entries:
        c = _verdict_counts(a)
        totals = [t + x for t, x in zip(totals, c, strict=True)]
        slug = entry_slug(a.id)
        contents.append(row.render(a=a, slug=slug, verdict_counts=c))
        context = _section(a, slug, a.id in torch_only)
        context["correction"] = (corrections or {}).get(a.id)
        markup = _js_string(section.render(context))
        sections.append(f"harnessSection({script_json(slug)},{markup});\n")
    return HtmlPart(
        entries=len(entries),
        runs=sum(a.n_runs for a in entries),
        verdicts=tuple(totals),
        slices=frozenset(slice_id(s) for a in entries for s in a.slices),
        contents="".join(contents),
        sections="".join(sections),
        torches=frozenset(public_version(e.torch) for a in entries for e in a.envs),
        lightnings=frozenset(
            public_version(e.lightning) for a in entries for e in a.envs if e.lightning
        ),
    )


def assemble_html(parts: Sequence[HtmlPart], prelude: str = "") -> str:
    """The page from the parts of all entries, in entry order. ``prelude``: HTML put first
    in <main> (``report --since REV``: the cells changed since REV, harness/report/lead.py;
    the knowledge-base domains' sections)."""
    totals = [sum(p.verdicts[i] for p in parts) for i in range(len(_VERDICTS))]
    return (
        environment()
        .get_template("templates/page.html")
        .render(
            n_entries=sum(p.entries for p in parts),
            n_runs=sum(p.runs for p in parts),
            verdicts=[_Count(k, c) for k, c in zip(_VERDICTS, totals, strict=True)],
            slices=sorted(frozenset().union(*(p.slices for p in parts))),
            torches=sorted(frozenset().union(*(p.torches for p in parts)), key=version_key),
            lightnings=sorted(frozenset().union(*(p.lightnings for p in parts)), key=version_key),
            answers=ANSWERS_FILE,
            section_entries=SECTION_FILE_ENTRIES,
            cell_entries=CELL_FILE_ENTRIES,
            status_glyphs=Markup(script_json([GLYPH[s] for s in STATUSES])),
            statuses=_LEGEND,
            status_names=Markup(script_json(list(STATUSES))),
            prelude=Markup(prelude),
            # the parts are the templates' own output (or the render cache's copy of it)
            contents=[Markup(p.contents) for p in parts],
        )
    )


def section_files(parts: Sequence[HtmlPart]) -> list[tuple[str, str]]:
    """(name, text) of the section files of the parts of all entries, in entry order."""
    lines = [line for p in parts for line in p.sections.splitlines(keepends=True)]
    return _grouped(lines, 0, SECTION_FILE_ENTRIES, section_file_name)


def render_html(aggs: Aggregates, torch_only: Collection[str] = ()) -> str:
    """The page; its data files are ``cell_files(aggs.entries)``, its section files
    ``section_files([html_part(aggs.entries)])``, and the answers files."""
    return assemble_html([html_part(aggs.entries, torch_only=torch_only)])


@functools.lru_cache(maxsize=1)
def _heatmap() -> Any:
    """templates/heatmap.html's macros, and each status's cell rendered once."""
    macros = environment().get_template("templates/heatmap.html").module
    cells = {s: macros.cell(i, GLYPH[s]) for s, i in _STATUS_INDEX.items()}
    return macros, cells, macros.cell(None)


def _machines_td(a: EntryAggregate, key: tuple[str, str, str, str], status: str) -> Markup:
    """A cell measured on several machines: one glyph where they agree, each machine's
    where they disagree (with ‼); what each saw in its title."""
    macros = _heatmap()[0]
    values = a.by_machine[key]
    saw = "; ".join(
        f"{m}: " + ", ".join(f"{LABEL[o]} ×{c}" for o, c in v.counts) for m, v in values
    )
    if key not in a.disagree:
        return macros.cell(_STATUS_INDEX[status], GLYPH[status], saw)  # type: ignore[no-any-return]
    glyphs = "/".join(GLYPH[v.status] for _, v in values)
    return macros.cell(_STATUS_INDEX[status], glyphs, "machines disagree: " + saw, " ‼")  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Row:
    variant: VariantAggregate
    index: int  # the variant's place in the entry (the data file's order)
    title: str  # what the variant is: its kind, the claim it answers, its description
    cells: Markup  # its cells, a column each, joined (the template writes them as they are)


@dataclass(frozen=True)
class _Heatmap:
    id: str  # the slice's id, e.g. "cpu-fp16"
    index: int  # the slice's place in the entry (the data file's order)
    device: str
    precision: str
    rows: list[_Row]  # the variants that ran in this slice, in the entry's order


@dataclass(frozen=True)
class _RateRow:
    variant: VariantAggregate
    claim: str  # what the document claims for the variant ("": nothing)


@functools.lru_cache(maxsize=64)
def _heads(envs: tuple[EnvInfo, ...], torch_only: bool) -> tuple[tuple[Group, ...], Markup]:
    # entries mostly share their environments: each distinct set of heads is made once
    groups = env_columns(envs, torch_only)
    return groups, _heatmap()[0].heads(groups, torch_only)


def variant_title(v: VariantAggregate) -> str:
    """What a variant is, in a line: its kind, the claim it answers, what it does."""
    what = v.kind.replace("_", " ") + (f" ({v.claim_ref})" if v.claim_ref else "")
    description = " ".join(v.description.split())
    return f"{what}: {description}" if description else what


def _column_td(a: EntryAggregate, keys: list[CellKey]) -> Markup:
    """The cell of one column: its environments' cells joined (join_cells), the status of
    each named in its title where they differ; a cell measured on several machines shows
    what each saw (``_machines_td``)."""
    _, td, empty = _heatmap()
    present = [k for k in keys if k in a.cells]
    if not present:
        return empty  # type: ignore[no-any-return]
    if len(present) == 1:
        key = present[0]
        status = a.cells[key].status
        return _machines_td(a, key, status) if key in a.by_machine else td[status]  # type: ignore[no-any-return]
    values = [a.cells[k] for k in present]
    joined = join_cells(values)
    machines = [k for k in present if k in a.by_machine]
    if len({v.status for v in values}) == 1 and not machines:
        return td[joined.status]  # type: ignore[no-any-return]
    title = "; ".join(
        f"{k[1]}: " + ", ".join(f"{LABEL[o]} ×{c}" for o, c in a.cells[k].counts) for k in present
    )
    flag = " ‼" if any(k in a.disagree for k in machines) else ""
    return _heatmap()[0].cell(_STATUS_INDEX[joined.status], GLYPH[joined.status], title, flag)  # type: ignore[no-any-return]


def _slice_rows(a: EntryAggregate, columns: list[tuple[int, ...]], d: str, p: str) -> list[_Row]:
    rows = []
    env_ids = [e.id for e in a.envs]
    # the common case, a column an environment and every cell of one machine: its td is
    # its status's (what _column_td gives, without a call a cell)
    alone = (
        [env_ids[col[0]] for col in columns]
        if all(len(c) == 1 for c in columns) and not a.by_machine
        else None
    )
    _, td, empty = _heatmap()
    get = a.cells.get
    for index, v in enumerate(a.variants):
        name = v.name
        if not any((name, env, d, p) in a.cells for env in env_ids):
            continue  # not run in this slice (an fp16-only variant in the fp32 table)
        # (each cell is markup already: joined as text, not escaped again)
        if alone is not None:
            tds = [
                empty if (value := get((name, env, d, p))) is None else td[value.status]
                for env in alone
            ]
        else:
            tds = [_column_td(a, [(name, env_ids[i], d, p) for i in col]) for col in columns]
        cells = Markup("".join(tds))
        rows.append(_Row(v, index, variant_title(v), cells))
    return rows


def _section(a: EntryAggregate, slug: str, torch_only: bool) -> dict[str, Any]:
    """What templates/entry.html is given for entry ``a``."""
    groups, heads = _heads(a.envs, torch_only)
    columns = [c.envs for g in groups for c in g.columns]
    heatmaps = [
        _Heatmap(f"{d}-{p}", i, d, p, _slice_rows(a, columns, d, p))
        for i, (d, p) in enumerate(a.slices)
    ]
    rates = [
        _RateRow(
            v,
            ", ".join(
                x
                for x in (
                    v.claim_ref or "",
                    f"claimed {v.claimed_rate:.0%}" if v.claimed_rate is not None else "",
                    "documented failure: " + documented_failure_text(v.fails_as)
                    if v.fails_as
                    else "",
                )
                if x
            ),
        )
        for v in a.variants
    ]
    return {
        "a": a,
        "slug": slug,
        "torch_only": torch_only,
        "heads": heads,
        "heatmaps": heatmaps,
        "slice_ids": [slice_id(s) for s in a.slices],
        "rates": rates,
        "titles": {v.name: variant_title(v) for v in a.variants},
    }


# -- the data files ----------------------------------------------------------------------


def cell_files(entries: Sequence[EntryAggregate], first: int = 0) -> list[tuple[str, str]]:
    """(name, text) of the data files of ``entries``, the first of them at index ``first``
    of all entries (a multiple of CELL_FILE_ENTRIES: a file is never split)."""
    return data_files([render_cell_data(a) for a in entries], first)


def data_files(lines: Sequence[str], first: int = 0) -> list[tuple[str, str]]:
    """(name, text) of the data files that hold ``lines`` (``render_cell_data``'s, one an
    entry), the first of them that of entry ``first`` of all (a multiple of
    CELL_FILE_ENTRIES: a file is never split)."""
    return _grouped(lines, first, CELL_FILE_ENTRIES, cell_file_name)


def _grouped(
    lines: Sequence[str], first: int, per: int, name: Callable[[int], str]
) -> list[tuple[str, str]]:
    """(name, text) of the files that hold ``lines`` (one an entry, ``per`` a file), the
    first of them that of entry ``first`` of all (a multiple of ``per``)."""
    if first % per:
        raise ValueError(f"a part of the files starts at a multiple of {per}, not at {first}")
    return [(name(first + i), "".join(lines[i : i + per])) for i in range(0, len(lines), per)]


def word_pool(pool: Texts) -> None:
    """Word ``pool``'s provenance and versions objects now (kept for every page that reads
    the pool): a report does so once, before its workers fork, rather than in each."""
    _worded(pool)


@functools.lru_cache(maxsize=4)
def _worded(pool: Texts) -> tuple[list[str], np.ndarray]:
    """The pool's texts with the page's wording of each provenance and versions object
    added (each distinct text once), and the id of each object's wording."""
    texts = list(pool.texts)
    index = {t: i for i, t in enumerate(texts)}
    worded = []
    for d, is_provenance in pool.objects:
        words = _machine_text(d) if is_provenance else _versions_text(d)
        i = index.get(words)
        if i is None:
            i = index[words] = len(texts)
            texts.append(words)
        worded.append(i)
    return texts, np.array(worded, dtype=np.int64)


_NOT_RUN = (None, 0)  # a cell's (status, trials) in the data file where it did not run


def render_cell_data(a: EntryAggregate) -> str:
    """The entry's line in its data file: every cell's trials, for the page's detail panel.

    ``cells``: per cell, in the order of the page's tables (slice, variant, environment;
    ``shape`` gives their numbers), its status (null: not run) and its number of trials;
    ``trials``: columns, the trials of one cell after another in that order. Texts are
    indices into ``strings`` (each text once, in the order first needed: exceptions, then
    machines, versions, reasons, start times); ``exception`` indexes ``exceptions``
    ([type, message, frame], 0: none); durations are in milliseconds."""
    statuses: list[int | None] = []
    counts: list[int] = []
    cells = a.cells
    env_ids = [e.id for e in a.envs]
    status_index = _STATUS_INDEX
    coded = {key: (status_index[value.status], value.trials) for key, value in cells.items()}
    get = coded.get
    for d, p in a.slices:
        for v in a.variants:
            name = v.name
            for status, trials in [get((name, env, d, p), _NOT_RUN) for env in env_ids]:
                statuses.append(status)
                counts.append(trials)

    t = a.trials
    pool = t.texts
    texts, worded = _worded(pool)
    # exceptions in the order first seen, each once (row 0: none)
    present = t.exception[t.exception != 0]
    codes, first = np.unique(present, return_index=True)
    codes = codes[np.argsort(first, kind="stable")]
    row_of = np.zeros(len(pool.exceptions), dtype=np.int64)
    row_of[codes] = np.arange(1, len(codes) + 1)
    exception_column = row_of[t.exception]
    exception_texts = pool.exceptions[codes].ravel()
    machine, versions = worded[t.machine], worded[t.versions]
    # every text once, numbered in the order first needed
    wanted = np.concatenate(([0], exception_texts, machine, versions, t.reason, t.started)).astype(
        np.int64
    )
    ids, first = np.unique(wanted, return_index=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))

    def local(column: np.ndarray) -> list[int]:
        return rank[np.searchsorted(ids, column)].tolist()

    if not np.isfinite(t.duration_s).all():
        raise ValueError(
            "Out of range float values are not JSON compliant: a duration is not finite"
        )
    columns: dict[str, list[int]] = {
        "outcome": t.outcome.tolist(),
        "exception": exception_column.tolist(),
        "duration": np.rint(t.duration_s * 1000).astype(np.int64).tolist(),
        "machine": local(machine),
        "versions": local(versions),
        "reason": local(t.reason),
        "started": local(t.started),
        "trial": t.trial.tolist(),
    }
    exception_rows = [[0, 0, 0], *np.reshape(local(exception_texts), (-1, 3)).tolist()]
    data = {
        "shape": [len(a.slices), len(a.variants), len(env_ids)],
        "envs": env_ids,  # a cell's id is its environment's and its slice's
        "cells": {"status": statuses, "trials": counts},
        "trials": columns,
        "exceptions": exception_rows,
        "strings": [texts[i] for i in ids[order].tolist()],
    }
    return f"harnessCells({script_json(entry_slug(a.id))},{script_json(data)});\n"
