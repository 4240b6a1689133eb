"""Aggregates -> one self-contained HTML page (inline CSS and JS, no network).

Safety: every run-derived text in the markup goes through ``html.escape``; cell details
travel as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&``
written as ``\\u003c``-style escapes (so ``</script>`` cannot close it), and the script
puts them on the page with ``textContent`` only, never ``innerHTML``.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from harness.aggregate import Aggregates, EntryAggregate, EnvInfo, slice_id
from harness.outcomes import Outcome
from harness.records import Record
from harness.render import COLOR, GLYPH, LABEL, STATUSES, entry_slug

__all__ = ["render_html", "script_json"]

_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_STATUS_REF = {s: str(i) for s, i in _STATUS_INDEX.items()}
_OUTCOME_REF = {o: _STATUS_REF[o.value] for o in Outcome}
_NOT_FINITE = frozenset({"nan", "inf", "-inf"})


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


class _Strings:
    """Interned strings: the JSON carries each distinct text once."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}
        self.items: list[str] = [""]
        self.refs: dict[str, str] = {"": "0"}  # text -> its index as JSON text

    def __call__(self, text: str) -> int:
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.items)
            self.items.append(text)
        return i

    def ref(self, text: str) -> str:
        r = self.refs.get(text)
        if r is None:
            r = self.refs[text] = str(self(text))
        return r


def _machine_text(p: dict[str, str]) -> str:
    parts = [p.get("host", "") or "unknown host"]
    hw = ", ".join(x for x in (p.get("os", ""), p.get("cpu", ""), p.get("gpu", "")) if x)
    if hw:
        parts.append(hw)
    if p.get("driver") or p.get("cuda"):
        parts.append(f"driver {p.get('driver', '') or '?'}, CUDA {p.get('cuda', '') or '?'}")
    if p.get("harness_version") or p.get("git_rev"):
        parts.append(f"harness {p.get('harness_version', '') or '?'} @ {p.get('git_rev', '') or '?'}")
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
.v-confirmed{background:#d9f0d3}.v-contradicted{background:#fddbc7}.v-not-measurable{background:#eee}
.hidden{display:none}
"""

_JS = r"""
(function(){
  "use strict";
  var data = JSON.parse(document.getElementById("cell-data").textContent);
  var S = data.strings, C = data.cells, O = data.outcomes;
  var panel = document.getElementById("detail");
  var pinned = null;
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  function show(td){
    var i = parseInt(td.getAttribute("data-c"), 10), cell = C[i];
    if (!cell) return;
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
    item("Cell", O[cell[0]] + " (" + cell[1].length + " trial" + (cell[1].length === 1 ? "" : "s") + ")");
    cell[1].forEach(function(t, n){
      dl.appendChild(el("dt", "Trial " + t[9]));
      item("Outcome", O[t[0]]);
      item("Exception", S[t[1]] ? S[t[1]] + ": " + S[t[2]] : "");
      item("Frame", S[t[3]]);
      item("Reason", S[t[7]]);
      item("Duration", t[4] + " s");
      item("Machine", S[t[5]]);
      item("Versions", S[t[6]]);
      item("Started", S[t[8]]);
    });
    panel.appendChild(dl);
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
  document.body.setAttribute("data-ready", "1");
})();
"""


def render_html(aggs: Aggregates) -> str:
    strings = _Strings()
    machine_cache: dict[int, str] = {}
    versions_cache: dict[int, str] = {}
    exception_cache: dict[int, str] = {}
    cells: list[str] = []  # each cell's details, as JSON text (numbers only: nothing to escape)
    parts: list[str] = []
    slices = sorted({slice_id(s) for a in aggs.entries for s in a.slices})
    n_runs = sum(a.n_runs for a in aggs.entries)
    totals = {"confirmed": 0, "contradicted": 0, "not measurable": 0}
    for a in aggs.entries:
        for v in a.verdicts:
            totals[v.verdict] = totals.get(v.verdict, 0) + 1

    w = parts.append
    w('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">')
    w('<meta name="viewport" content="width=device-width, initial-scale=1">')
    w("<title>Measured compatibility</title><style>")
    w(_CSS)
    for s, i in _STATUS_INDEX.items():
        fg = "#fff" if s in ("reproduced", "crashed", "timeout", "wrong_result", "env_failed", "ok") else "#000"
        w(f".s{i}{{background:{COLOR[s]};color:{fg}}}")
    w("</style></head><body>")
    w("<header><h1>Measured compatibility</h1>")
    w(
        f"<p>{len(aggs.entries)} entries, {n_runs} runs. Verdicts: "
        + ", ".join(f"{_e(k)} {c}" for k, c in totals.items())
        + ".</p>"
    )
    w('<div id="filters">Device / precision: ')
    for s in slices:
        w(f'<label><input type="checkbox" class="slice-filter" value="{_e(s)}" checked> {_e(s)}</label> ')
    w('<label>Entry: <input type="search" id="entry-filter" placeholder="filter by id"></label></div>')
    w('<div class="legend">')
    for s, i in _STATUS_INDEX.items():
        w(f'<span class="s{i}">{GLYPH[s]} {_e(LABEL[s])}</span>')
    w("</div></header><main>")

    # contents with verdict counts
    w('<h2>Entries</h2><table id="summary"><thead><tr><th>Entry</th><th>Runs</th>'
      "<th>confirmed</th><th>contradicted</th><th>not measurable</th></tr></thead><tbody>")
    for a in aggs.entries:
        c = {"confirmed": 0, "contradicted": 0, "not measurable": 0}
        for v in a.verdicts:
            c[v.verdict] = c.get(v.verdict, 0) + 1
        w(
            f'<tr><td><a href="#e-{_e(entry_slug(a.id))}">{_e(a.id)}</a></td><td>{a.n_runs}</td>'
            f'<td>{c["confirmed"]}</td><td>{c["contradicted"]}</td><td>{c["not measurable"]}</td></tr>'
        )
    w("</tbody></table>")

    td_open = {s: f'<td class="c s{i}" tabindex="0" data-c="' for s, i in _STATUS_INDEX.items()}
    td_close = {s: f'">{GLYPH[s]}</td>' for s in STATUSES}
    caches = (machine_cache, versions_cache, exception_cache)
    env_heads_cache: dict[tuple[int, ...], str] = {}
    for a in aggs.entries:
        _entry(a, w, cells, strings, caches, env_heads_cache, td_open, td_close)

    w('</main><aside id="detail" aria-live="polite"><p>Hover over a cell for its runs; click to pin.</p></aside>')
    # as script_json({"outcomes": ..., "strings": ..., "cells": ...}) would write it
    w('<script type="application/json" id="cell-data">')
    w('{"outcomes":' + script_json(list(STATUSES)) + ',"strings":' + script_json(strings.items))
    w(',"cells":[' + ",".join(cells) + "]}")
    w("</script><script>")
    w(_JS)
    w("</script></body></html>\n")
    return "".join(parts)


def _entry(
    a: EntryAggregate,
    w: Any,
    cells: list[str],
    strings: _Strings,
    caches: tuple[dict[int, str], dict[int, str], dict[int, str]],
    env_heads_cache: dict[tuple[int, ...], str],
    td_open: dict[str, str],
    td_close: dict[str, str],
) -> None:
    eid = _e(a.id)
    w(f'<section class="entry" id="e-{_e(entry_slug(a.id))}" data-id="{eid}">')
    w(f"<h2>{_e(a.title)}</h2>")
    if a.title != a.id:
        w(f"<p>{eid}</p>")
    if a.signature_type:
        w(f'<p class="sig">{_e(a.signature_type)}: {_e(a.signature_message)}</p>')
    w(f"<p>{a.n_runs} runs ({a.n_counted} applicable), newest {_e(a.newest[:10]) or '–'}.</p>")
    env_heads = _env_heads(a.envs, env_heads_cache)
    status_ref = _STATUS_REF
    env_ids = [e.id for e in a.envs]
    values = a.cells
    runs = a.runs
    for d, p in a.slices:
        sid = _e(f"{d}-{p}")
        w(f'<div class="slice" data-slice="{sid}"><h3>{_e(d)} / {_e(p)}</h3>')
        w(f'<table class="heatmap" data-entry="{eid}" data-slice="{sid}"><thead><tr><th>Variant</th>{env_heads}</tr></thead><tbody>')
        for v in a.variants:
            row = [f'<tr><th title="{_e(v.kind)}">{_e(v.name)}</th>']
            name = v.name
            for env in env_ids:
                key = (name, env, d, p)
                value = values.get(key)
                if value is None:
                    row.append("<td></td>")
                    continue
                status = value.status
                rs = runs[key]
                trials = _trial(rs[0], strings, caches) if len(rs) == 1 else ",".join([_trial(r, strings, caches) for r in rs])
                row.append(td_open[status] + str(len(cells)) + td_close[status])
                cells.append("[" + status_ref[status] + ",[" + trials + "]]")
            row.append("</tr>")
            w("".join(row))
        w("</tbody></table></div>")
    # rates
    w("<h3>Rates</h3><table class=\"rates\"><thead><tr><th>Variant</th><th>Kind</th><th>Metric</th><th>Overall</th>")
    w("".join(f"<th>{_e(slice_id(s))}</th>" for s in a.slices) + "</tr></thead><tbody>")
    for v in a.variants:
        claim = ", ".join(x for x in (v.claim_ref or "", f"claimed {v.claimed_rate:.0%}" if v.claimed_rate is not None else "") if x)
        w(
            f'<tr><td>{_e(v.name)}</td><td>{_e(v.kind)}</td><td>{_e(v.metric)}{" (" + _e(claim) + ")" if claim else ""}</td>'
            f"<td>{_e(v.overall.text())}</td>" + "".join(f"<td>{_e(r.text())}</td>" for _, r in v.by_slice) + "</tr>"
        )
    w("</tbody></table>")
    w('<h3>Claimed vs measured</h3><table class="verdicts"><thead><tr><th>Claim</th><th>Subject</th>'
      "<th>Claimed</th><th>Measured</th><th>Verdict</th><th>Why</th><th>Seen instead</th></tr></thead><tbody>")
    for v in a.verdicts:
        w(
            f'<tr class="v-{_e(v.verdict.replace(" ", "-"))}"><td>{_e(v.claim)}</td><td>{_e(v.subject)}</td>'
            f"<td>{_e(v.claimed)}</td><td>{_e(v.measured)}</td><td><b>{_e(v.verdict)}</b></td>"
            f'<td class="why">{_e(v.why)}</td><td class="why">{_e(v.seen_instead)}</td></tr>'
        )
    w("</tbody></table></section>")


def _env_heads(envs: tuple[EnvInfo, ...], cache: dict[tuple[int, ...], str]) -> str:
    # entries mostly share their environments (the same EnvInfo objects, alive for the
    # whole render): key by identity, as hashing the dataclasses would cost more
    key = tuple(map(id, envs))
    text = cache.get(key)
    if text is None:
        text = cache[key] = "".join(
            f'<th data-env="{_e(e.id)}" title="{_e(e.id)}">{_e(e.label())}</th>' for e in envs
        )
    return text


def _trial(r: Record, strings: _Strings, caches: tuple[dict[int, str], dict[int, str], dict[int, str]]) -> str:
    """One trial as JSON text: [outcome, type, message, frame, duration, machine, versions,
    reason, started, trial], texts as indices into the strings (interned in that order)."""
    machine_cache, versions_cache, exception_cache = caches
    # provenance, versions and exceptions are usually shared between records: cache by
    # identity (the records are alive as long as the aggregates)
    p = r.provenance
    mi = machine_cache.get(id(p))
    if mi is None:
        mi = machine_cache[id(p)] = strings.ref(_machine_text(p))
    vv = r.versions
    vi = versions_cache.get(id(vv))
    if vi is None:
        vi = versions_cache[id(vv)] = strings.ref(_versions_text(vv))
    exc = r.exception
    if exc is None:
        ei = "0,0,0"
    else:
        ei = exception_cache.get(id(exc))
        if ei is None:
            ei = exception_cache[id(exc)] = ",".join((strings.ref(exc.type), strings.ref(exc.message), strings.ref(exc.frame)))
    duration = repr(round(r.duration_s, 3))
    if duration in _NOT_FINITE:
        raise ValueError(f"Out of range float values are not JSON compliant: {duration}")
    return (
        f"[{_OUTCOME_REF[r.outcome]},{ei},{duration},{mi},{vi},"
        f"{strings.ref(r.reason) if r.reason else '0'},{strings.ref(r.started_at) if r.started_at else '0'},{r.trial}]"
    )
