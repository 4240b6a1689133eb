"""Every kept knowledge-base record corrected, as files a keeper can merge (``python -m
harness corrections``).

Under the output folder (default results/corrections/), laid out as the knowledge base's
repository is, so that it can be copied over a checkout of it:

    data/canons/<domain>/.../<env>.json    each measured record as it should read
    data/outcomes/<date>-torch-error-harness-<domain>.jsonl
                                           the counted runs of each workaround, one line a run,
                                           in the knowledge base's report_outcome shape
    review/<domain>.md                     a pull request's description: each changed field,
                                           old -> new, its evidence and rule; every record
                                           left alone, with why

The files depend only on the records and the entries, so writing twice changes nothing and
``check`` can say which are stale (CI runs it on the committed records).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.aggregate import EntryAggregate, aggregate_table
from harness.catalogue.corrections import (
    TOOL,
    Correction,
    correct,
    outcome_lines,
    record_signatures,
)
from harness.report.render import entry_slug
from harness.spec.entries import Entry
from harness.spec.triage import Triage

__all__ = ["Planned", "plan_corrections", "render_review"]


@dataclass(frozen=True)
class Alone:
    kb_id: str
    entry_id: str | None
    why: str


@dataclass
class Domain:
    name: str  # the knowledge base's domain: pytorch, cuda, ...
    triage: Triage | None
    corrected: list[Correction] = field(default_factory=list)
    alone: list[Alone] = field(default_factory=list)


@dataclass
class Planned:
    """What ``corrections`` writes: path (relative to the output folder) -> bytes."""

    files: dict[str, bytes]
    domains: list[Domain]

    def counts(self) -> tuple[Counter[str], Counter[str]]:
        """Fields changed by kind; records left alone by reason."""
        changed: Counter[str] = Counter()
        alone: Counter[str] = Counter()
        for d in self.domains:
            for c in d.corrected:
                changed.update(ch.kind for ch in c.changes)
            alone.update(_reason(a.why) for a in d.alone)
        return changed, alone


def _reason(why: str) -> str:
    return why.split(":", 1)[0]


def _page(entry_id: str) -> str:
    return f"results/compat/{entry_slug(entry_id)}.md"


def plan_corrections(
    table: Any,
    entries: Sequence[Entry],
    triages: Sequence[Triage],
    *,
    domain: str | None = None,
    pages_url: str | None = None,
) -> Planned:
    """The files of every kept record (``table``: the store's newest records)."""
    kept = [e for e in entries if e.origin.get("record")]
    known_ids = {str(e.origin.get("id")) for e in kept} | {
        row.kb_id for t in triages for row in t.entries
    }
    others = {e.id: record_signatures(e) for e in kept if e.origin.get("format") == "deadends-json"}
    rows = {t.entry_id(row): (t, row) for t in triages for row in t.entries}
    wanted = [
        e
        for e in kept
        if domain is None or str(e.origin.get("domain") or e.id.split("/")[1]) == domain
    ]
    aggs = {a.id: a for a in aggregate_table(table, entries, ids=[e.id for e in wanted])}
    domains: dict[str, Domain] = {}
    for t in triages:
        name = t.path.parent.name
        if domain is None or name == domain:
            domains[name] = Domain(name, t)
    files: dict[str, bytes] = {}
    outcomes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in wanted:
        name = str(e.origin.get("domain") or e.id.split("/")[1])
        d = domains.setdefault(name, Domain(name, None))
        triage_row = rows.get(e.id)
        unmeasured = {u.ref: u.why for u in triage_row[1].unmeasured} if triage_row else {}
        original = (e.dir / str(e.origin["record"])).read_bytes()
        agg = aggs[e.id]
        url = f"{pages_url.rstrip('/')}/compat/{entry_slug(e.id)}.md" if pages_url else None
        c = correct(
            e,
            agg,
            original,
            others=others,
            unmeasured=unmeasured,
            page=_page(e.id),
            page_url=url,
            known_ids=known_ids,
        )
        why = _why_alone(agg, c, triage_row[1].scriptable if triage_row else "")
        if why:
            d.alone.append(Alone(c.kb_id, e.id, why))
            continue
        d.corrected.append(c)
        files[c.kb_path or f"data/canons/{c.kb_id}.json"] = c.text
        for line in outcome_lines(c, agg):
            outcomes[(line["timestamp"][:10], name)].append(line)
    for d in domains.values():
        if d.triage is None:
            continue
        for row in d.triage.entries:
            if row.scriptable == "no":
                d.alone.append(Alone(row.kb_id, None, f"not reproducible by a script: {row.why}"))
        d.alone.sort(key=lambda a: a.kb_id)
        d.corrected.sort(key=lambda c: c.kb_id)
    for (date, name), lines in sorted(outcomes.items()):
        lines.sort(key=lambda x: (x["timestamp"], x["error_id"], x["notes"]))
        # named apart from the knowledge base's own daily files, which its loader globs too
        files[f"data/outcomes/{date}-{TOOL}-{name}.jsonl"] = "".join(
            json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n" for line in lines
        ).encode("utf-8")
    ordered = [domains[k] for k in sorted(domains)]
    for d in ordered:
        files[f"review/{d.name}.md"] = render_review(d, pages_url).encode("utf-8")
    return Planned(dict(sorted(files.items())), ordered)


def _why_alone(agg: EntryAggregate, c: Correction, scriptable: str) -> str:
    if not agg.n_runs:
        return "not measured yet: no run of its reproducer is stored"
    if not agg.n_counted:
        if scriptable == "cuda":
            return "waiting for a GPU: every run was skipped without a CUDA device"
        return "no counted run: every run was skipped, unsupported or failed to build"
    if not c.changes:
        whys = "; ".join(f"{left.field}: {left.why}" for left in c.left[:3])
        return f"nothing measurable to change: {whys}"
    return ""


# -- the review: a pull request's description ---------------------------------------------------


def _cell(value: Any, limit: int = 160) -> str:
    if value is None:
        text = "–"
    elif isinstance(value, str):
        text = value if value else '""'
    else:
        text = json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def render_review(d: Domain, pages_url: str | None) -> str:
    changed: Counter[str] = Counter(ch.kind for c in d.corrected for ch in c.changes)
    alone: Counter[str] = Counter(_reason(a.why) for a in d.alone)
    commit = d.triage.commit if d.triage is not None else None
    out = [
        f"# Corrections to the `{d.name}` domain, from measured runs",
        "",
        "Written by `python -m harness corrections` from the stored records of this "
        "repository's reproducers: each record below is the knowledge base's own file"
        + (f" at commit `{commit[:12]}`" if commit else "")
        + ", changed only where the runs support it (the rules are in "
        "harness/catalogue/corrections.py and docs/how-to/knowledge-base.md). "
        "`metadata.review_status` is never touched. Each file passes the knowledge base's "
        "schema and business rules as tests/catalogue/test_corrections.py writes them down.",
        "",
        f"{len(d.corrected)} records corrected; {len(d.alone)} left alone.",
        "",
    ]
    if changed:
        out += ["| field kind | changed |", "|---|---:|"]
        out += [
            f"| {k} | {n} |" for k, n in sorted(changed.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        out.append("")
    if alone:
        out += ["| left alone because | records |", "|---|---:|"]
        out += [f"| {k} | {n} |" for k, n in sorted(alone.items(), key=lambda kv: (-kv[1], kv[0]))]
        out.append("")
    if not pages_url:
        out += [
            "No `--pages-url` was given, so no source link was added and `evidence_count` is "
            "unchanged; each record's measured page is named under "
            "`environment.additional` by its path in this repository.",
            "",
        ]
    for c in d.corrected:
        out += [
            f"## `{c.kb_id}`",
            "",
            f"File `{c.kb_path}`; measured page `{c.page}` (entry `{c.entry_id}`).",
            "",
            "| field | old | new | evidence | rule |",
            "|---|---|---|---|---|",
        ]
        for ch in c.changes:
            if ch.kind == "matrix":
                old, new = "–", "the matrix summary"
            else:
                old, new = _cell(ch.old), _cell(ch.new)
            out.append(
                f"| `{ch.field}` | {old} | {new} | {_cell(ch.evidence, 200)} | {_cell(ch.rule, 200)} |"
            )
        if c.left:
            out += ["", "Left as it is:", ""]
            out += [f"- `{left.field}`: {_cell(left.why, 300)}" for left in c.left]
        out.append("")
    if d.alone:
        out += ["## Records left alone", ""]
        for a in d.alone:
            where = f" (entry `{a.entry_id}`)" if a.entry_id else ""
            out.append(f"- `{a.kb_id}`{where}: {_cell(a.why, 400)}")
        out.append("")
    return "\n".join(out)


def stale(planned: Planned, out_dir: Path) -> tuple[list[str], list[str]]:
    """The planned files that differ from ``out_dir``'s; the files there no plan writes."""
    differ = []
    for rel, blob in planned.files.items():
        path = out_dir / rel
        if not path.is_file() or path.read_bytes() != blob:
            differ.append(rel)
    extra = []
    if out_dir.is_dir():
        for path in sorted(out_dir.rglob("*")):
            if path.is_file():
                rel = path.relative_to(out_dir).as_posix()
                if rel not in planned.files:
                    extra.append(rel)
    return differ, extra


def domain_names(planned: Planned) -> Mapping[str, int]:
    return {d.name: len(d.corrected) for d in planned.domains}
