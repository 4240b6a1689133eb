"""Aggregates -> index.html, one page with every entry's heatmaps, rates and verdicts, and
the data files (cells/NNNN.js) with the details of each cell's trials.

The page is what a reader opens; the trial details (exceptions, machines, versions,
durations) are most of the bytes and are wanted for one cell at a time, so the page loads
them when a cell is first hovered or clicked, through a ``<script src>`` element: that
works from file:// as well as from a server, and nothing comes from the network. A data
file holds ``CELL_FILE_ENTRIES`` consecutive entries (in id order): a few files rather
than one per entry, since creating a file costs more than writing its bytes.

Safety: every run-derived text in the markup goes through ``html.escape``; the data files
are JSON (in function calls) with ``<``, ``>`` and ``&`` written as ``\\u003c``-style
escapes, and the page's script puts their texts on the page with ``textContent`` only,
never ``innerHTML``.

The page is assembled from parts (``html_part``), each a run of consecutive entries, so
that the entries can be rendered in several processes; ``render_html`` is the whole in one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from harness.aggregate import (
    VERDICTS,
    Aggregates,
    EntryAggregate,
    EnvInfo,
    Texts,
    documented_failure_text,
    slice_id,
)
from harness.report.render import COLOR, GLYPH, LABEL, STATUSES, entry_slug

__all__ = [
    "HtmlPart",
    "assemble_html",
    "CELL_FILE_ENTRIES",
    "cell_file_name",
    "cell_files",
    "data_files",
    "html_part",
    "render_cell_data",
    "render_html",
    "script_json",
]

_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_OUTCOME_INDEX = {
    s: i for s, i in _STATUS_INDEX.items()
}  # Outcome is a str: its value hashes alike
_VERDICTS = VERDICTS


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def script_json(data: Any) -> str:
    """JSON that is inert inside a <script> element whatever its strings hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


CELL_FILE_ENTRIES = 64


def cell_file_name(index: int) -> str:
    """The data file of the entry at ``index`` (in id order), relative to index.html."""
    return f"cells/{index // CELL_FILE_ENTRIES:04d}.js"


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


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{position:sticky;top:0;background:#fafafa;border-bottom:1px solid #ccc;padding:8px 16px;z-index:2}
h1{font-size:20px;margin:0 0 4px}
main{margin-right:380px;padding:0 16px 40px}
section.entry{border-bottom:2px solid #ddd;padding:8px 0}
h2{font-size:17px;margin:12px 0 4px}h3{font-size:14px;margin:10px 0 4px}
table{border-collapse:collapse;margin:4px 0}
th,td{border:1px solid #ccc;padding:2px 5px;vertical-align:top}
table.heatmap td.c{text-align:center;cursor:pointer;min-width:22px}
table.heatmap td.c:focus,table.heatmap td.c.sel{outline:3px solid #000;outline-offset:-3px}
table.heatmap thead th{font-weight:normal;font-size:11px;writing-mode:vertical-rl;transform:rotate(180deg);text-align:left}
.legend span{display:inline-block;padding:0 6px;margin:1px;border:1px solid #aaa}
.sig,.why{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-word}
#detail{position:fixed;right:0;top:0;bottom:0;width:360px;overflow:auto;background:#fff;border-left:1px solid #ccc;padding:70px 10px 10px;font-size:13px;box-sizing:border-box}
#detail dt{font-weight:bold;margin-top:6px}#detail dd{margin:0;white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,monospace}
.v-confirmed{background:#d9f0d3}.v-contradicted{background:#fddbc7}.v-not-measurable{background:#eee}.v-inconclusive{background:#fff7bc}
.hidden{display:none}
#lookup{border:1px solid #999;padding:6px 10px;margin:8px 0;background:#f7f7f7}
#lookup-out table{font-size:13px}#lookup-out td.c{text-align:center;min-width:22px}
"""

# A data file calls harnessCells(slug, data); render_cell_data says what data holds.
_JS = r"""
(function(){
  "use strict";
  var O = __STATUSES__;
  var loaded = {}, failed = {}, requested = {};
  var panel = document.getElementById("detail");
  var pinned = null, current = null;
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  window.harnessCells = function(slug, data){ loaded[slug] = data; if (current && slugOf(current) === slug) show(current); };
  function slugOf(td){ return td.closest("section.entry").getAttribute("data-slug"); }
  function load(src){
    if (requested[src]) return;
    requested[src] = true;
    var s = document.createElement("script");
    s.src = src;
    s.onerror = function(){ failed[src] = true; if (current) show(current); };
    document.head.appendChild(s);
  }
  function show(td){
    current = td;
    var section = td.closest("section.entry"), slug = section.getAttribute("data-slug");
    var table = td.closest("table"), row = td.parentNode;
    var col = Array.prototype.indexOf.call(row.children, td);
    var head = table.tHead.rows[0].children[col];
    panel.textContent = "";
    panel.appendChild(el("h3", table.getAttribute("data-entry")));
    var dl = el("dl");
    function item(k, v){ if (v === "" || v === undefined || v === null) return; dl.appendChild(el("dt", k)); dl.appendChild(el("dd", String(v))); }
    item("Variant", row.children[0].textContent);
    item("Environment", head.getAttribute("data-env"));
    item("Device / precision", table.getAttribute("data-slice"));
    panel.appendChild(dl);
    var data = loaded[slug], src = section.getAttribute("data-cells");
    if (!data) {
      if (failed[src]) { panel.appendChild(el("p", "The details are missing: " + src + " could not be loaded.")); }
      else { panel.appendChild(el("p", "Loading the details…")); load(src); }
      return;
    }
    var si = Array.prototype.indexOf.call(section.querySelectorAll("table.heatmap"), table);
    var c = (si * data.shape[1] + row.sectionRowIndex) * data.shape[2] + (col - 1);
    var status = data.cells.status[c], count = data.cells.trials[c];
    if (status === null || status === undefined) return;
    if (!data.first) {  // where each cell's trials start: a running sum of the counts
      data.first = [];
      for (var k = 0, sum = 0; k < data.cells.trials.length; k++) { data.first.push(sum); sum += data.cells.trials[k]; }
    }
    var S = data.strings, X = data.exceptions, T = data.trials;
    item("Cell", O[status] + " (" + count + " trial" + (count === 1 ? "" : "s") + ")");
    for (var n = data.first[c]; n < data.first[c] + count; n++) {
      var x = X[T.exception[n]];
      dl.appendChild(el("dt", "Trial " + T.trial[n]));
      item("Outcome", O[T.outcome[n]]);
      item("Exception", S[x[0]] ? S[x[0]] + ": " + S[x[1]] : "");
      item("Frame", S[x[2]]);
      item("Reason", S[T.reason[n]]);
      item("Duration", (T.duration[n] / 1000) + " s");
      item("Machine", S[T.machine[n]]);
      item("Versions", S[T.versions[n]]);
      item("Started", S[T.started[n]]);
    }
  }
  function cellOf(ev){ var t = ev.target; return t && t.closest ? t.closest("td.c") : null; }
  document.addEventListener("mouseover", function(ev){ var td = cellOf(ev); if (td && !pinned) show(td); });
  document.addEventListener("click", function(ev){
    var td = cellOf(ev); if (!td) return;
    if (pinned) pinned.classList.remove("sel");
    pinned = (pinned === td) ? null : td;
    if (pinned) { pinned.classList.add("sel"); }
    show(td);
  });
  document.addEventListener("keydown", function(ev){ var td = cellOf(ev); if (td && ev.key === "Enter") td.click(); });
  function applyFilters(){
    var on = {};
    document.querySelectorAll("input.slice-filter").forEach(function(b){ on[b.value] = b.checked; });
    document.querySelectorAll("div.slice").forEach(function(d){ d.classList.toggle("hidden", !on[d.getAttribute("data-slice")]); });
    var q = document.getElementById("entry-filter").value.toLowerCase();
    document.querySelectorAll("section.entry").forEach(function(s){ s.classList.toggle("hidden", q !== "" && s.getAttribute("data-id").toLowerCase().indexOf(q) < 0); });
  }
  document.querySelectorAll("input.slice-filter").forEach(function(b){ b.addEventListener("change", applyFilters); });
  document.getElementById("entry-filter").addEventListener("input", applyFilters);
  function versionKey(v){ return v.split(/[.+]/).map(function(x){ var n = parseInt(x, 10); return isNaN(n) ? x : n; }); }
  function byVersion(a, b){ var x = versionKey(a), y = versionKey(b); for (var i = 0; i < Math.max(x.length, y.length); i++) { if (x[i] === undefined) return -1; if (y[i] === undefined) return 1; if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1; } return 0; }
  function fill(select, attr){
    var seen = {};
    document.querySelectorAll("table.heatmap th[" + attr + "]").forEach(function(th){ seen[th.getAttribute(attr)] = true; });
    Object.keys(seen).sort(byVersion).forEach(function(v){ var o = el("option", v); o.value = v; select.appendChild(o); });
  }
  var lt = document.getElementById("lookup-torch"), ll = document.getElementById("lookup-lightning");
  fill(lt, "data-torch"); fill(ll, "data-lightning");
  function lookup(){
    var torch = lt.value, lightning = ll.value, out = document.getElementById("lookup-out");
    out.textContent = "";
    var found = 0, missing = [];
    document.querySelectorAll("section.entry").forEach(function(section){
      var rows = [], slices = [];
      section.querySelectorAll("table.heatmap").forEach(function(table){
        var heads = table.tHead.rows[0].children, cols = [];
        for (var i = 1; i < heads.length; i++) {
          if (heads[i].getAttribute("data-torch") === torch && heads[i].getAttribute("data-lightning") === lightning) cols.push(i);
        }
        if (!cols.length) return;
        var sid = table.getAttribute("data-slice");
        slices.push(sid);
        Array.prototype.forEach.call(table.tBodies[0].rows, function(tr, r){
          if (!rows[r]) rows[r] = {name: tr.children[0].textContent, kind: tr.children[0].title, cells: {}};
          rows[r].cells[sid] = cols.map(function(i){ return tr.children[i]; }).filter(function(td){ return td.className; });
        });
      });
      if (!slices.length) { missing.push(section.getAttribute("data-id")); return; }
      found++;
      out.appendChild(el("h3", section.getAttribute("data-id")));
      var t = el("table"), head = el("tr");
      ["Variant", "Kind"].concat(slices).forEach(function(h){ head.appendChild(el("th", h)); });
      t.appendChild(head);
      rows.forEach(function(row){
        var tr = el("tr");
        tr.appendChild(el("td", row.name)); tr.appendChild(el("td", row.kind));
        slices.forEach(function(sid){
          var td = el("td"), cells = row.cells[sid] || [];
          td.className = cells.length === 1 ? cells[0].className : "";
          td.textContent = cells.length ? cells.map(function(c){ return c.textContent; }).join(" ") : "not run";
          td.title = cells.length ? cells.map(function(c){ return O[parseInt(c.className.replace(/.*\bs(\d+).*/, "$1"), 10)]; }).join(", ") : "";
          tr.appendChild(td);
        });
        t.appendChild(tr);
      });
      out.appendChild(t);
    });
    out.insertBefore(el("p", found + " entr" + (found === 1 ? "y was" : "ies were") + " measured on torch " + torch + " with lightning " + lightning + (missing.length ? "; not measured for this pair: " + missing.join(", ") : "") + "."), out.firstChild);
  }
  document.getElementById("lookup-go").addEventListener("click", lookup);
  document.body.setAttribute("data-ready", "1");
})();
""".replace("__STATUSES__", script_json(list(STATUSES)))


# "Does this error happen on torch X with lightning Y, and which fix works there": read
# off the heatmaps' own cells (a column per environment, its th naming the releases), so
# the answer is exactly what the tables show: a pair that was not run says so.
_LOOKUP_BOX = (
    '<section id="lookup"><h2>Look up my versions</h2>'
    '<label>torch <select id="lookup-torch"></select></label> '
    '<label>lightning <select id="lookup-lightning"></select></label> '
    '<button type="button" id="lookup-go">Look up</button>'
    '<div id="lookup-out" aria-live="polite"></div></section>'
)


@dataclass(frozen=True)
class HtmlPart:
    """The page's share of a run of consecutive entries: what the header counts, the rows
    of the contents table and the entries' sections."""

    entries: int
    runs: int
    verdicts: tuple[int, ...]  # per verdict, in VERDICTS order
    slices: frozenset[str]
    contents: str
    sections: str


def _verdict_counts(a: EntryAggregate) -> list[int]:
    c = [0] * len(_VERDICTS)
    for v in a.verdicts:
        c[_VERDICTS.index(v.verdict)] += 1
    return c


def html_part(entries: Sequence[EntryAggregate], first: int = 0) -> HtmlPart:
    """The part of ``entries``, the first of them at index ``first`` of all entries."""
    contents: list[str] = []
    sections: list[str] = []
    totals = [0] * len(_VERDICTS)
    env_heads_cache: dict[tuple[EnvInfo, ...], str] = {}
    for i, a in enumerate(entries, first):
        c = _verdict_counts(a)
        totals = [t + x for t, x in zip(totals, c, strict=True)]
        contents.append(
            f'<tr><td><a href="#e-{_e(entry_slug(a.id))}">{_e(a.id)}</a></td><td>{a.n_runs}</td>'
            + "".join(f"<td>{x}</td>" for x in c)
            + "</tr>"
        )
        _section(a, cell_file_name(i), sections.append, env_heads_cache)
    return HtmlPart(
        entries=len(entries),
        runs=sum(a.n_runs for a in entries),
        verdicts=tuple(totals),
        slices=frozenset(slice_id(s) for a in entries for s in a.slices),
        contents="".join(contents),
        sections="".join(sections),
    )


def assemble_html(parts: Sequence[HtmlPart], prelude: str = "") -> str:
    """The page from the parts of all entries, in entry order. ``prelude``: HTML put first
    in <main> (``report --since REV``: the cells changed since REV, from harness.ci.diff)."""
    n_entries = sum(p.entries for p in parts)
    n_runs = sum(p.runs for p in parts)
    totals = [sum(p.verdicts[i] for p in parts) for i in range(len(_VERDICTS))]
    slices = sorted(frozenset().union(*(p.slices for p in parts)))
    out: list[str] = []
    w = out.append
    w('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">')
    w('<meta name="viewport" content="width=device-width, initial-scale=1">')
    w("<title>Measured compatibility</title><style>")
    w(_CSS)
    for s, i in _STATUS_INDEX.items():
        fg = (
            "#fff"
            if s
            in ("reproduced", "related", "crashed", "timeout", "wrong_result", "env_failed", "ok")
            else "#000"
        )
        w(f".s{i}{{background:{COLOR[s]};color:{fg}}}")
    w("</style></head><body>")
    w("<header><h1>Measured compatibility</h1>")
    w(
        f"<p>{n_entries} entries, {n_runs} runs. Verdicts: "
        + ", ".join(f"{_e(k)} {c}" for k, c in zip(_VERDICTS, totals, strict=True))
        + ".</p>"
    )
    w('<div id="filters">Device / precision: ')
    for s in slices:
        w(
            f'<label><input type="checkbox" class="slice-filter" value="{_e(s)}" checked> {_e(s)}</label> '
        )
    w(
        '<label>Entry: <input type="search" id="entry-filter" placeholder="filter by id"></label></div>'
    )
    w('<div class="legend">')
    for s, i in _STATUS_INDEX.items():
        w(f'<span class="s{i}">{GLYPH[s]} {_e(LABEL[s])}</span>')
    w("</div></header><main>")
    w(prelude)
    w(_LOOKUP_BOX)
    w(
        '<h2>Entries</h2><table id="summary"><thead><tr><th>Entry</th><th>Runs</th>'
        + "".join(f"<th>{_e(k)}</th>" for k in _VERDICTS)
        + "</tr></thead><tbody>"
    )
    out += (p.contents for p in parts)
    w("</tbody></table>")
    out += (p.sections for p in parts)
    w(
        '</main><aside id="detail" aria-live="polite"><p>Hover over a cell for its runs; click to pin.</p></aside>'
    )
    w("<script>")
    w(_JS)
    w("</script></body></html>\n")
    return "".join(out)


def render_html(aggs: Aggregates) -> str:
    """The page; its data files are ``cell_files(aggs.entries)``."""
    return assemble_html([html_part(aggs.entries)])


# a heatmap cell: its status as class and glyph; which cell it is follows from its place
_TD = {s: f'<td class="c s{i}" tabindex="0">{GLYPH[s]}</td>' for s, i in _STATUS_INDEX.items()}


def _machines_td(a: EntryAggregate, key: tuple[str, str, str, str], status: str) -> str:
    """A cell measured on several machines: each machine's glyph, and what each saw."""
    values = a.by_machine[key]
    glyphs = "/".join(GLYPH[v.status] for _, v in values)
    saw = "; ".join(
        f"{m}: " + ", ".join(f"{LABEL[o]} ×{c}" for o, c in v.counts) for m, v in values
    )
    flag = " ‼" if key in a.disagree else ""
    title = ("machines disagree: " if flag else "") + saw
    return (
        f'<td class="c s{_STATUS_INDEX[status]}" tabindex="0" title="{_e(title)}">'
        f"{glyphs}{flag}</td>"
    )


def _section(
    a: EntryAggregate, cells: str, w: Any, env_heads_cache: dict[tuple[EnvInfo, ...], str]
) -> None:
    eid = _e(a.id)
    slug = _e(entry_slug(a.id))
    w(
        f'<section class="entry" id="e-{slug}" data-id="{eid}" data-slug="{slug}" data-cells="{_e(cells)}">'
    )
    w(f"<h2>{_e(a.title)}</h2>")
    if a.title != a.id:
        w(f"<p>{eid}</p>")
    if a.signature_type:
        w(f'<p class="sig">{_e(a.signature_type)}: {_e(a.signature_text)}</p>')
    w(f"<p>{a.n_runs} runs ({a.n_counted} applicable), newest {_e(a.newest[:10]) or '–'}.</p>")
    env_heads = _env_heads(a.envs, env_heads_cache)
    env_ids = [e.id for e in a.envs]
    values = a.cells
    by_machine = a.by_machine
    td = _TD
    for d, p in a.slices:
        sid = _e(f"{d}-{p}")
        w(f'<div class="slice" data-slice="{sid}"><h3>{_e(d)} / {_e(p)}</h3>')
        w(
            f'<table class="heatmap" data-entry="{eid}" data-slice="{sid}"><thead><tr><th>Variant</th>{env_heads}</tr></thead><tbody>'
        )
        for v in a.variants:
            name = v.name
            row = [f'<tr><th title="{_e(v.kind)}">{_e(name)}</th>']
            for env in env_ids:
                key = (name, env, d, p)
                value = values.get(key)
                if value is None:
                    row.append("<td></td>")
                elif key in by_machine:
                    row.append(_machines_td(a, key, value.status))
                else:
                    row.append(td[value.status])
            row.append("</tr>")
            w("".join(row))
        w("</tbody></table></div>")
    # rates
    w(
        '<h3>Rates</h3><table class="rates"><thead><tr><th>Variant</th><th>Kind</th><th>Metric</th><th>Overall</th>'
    )
    w("".join(f"<th>{_e(slice_id(s))}</th>" for s in a.slices) + "</tr></thead><tbody>")
    for v in a.variants:
        claim = ", ".join(
            x
            for x in (
                v.claim_ref or "",
                f"claimed {v.claimed_rate:.0%}" if v.claimed_rate is not None else "",
                "documented failure: " + documented_failure_text(v.fails_as) if v.fails_as else "",
            )
            if x
        )
        w(
            f"<tr><td>{_e(v.name)}</td><td>{_e(v.kind)}</td><td>{_e(v.metric)}{' (' + _e(claim) + ')' if claim else ''}</td>"
            f"<td>{_e(v.overall.text())}</td>"
            + "".join(f"<td>{_e(r.text())}</td>" for _, r in v.by_slice)
            + "</tr>"
        )
    w("</tbody></table>")
    w(
        '<h3>Claimed vs measured</h3><table class="verdicts"><thead><tr><th>Claim</th><th>Subject</th>'
        "<th>Claimed</th><th>Measured</th><th>Verdict</th><th>Why</th><th>Seen instead</th></tr></thead><tbody>"
    )
    for v in a.verdicts:
        w(
            f'<tr class="v-{_e(v.verdict.replace(" ", "-"))}"><td>{_e(v.claim)}</td><td>{_e(v.subject)}</td>'
            f"<td>{_e(v.claimed)}</td><td>{_e(v.measured)}</td><td><b>{_e(v.label)}</b></td>"
            f'<td class="why">{_e(v.why)}</td><td class="why">{_e(v.seen_instead)}</td></tr>'
        )
    w("</tbody></table></section>")


def _env_heads(envs: tuple[EnvInfo, ...], cache: dict[tuple[EnvInfo, ...], str]) -> str:
    # entries mostly share their environments: each distinct header row is made once
    text = cache.get(envs)
    if text is None:
        text = cache[envs] = "".join(
            f'<th data-env="{_e(e.id)}" data-torch="{_e(e.torch.split("+")[0])}" '
            f'data-lightning="{_e(e.lightning.split("+")[0])}" title="{_e(e.id)}">{_e(e.label())}</th>'
            for e in envs
        )
    return text


# -- the data files ----------------------------------------------------------------------


def cell_files(entries: Sequence[EntryAggregate], first: int = 0) -> list[tuple[str, str]]:
    """(name, text) of the data files of ``entries``, the first of them at index ``first``
    of all entries (a multiple of CELL_FILE_ENTRIES: a file is never split)."""
    return data_files([render_cell_data(a) for a in entries], first)


def data_files(lines: Sequence[str], first: int = 0) -> list[tuple[str, str]]:
    """(name, text) of the data files that hold ``lines`` (``render_cell_data``'s, one an
    entry), the first of them that of entry ``first`` of all (a multiple of
    CELL_FILE_ENTRIES: a file is never split)."""
    if first % CELL_FILE_ENTRIES:
        raise ValueError(
            f"a part of the data files starts at a multiple of {CELL_FILE_ENTRIES}, not at {first}"
        )
    return [
        (cell_file_name(first + i), "".join(lines[i : i + CELL_FILE_ENTRIES]))
        for i in range(0, len(lines), CELL_FILE_ENTRIES)
    ]


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
    for d, p in a.slices:
        for v in a.variants:
            name = v.name
            for env in env_ids:
                value = cells.get((name, env, d, p))
                if value is None:
                    statuses.append(None)
                    counts.append(0)
                else:
                    statuses.append(status_index[value.status])
                    counts.append(value.trials)

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
        "cells": {"status": statuses, "trials": counts},
        "trials": columns,
        "exceptions": exception_rows,
        "strings": [texts[i] for i in ids[order].tolist()],
    }
    return f"harnessCells({script_json(entry_slug(a.id))},{script_json(data)});\n"
