"""A knowledge-base record corrected by what the runs measured (``python -m harness
corrections``).

The record is the one kept beside the entry (entry.yaml ``origin.record``, byte for byte as
the knowledge base holds it). Only what the runs support changes, each by one rule, read off
the verdicts (harness/aggregate/verdicts.py: a verdict says what a reader may do, and a
correction carries no more than that):

rates        a workaround's ``success_rate`` / a dead end's ``fail_rate`` becomes the measured
             rate where the verdict's figure is understated or overstated (the claimed figure
             lies outside the 95% interval); a confirmed figure stays; inconclusive and not
             measurable ones stay, with why. The sensible reading decides; a literal reading
             that differs is said in ``condition``. A dead end that fails otherwise than
             documented keeps its figure where its documented kind is unmeasured; where it is
             measured, its ``fail_rate`` counts every failure, and ``condition`` says how.
condition    where the outcome depends on the versions: "works on torch 1.13.1–2.13.0; fails
             on torch 1.10.2–1.12.1 (CPU, 54 runs)", from the counted runs per environment.
fix rate     ``verdict.fix_success_rate`` the basis workaround's rate where the fix-rate
             figure is understated or overstated; ``resolvable`` and ``confidence`` then as
             the knowledge base's rules read it (true: rate >= 0.7, false: < 0.2, partial
             between; "true"/"false" only with confidence >= 0.6, the measured confidence
             being one minus the width of the 95% interval, capped at 0.3 below three pieces
             of evidence); ``summary`` gains one measured sentence only where ``resolvable``
             changes.
signature    ``error.signature`` the message torch raised where the documented message's grade
             is variable-parts, reworded or other-error (never from a CPU twin of a CUDA
             message: that verdict is not measurable); ``error.regex`` kept where it matches
             every message the runs showed and none of the controls', else the new message's
             fixed parts (harness/catalogue/msgsearch.py), tested against the same messages.
versions     ``environment.runtime.version_range`` (torch runtimes only) where a version row
             was contradicted: from the first to the last release the error reproduced in.
leads_to     a workaround whose counted runs raised another record's documented error: an
             edge to it with the measured probability.
dates        ``metadata.last_verification`` the newest run's date; ``error.last_confirmed`` the
             newest run that raised the documented message verbatim; ``verdict.last_updated``
             where the verdict changed.
evidence     with ``--pages-url``, a link to the entry's compatibility page in each measured
             item's ``sources`` and ``evidence_count`` one more; ``environment.additional``
             summarises the matrix. ``metadata.review_status`` is never touched.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.aggregate import (
    FAILS_OTHERWISE,
    NOT_MEASURABLE,
    OUTCOME_ORDER,
    OVERSTATED,
    UNDERSTATED,
    EntryAggregate,
    Rate,
    VariantAggregate,
    Verdict,
    pct,
)
from harness.aggregate.verdicts import best_workaround
from harness.catalogue.kbrecord import dumps_like, loads, problems, verdict_problems
from harness.catalogue.msgsearch import message_regex
from harness.outcomes import NOT_COUNTED, SHOWS, Outcome
from harness.spec.entries import Entry

__all__ = [
    "Change",
    "Correction",
    "Left",
    "correct",
    "markdown_suggestions",
    "outcome_lines",
    "record_signatures",
]

_MOVED = (UNDERSTATED, OVERSTATED)
_SHOW_GRADES = frozenset(g.value for g in SHOWS)
_CORRECTED_GRADES = ("variable-parts", "reworded", "other-error")
_NOT_COUNTED = frozenset(o.value for o in NOT_COUNTED)
TOOL = "torch-error-harness"


@dataclass(frozen=True)
class Change:
    field: str  # where in the record: "workarounds[0].success_rate"
    kind: str  # rate, condition, fix rate, resolvable, ... (the review's table groups by it)
    old: Any
    new: Any
    evidence: str  # k/n, versions
    rule: str  # the rule that decided it


@dataclass(frozen=True)
class Left:
    field: str
    why: str


@dataclass
class Correction:
    entry_id: str
    kb_id: str
    kb_path: str
    commit: str
    original: bytes
    record: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    page: str = ""  # the compatibility page (URL, or its path under results/)

    @property
    def text(self) -> bytes:
        return dumps_like(self.original, self.record) if self.changes else self.original

    def set(self, path: str, new: Any, kind: str, evidence: str, rule: str) -> None:
        """Set the field at ``path`` (dots and [i]) to ``new`` and note it, where it differs."""
        parent, key = _walk(self.record, path)
        old = parent.get(key) if isinstance(parent, dict) else parent[key]
        if old == new:
            return
        parent[key] = new
        self.changes.append(Change(path, kind, old, new, evidence, rule))


def _walk(data: Any, path: str) -> tuple[Any, Any]:
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    for part in parts[:-1]:
        data = data[int(part)] if part.isdigit() else data.setdefault(part, {})
    last = parts[-1]
    return data, int(last) if last.isdigit() else last


# -- what the runs say, in words a record can carry -----------------------------------------


def _public(text: str) -> Version | None:
    try:
        return Version(Version(text).public)
    except InvalidVersion:
        return None


def _span(versions: Sequence[Version]) -> str:
    if not versions:
        return ""
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}–{versions[-1]}"


def _devices(agg: EntryAggregate) -> str:
    """The devices of the cells with a counted run (a CUDA cell skipped on a CPU machine is
    not one)."""
    return "/".join(d.upper() for d in _measured_devices(agg)) or "no device"


def _measured_devices(agg: EntryAggregate) -> list[str]:
    return sorted(
        {
            d
            for (_, _, d, _), value in agg.cells.items()
            if any(o not in _NOT_COUNTED for o, _ in value.counts)
        }
    )


def _version_condition(agg: EntryAggregate, v: VariantAggregate, hit: str, miss: str) -> str:
    """Where ``v``'s counted runs went one way or the other, by torch release: "" where every
    release went the same way."""
    torch_of = {e.id: _public(e.torch) for e in agg.envs}
    per: dict[Version, list[int]] = {}
    for env, k, n, *_ in v.by_env:
        version = torch_of.get(env)
        if version is None or not n:
            continue
        kn = per.setdefault(version, [0, 0])
        kn[0] += k
        kn[1] += n
    if not per:
        return ""
    classes = {ver: (hit if k == n else miss if k == 0 else "mixed") for ver, (k, n) in per.items()}
    if len(set(classes.values())) == 1:
        return ""
    runs: list[tuple[str, list[Version]]] = []
    for ver in sorted(classes):
        if runs and runs[-1][0] == classes[ver]:
            runs[-1][1].append(ver)
        else:
            runs.append((classes[ver], [ver]))
    words = []
    for cls, versions in runs:
        if cls == "mixed":
            k = sum(per[x][0] for x in versions)
            n = sum(per[x][1] for x in versions)
            words.append(f"{hit} in {k}/{n} runs on torch {_span(versions)}")
        else:
            words.append(f"{cls} on torch {_span(versions)}")
    return f"{'; '.join(words)} ({_devices(agg)}, {v.overall.n} runs)"


def _torch_of(agg: EntryAggregate, envs: Sequence[str]) -> list[Version]:
    of = {e.id: _public(e.torch) for e in agg.envs}
    return sorted({v for e in envs if (v := of.get(e)) is not None})


def _matrix_summary(agg: EntryAggregate, page: str) -> dict[str, Any]:
    torch = sorted({v for e in agg.envs if (v := _public(e.torch)) is not None})
    lightning = sorted({v for e in agg.envs if e.lightning and (v := _public(e.lightning))})
    python = sorted({v for e in agg.envs if (v := _public(e.python)) is not None})
    summary: dict[str, Any] = {
        "torch": _span(torch),
        "lightning": _span(lightning) or None,
        "python": _span(python),
        "devices": _measured_devices(agg),
        "precisions": sorted({p for _, p in agg.slices}),
        "environments": len(agg.envs),
        "runs": agg.n_counted,
        "last_run": agg.newest[:10] or None,
        "page": page,
    }
    return {k: v for k, v in summary.items() if v is not None}


# -- one record -------------------------------------------------------------------------------


def _verdict_of(agg: EntryAggregate, subject: str, claim: str = "") -> Verdict | None:
    for v in agg.verdicts:
        if v.subject == subject and (not claim or v.claim.startswith(claim)):
            return v
    return None


def _readings(
    agg: EntryAggregate, ref: str
) -> tuple[VariantAggregate | None, list[VariantAggregate]]:
    mine = [v for v in agg.variants if v.claim_ref == ref]
    sensible = next((v for v in mine if v.reading in (None, "sensible")), None)
    return sensible, [v for v in mine if v.reading == "literal"]


def _evidence(agg: EntryAggregate, rate: Rate) -> str:
    torch = sorted({v for e in agg.envs if (v := _public(e.torch)) is not None})
    return f"{rate.text()}; torch {_span(torch)}, {_devices(agg)}"


def _rates(c: Correction, agg: EntryAggregate, unmeasured: Mapping[str, str]) -> None:
    for key, ref_word, rate_key in (
        ("workarounds", "workaround", "success_rate"),
        ("dead_ends", "dead end", "fail_rate"),
    ):
        for i, item in enumerate(c.record.get(key) or []):
            ref = f"{ref_word} {i + 1}"
            where = f"{key}[{i}]"
            v, literals = _readings(agg, ref)
            if v is None:
                c.left.append(
                    Left(f"{where}.{rate_key}", unmeasured.get(ref, "no variant runs it"))
                )
                continue
            verdict = _verdict_of(agg, v.name)
            if verdict is None or not v.overall.n or verdict.verdict == NOT_MEASURABLE:
                why = verdict.why if verdict is not None else "no verdict"
                c.left.append(Left(f"{where}.{rate_key}", f"not measurable: {why}"))
                continue
            works = key == "workarounds"
            n = v.overall.n
            failing = Rate.of(n - v.ok.k, n)
            otherwise = not works and verdict.advice == FAILS_OTHERWISE
            measured = failing if otherwise and v.measured_kind else v.overall
            if item.get(rate_key) is None:  # a document that states no figure (Markdown)
                c.left.append(
                    Left(f"{where}.{rate_key}", f"no figure stated; measured {v.overall.text()}")
                )
                claimed = None
            else:
                claimed = float(item[rate_key])
            moved = claimed is not None and (
                not measured.contains(claimed)
                if otherwise and v.measured_kind
                else verdict.figure in _MOVED
            )
            if moved and measured.value is not None:
                new = round(measured.value, 2)
                why = (
                    f"figure {verdict.figure}: the record's {pct(claimed or 0.0)} lies outside "
                    f"the measured 95% interval"
                )
                if otherwise:
                    why += "; it fails, not as documented, so its failures of every kind count"
                c.set(f"{where}.{rate_key}", new, "rate", _evidence(agg, measured), why)
            elif claimed is not None:
                c.left.append(Left(f"{where}.{rate_key}", f"{verdict.label}: {v.overall.text()}"))
            parts = []
            version_words = _version_condition(
                agg, v, "works" if works else "fails as documented", "fails" if works else "works"
            )
            if version_words:
                parts.append(version_words)
            for lit in literals:
                lv = _verdict_of(agg, lit.name)
                if (
                    lit.overall.n
                    and lv is not None
                    and lv.verdict != NOT_MEASURABLE
                    and not lit.overall.contains(v.overall.value or 0.0)
                ):
                    parts.append(
                        f"read literally ({lit.description}): "
                        f"{'works' if works else 'fails as documented'} in "
                        f"{lit.overall.k}/{lit.overall.n} runs"
                    )
            if otherwise and v.failures:
                top = v.failures[0]
                parts.append(
                    f"it fails, though not as documented: {top.text[:200]} in {top.count}/{n} runs"
                )
            if parts:
                old = str(item.get("condition") or "")
                text = "; ".join(parts)
                new_condition = f"{old} Measured: {text}" if old else f"Measured: {text}"
                c.set(
                    f"{where}.condition",
                    new_condition,
                    "condition",
                    _evidence(agg, v.overall),
                    "where the outcome depends on the versions, on the reading, or fails "
                    "otherwise than documented",
                )


def _confidence(rate: Rate, evidence_count: int) -> float:
    width = (rate.high or 1.0) - (rate.low or 0.0)
    confidence = round(max(0.0, 1.0 - width), 2)
    return min(confidence, 0.3) if evidence_count < 3 else confidence


def _resolvable(rate: float, confidence: float) -> str:
    if rate >= 0.7 and confidence >= 0.6:
        return "true"
    if rate < 0.2 and confidence >= 0.6:
        return "false"
    return "partial"


def _fix_rate(c: Correction, agg: EntryAggregate, date: str) -> bool:
    """The verdict block; True where it changed."""
    verdict = _verdict_of(agg, "", "fix rate")
    before = len(c.changes)
    workarounds = [v for v in agg.variants if v.kind == "workaround"]
    best = best_workaround(workarounds)
    if verdict is None or best is None or verdict.figure not in _MOVED:
        label = verdict.label if verdict is not None else "no workaround variant"
        c.left.append(Left("verdict.fix_success_rate", label))
        return False
    rate = round(best.overall.value or 0.0, 2)
    evidence = f"best workaround {best.name}: {_evidence(agg, best.overall)}"
    c.set(
        "verdict.fix_success_rate",
        rate,
        "fix rate",
        evidence,
        f"figure {verdict.figure}: the record's rate lies outside the basis workaround's 95% "
        "interval",
    )
    v = c.record["verdict"]
    count = int(c.record["metadata"]["evidence_count"])
    old_ok = not verdict_problems(v["resolvable"], rate, v["confidence"], count)
    resolvable = _resolvable(rate, _confidence(best.overall, count))
    if resolvable != v["resolvable"] or not old_ok:
        confidence = _confidence(best.overall, count)
        rule = (
            "the knowledge base's rules: true needs rate >= 0.7, false < 0.2, both confidence "
            ">= 0.6 (one minus the width of the 95% interval; at most 0.3 below 3 pieces of "
            "evidence); partial otherwise"
        )
        old_resolvable = v["resolvable"]
        c.set("verdict.resolvable", resolvable, "resolvable", evidence, rule)
        c.set("verdict.confidence", confidence, "confidence", evidence, rule)
        if resolvable != old_resolvable:
            torch = sorted({x for e in agg.envs if (x := _public(e.torch)) is not None})
            sentence = (
                f"Measured on torch {_span(torch)} ({_devices(agg)}, {best.overall.n} runs of "
                f"the best workaround): it works in {pct(best.overall.value)} of them."
            )
            c.set(
                "verdict.summary",
                f"{v['summary'].rstrip()} {sentence}",
                "summary",
                evidence,
                f"resolvable changed ({old_resolvable} → {resolvable}): one measured sentence "
                "added",
            )
    if len(c.changes) > before:
        c.set("verdict.last_updated", date, "date", f"newest run {date}", "the verdict changed")
        return True
    return False


def _full(m: Any, limit: int = 300) -> str:
    """A message as a record's signature writes it: one line (a multi-line message's lines
    joined by spaces), at most ``limit`` characters."""
    lines = []
    for line in m.message.splitlines():
        line = line.strip()
        # a source excerpt (TorchScript's, a traceback's) names the reproducer's files: the
        # message ends before it
        if line.startswith(("File ", "Traceback")) or "repros/" in line:
            break
        if line:
            lines.append(line)
    text = " ".join(lines)
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0]
    return f"{m.type}: {text}" if text else m.type


def _regex_for(seen: Sequence[str], controls: Sequence[str], old: str) -> tuple[str | None, str]:
    """The record's regex where it matches every message seen and no control's; else one
    made of the first seen message's fixed parts where that does; None: neither."""

    def fits(pattern: str) -> bool:
        try:
            rx = re.compile(pattern)
        except re.error:
            return False
        return all(rx.search(s) for s in seen) and not any(rx.search(t) for t in controls)

    if fits(old):
        return old, "the record's regex matches every message the runs showed and no control's"
    first = seen[0]
    exc_type, _, message = first.partition(": ")
    candidate = re.escape(exc_type) + ": " + message_regex(message) if message else re.escape(first)
    if fits(candidate):
        return candidate, (
            "the record's regex missed a message the runs showed or matched a control's: the "
            "new message's fixed parts, in order (msgsearch.message_regex), match every one "
            "and no control's"
        )
    return None, "no pattern of the seen message's fixed parts matches them all without a control's"


def _signature(c: Correction, agg: EntryAggregate, entry: Entry) -> None:
    verdict = _verdict_of(agg, "", "documented message")
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    messages = [m for b in baselines for m in b.messages]
    if verdict is None or verdict.verdict == NOT_MEASURABLE:
        why = verdict.why if verdict is not None else "no baseline ran"
        c.left.append(Left("error.signature", f"not measurable: {why}"))
        return
    shown = [m for m in messages if m.grade in _SHOW_GRADES]
    seen: list[str] = []
    if verdict.grade in _CORRECTED_GRADES:
        # torch's words for the documented situation: a message of that grade raised in most
        # of the baselines' counted runs together (what one reading of several raises, or a
        # few runs, is not the situation's)
        total = sum(b.overall.n for b in baselines)
        counts: dict[tuple[str, str], int] = {}
        envs: dict[tuple[str, str], set[str]] = {}
        for m in messages:
            if m.grade == verdict.grade:
                key = (m.type, m.message)
                counts[key] = counts.get(key, 0) + m.count
                envs.setdefault(key, set()).update(m.envs)
        chosen = [(n, key) for key, n in counts.items() if total and n / total > 0.5]
        if chosen:
            count, key = max(chosen)
            best = next(m for m in messages if (m.type, m.message) == key)
            new = _full(best)
            c.set(
                "error.signature",
                new,
                "signature",
                f"raised in {count}/{total} counted baseline runs "
                f"(torch {_span(_torch_of(agg, sorted(envs[key])))}); grade {verdict.grade}",
                f"the documented message's grade is {verdict.grade}: torch's own words instead",
            )
            seen.append(new)
        else:
            most = max(messages, key=lambda m: m.count, default=None)
            c.left.append(
                Left(
                    "error.signature",
                    f"{verdict.label}; no message of grade {verdict.grade} was raised in most "
                    f"of the baselines' counted runs"
                    + (f" (most often: {_full(most, 160)}, {most.count} runs)" if most else ""),
                )
            )
    else:
        c.left.append(Left("error.signature", f"{verdict.label}"))
    seen += [_full(m) for m in shown if _full(m) not in seen]
    if not seen:
        c.left.append(Left("error.regex", "no run showed the documented message"))
        return
    controls = [_full(m) for v in agg.variants if v.kind == "control" for m in v.messages]
    old = str(c.record["error"]["regex"])
    new, why = _regex_for(seen, controls, old)
    if new is None:
        c.left.append(Left("error.regex", why))
    elif new != old:
        c.set(
            "error.regex",
            new,
            "regex",
            f"{len(seen)} distinct messages; {len(controls)} control messages",
            why,
        )


def _bounds(spec: str) -> Version | None:
    try:
        specs = SpecifierSet(spec)
    except InvalidSpecifier:
        return None
    lows = [Version(s.version) for s in specs if s.operator in (">=", ">", "==", "~=")]
    return min(lows) if lows else None


def _version_range(c: Correction, agg: EntryAggregate) -> None:
    runtime = c.record["environment"]["runtime"]
    rows = [v for v in agg.verdicts if v.claim.startswith("version table")]
    if runtime.get("name") != "pytorch":
        c.left.append(
            Left(
                "environment.runtime.version_range",
                f"a range over {runtime.get('name')}, not torch",
            )
        )
        return
    if not any(v.verdict == "contradicted" for v in rows):
        label = ", ".join(sorted({v.label for v in rows})) or "no version row"
        c.left.append(Left("environment.runtime.version_range", label))
        return
    torch_of = {e.id: _public(e.torch) for e in agg.envs}
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    measured = sorted(
        {torch_of[e] for b in baselines for r in b.ranges if r.slice == "*" for e in r.measured}
        - {None}
    )
    reproduced = sorted(
        {torch_of[e] for b in baselines for r in b.ranges if r.slice == "*" for e in r.reproduced}
        - {None}
    )
    if not reproduced:
        c.left.append(Left("environment.runtime.version_range", "it reproduced nowhere"))
        return
    low = reproduced[0]
    old_low = _bounds(str(runtime.get("version_range") or ""))
    if low == measured[0] and old_low is not None and old_low <= low:
        lower = f">={old_low}"  # it reproduces from the oldest measured: the record's bound stays
    else:
        lower = f">={low}"
    upper = ""
    if reproduced[-1] < measured[-1]:
        after = next(x for x in measured if x > reproduced[-1])
        upper = f",<{after}"
    c.set(
        "environment.runtime.version_range",
        lower + upper,
        "version range",
        f"reproduced on torch {_span(reproduced)} of {_span(measured)} measured",
        "a version row was contradicted: the range is where the baseline reproduced (the "
        "record's lower bound kept where it reproduces from the oldest release measured)",
    )


def record_signatures(entry: Entry) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A kept record's id and the (type, message pattern) pairs that read as its documented
    error: its signature, and torch's own wording where entry.yaml gives one (``reworded``)."""
    pairs = [(entry.signature.type, entry.signature.message)]
    if entry.reworded is not None:
        pairs.append((entry.reworded.type or entry.signature.type, entry.reworded.message))
    return str(entry.origin.get("id")), tuple(pairs)


def _leads_to(
    c: Correction,
    agg: EntryAggregate,
    others: Mapping[str, tuple[str, tuple[tuple[str, str], ...]]],
) -> None:
    """``others``: entry id -> ``record_signatures`` of each kept record."""
    graph = c.record.setdefault("transition_graph", {})
    edges = graph.setdefault("leads_to", [])
    present = {e.get("error_id") for e in edges}
    for v in agg.variants:
        if v.kind != "workaround" or v.reading == "literal" or not v.overall.n:
            continue
        for f in v.failures:
            exc_type, _, message = f.text.partition(": ")
            for eid, (kb_id, pairs) in sorted(others.items()):
                if eid == c.entry_id or kb_id in present or kb_id == c.kb_id:
                    continue
                if not any(_reads_as(exc_type, message, t, p) for t, p in pairs):
                    continue
                probability = round(f.count / v.overall.n, 2)
                edge = {
                    "error_id": kb_id,
                    "probability": probability,
                    "condition": f"after {v.claim_ref or v.name}: measured {f.count}/{v.overall.n} runs",
                }
                edges.append(edge)
                present.add(kb_id)
                c.changes.append(
                    Change(
                        f"transition_graph.leads_to[{len(edges) - 1}]",
                        "leads to",
                        None,
                        edge,
                        f"{v.name}: {f.text[:160]} in {f.count}/{v.overall.n} counted runs",
                        "a workaround's runs raised another record's documented error",
                    )
                )


def _reads_as(exc_type: str, message: str, sig_type: str, pattern: str) -> bool:
    if exc_type.split(".")[-1] != sig_type.split(".")[-1]:
        return False
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def _cell_runs(agg: EntryAggregate) -> Iterator[tuple[VariantAggregate, Any, str, str, range]]:
    """Each cell's trials in ``agg.trials``, which holds them in the page's order (slice,
    variant, environment): (variant, environment, device, precision, their indices)."""
    offset = 0
    for d, p in agg.slices:
        for v in agg.variants:
            for e in agg.envs:
                value = agg.cells.get((v.name, e.id, d, p))
                count = value.trials if value is not None else 0
                yield v, e, d, p, range(offset, offset + count)
                offset += count


def _last_confirmed(agg: EntryAggregate) -> str:
    """The newest start date of a baseline run that raised the documented message verbatim."""
    t = agg.trials
    reproduced = OUTCOME_ORDER.index(Outcome.REPRODUCED)
    newest = ""
    for v, _, _, _, runs in _cell_runs(agg):
        if v.kind == "baseline":
            for i in runs:
                if t.outcome[i] == reproduced:
                    newest = max(newest, t.texts.texts[t.started[i]][:10])
    return newest


def correct(
    entry: Entry,
    agg: EntryAggregate,
    original: bytes,
    *,
    others: Mapping[str, tuple[str, tuple[tuple[str, str], ...]]] = {},
    unmeasured: Mapping[str, str] = {},
    page: str = "",
    page_url: str | None = None,
    known_ids: Collection[str] = (),
) -> Correction:
    """The record ``original`` as the runs of ``agg`` say it should read."""
    record = loads(original)
    c = Correction(
        entry_id=entry.id,
        kb_id=str(entry.origin.get("id", "")),
        kb_path=str(entry.origin.get("path", "")),
        commit=str(entry.origin.get("commit", "")),
        original=original,
        record=copy.deepcopy(record),
        page=page_url or page,
    )
    date = agg.newest[:10]
    _rates(c, agg, unmeasured)
    _fix_rate(c, agg, date)
    _signature(c, agg, entry)
    _version_range(c, agg)
    _leads_to(c, agg, others)
    if not c.changes and all(v.verdict == NOT_MEASURABLE for v in agg.verdicts):
        return c  # nothing measured: the record stays as it is
    confirmed = _last_confirmed(agg)
    if confirmed and confirmed > str(c.record["error"].get("last_confirmed") or ""):
        c.set(
            "error.last_confirmed",
            confirmed,
            "date",
            "the newest baseline run that raised the documented message verbatim",
            "the documented message was seen again",
        )
    if page_url:
        added = False
        for key in ("workarounds", "dead_ends"):
            for i, item in enumerate(c.record.get(key) or []):
                measured = any(ch.field.startswith(f"{key}[{i}]") for ch in c.changes)
                if measured and page_url not in (item.get("sources") or []):
                    c.set(
                        f"{key}[{i}].sources",
                        [*(item.get("sources") or []), page_url],
                        "source",
                        page_url,
                        "the measured compatibility page, for the changed claim",
                    )
                    added = True
        if added:
            count = int(c.record["metadata"]["evidence_count"])
            c.set(
                "metadata.evidence_count",
                count + 1,
                "evidence count",
                page_url,
                "one more piece of evidence: the measured page",
            )
    environment = c.record["environment"]
    additional = dict(environment.get("additional") or {})
    additional[TOOL] = _matrix_summary(agg, c.page)
    c.set(
        "environment.additional",
        additional,
        "matrix",
        f"{agg.n_counted} counted runs",
        "the matrix the corrections were measured on",
    )
    if date:
        c.set("metadata.last_verification", date, "date", f"newest run {date}", "the newest run")
    # the record's own references are the knowledge base's business; those added here name
    # a kept record (``others``), which the knowledge base holds
    added = {ch.new["error_id"] for ch in c.changes if ch.kind == "leads to"}
    found = problems(c.record) + [
        f"leads_to names {ref!r}, not a record of the knowledge base"
        for ref in sorted(added - set(known_ids))
        if known_ids
    ]
    if found:
        raise ValueError(
            f"{entry.id}: the corrected record breaks the knowledge base's rules: {found}"
        )
    return c


# -- outcome lines: the knowledge base's report_outcome feed -----------------------------------


def outcome_lines(c: Correction, agg: EntryAggregate) -> list[dict[str, Any]]:
    """One line per counted run of each workaround (its sensible reading), in the shape the
    knowledge base's ``report_outcome`` appends: success is the run being ok."""
    actions = {
        f"workaround {i + 1}": str(w.get("action") or "")
        for i, w in enumerate(loads(c.original).get("workarounds") or [])
    }
    t = agg.trials
    lines: list[dict[str, Any]] = []
    for v, e, d, p, runs in _cell_runs(agg):
        wanted = v.kind == "workaround" and v.reading != "literal" and v.claim_ref in actions
        if wanted and (e.id, d, p) in v.scope:
            for i in runs:
                outcome = OUTCOME_ORDER[int(t.outcome[i])].value
                if outcome in _NOT_COUNTED:
                    continue
                versions, _ = t.texts.objects[int(t.versions[i])]
                started = t.texts.texts[int(t.started[i])]
                lines.append(
                    {
                        "timestamp": started,
                        "error_id": c.kb_id,
                        "workaround_action": actions[str(v.claim_ref)],
                        "success": outcome == Outcome.OK.value,
                        "canon_exists": True,
                        "environment": {
                            "python": str(versions.get("python") or e.python),
                            "torch": str(versions.get("torch") or e.torch),
                            "lightning": str(versions.get("lightning") or e.lightning),
                            "device": d,
                            "precision": p,
                        },
                        "notes": (
                            f"{TOOL}: entry {c.entry_id}, variant {v.name}, environment "
                            f"{e.id}, trial {int(t.trial[i])}: {outcome}"
                        ),
                    }
                )
    lines.sort(key=lambda x: (x["timestamp"], x["notes"]))
    return lines


# -- the Markdown entry (the seeds' format): the same rules, as a suggested block ------------------


def _as_record(entry: Entry) -> dict[str, Any]:
    """The facts of a Markdown entry in a record's shape, for the same rules to read."""
    rates: dict[str, float | None] = {}
    for v in entry.variants:
        if v.claim_ref and (v.claim_ref not in rates or rates[v.claim_ref] is None):
            rates[v.claim_ref] = v.claimed_rate

    def items(word: str, key: str) -> list[dict[str, Any]]:
        numbers = [int(r.split()[-1]) for r in rates if r.rsplit(" ", 1)[0] == word]
        return [
            {"action": f"{word} {i}", key: rates.get(f"{word} {i}")}
            for i in range(1, max(numbers, default=0) + 1)
        ]

    message = str(entry.origin.get("message") or entry.title)
    return {
        "error": {"signature": message, "regex": ""},
        "environment": {"runtime": {"name": "markdown", "version_range": ""}},
        "verdict": {
            "resolvable": "partial",
            "fix_success_rate": entry.claims.fix_rate,
            "confidence": 1.0,
            "summary": "",
        },
        "workarounds": items("workaround", "success_rate"),
        "dead_ends": items("dead end", "fail_rate"),
        "metadata": {"evidence_count": 3},
    }


def _markdown_field(path: str) -> str | None:
    m = re.fullmatch(r"(workarounds|dead_ends)\[(\d+)\]\.(\w+)", path)
    if m:
        what = "Workaround" if m.group(1) == "workarounds" else "Dead end"
        i = int(m.group(2)) + 1
        if m.group(3) == "condition":
            return f"{what} {i}: when it holds"
        return f"{what} {i} ({'% success' if what == 'Workaround' else '% fail'})"
    return {"verdict.fix_success_rate": "Fix Rate", "error.signature": "Title (the error)"}.get(
        path
    )


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return pct(value)
    text = "–" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_suggestions(entry: Entry, agg: EntryAggregate) -> str:
    """What the runs would change in a Markdown entry's own fields (Fix Rate, each
    workaround's and dead end's figure and condition, the title's error, the Version
    Compatibility rows), by the rules `corrections` applies to a JSON record: the entry
    document's ``suggested-corrections`` block. Nothing is applied to source.md."""
    record = _as_record(entry)
    c = Correction(entry.id, "", "", "", b"", copy.deepcopy(record))
    _rates(c, agg, {})
    if record["verdict"]["fix_success_rate"] is not None:
        c.record["metadata"]["evidence_count"] = 3
        c.record["verdict"]["last_updated"] = ""
        _fix_rate(c, agg, "")
    _signature(c, agg, entry)
    rows = []
    for ch in c.changes:
        name = _markdown_field(ch.field)
        if name is not None:
            rows.append(
                f"| {name} | {_shown(ch.old)} | {_shown(ch.new)} | {_shown(ch.evidence)} | "
                f"{_shown(ch.rule)} |"
            )
    for v in agg.verdicts:
        if v.claim.startswith("version table") and v.verdict == "contradicted":
            rows.append(
                f"| Version Compatibility: {_shown(v.subject)} | {_shown(v.claimed)} | "
                f"{_shown(v.measured)} | n={v.n} | {_shown(v.why[:300])} |"
            )
    lines = [
        "### Suggested corrections",
        "",
        "What the runs would change in the source document's own fields, by the rules "
        "`python -m harness corrections` applies to a knowledge-base record "
        "(docs/how-to/knowledge-base.md); suggested only, never applied to source.md.",
        "",
    ]
    if rows:
        lines += [
            "| field | the document says | the runs say | evidence | rule |",
            "|---|---|---|---|---|",
            *rows,
        ]
    else:
        lines.append("Nothing: no measured figure, condition or message differs from the document.")
    left = [
        f"- {name}: {_shown(item.why[:300])}"
        for item in c.left
        if (name := _markdown_field(item.field)) is not None
    ]
    if left:
        lines += ["", "Left as the document says:", "", *left]
    return "\n".join(lines) + "\n"
