"""Claimed vs measured: the verdict rules, one function per kind of claim. Every rule is
stated in docs/reference/outcomes-and-verdicts.md; this module is where each is applied."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from harness.aggregate.model import (
    CONFIRMED,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    EntryAggregate,
    EnvInfo,
    MessageSeen,
    VariantAggregate,
    Verdict,
    _public,
    _version,
)
from harness.aggregate.stats import Rate, pct
from harness.domain import PRESENT_STATUSES, parse_claim_spec
from harness.outcomes import NOT_COUNTED, Outcome

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = [
    "MARGIN",
    "documented_failure_text",
    "failed_silently_as_documented",
    "judge_most",
    "judge_rate",
    "verdicts",
]

# a stated rate is read as "about c": c ± MARGIN (docs/reference/outcomes-and-verdicts.md)
MARGIN = 0.10
_NOT_COUNTED_VALUES = frozenset(o.value for o in NOT_COUNTED)
_REPRODUCED_VALUE = Outcome.REPRODUCED.value
_WRONG_RESULT_VALUE = Outcome.WRONG_RESULT.value


def failed_silently_as_documented(
    postconditions: Collection[str], outcome: str, checks: Mapping[str, Any]
) -> bool:
    """Whether one run of a dead end that declares its documented failure as silent
    (entry.yaml ``fails_as``: ``postconditions``) failed as documented: it ended
    ``wrong_result`` and at least one of those postconditions failed. A wrong_result on
    other postconditions only is a failure for another reason (docs/reference/outcomes-and-verdicts.md).
    ``outcome`` is the outcome's value; ``checks`` the record's postconditions."""
    if outcome != _WRONG_RESULT_VALUE or not postconditions:
        return False
    for name in postconditions:
        check = checks.get(name)
        if isinstance(check, Mapping) and check.get("ok") is False:
            return True
    return False


def judge_rate(
    claimed: float | None,
    measured: Rate,
    why_empty: str,
    implicit: str = "works",
    higher: str = "",
) -> tuple[str, str]:
    """The one rule for rate claims: (verdict, reason). A stated rate c is contradicted when
    c lies outside the measured 95% interval, confirmed when the whole interval lies within
    c ± MARGIN (the claim read as "about c"), inconclusive otherwise. With no stated rate
    the claim is the implicit one, "it works" (``implicit``; see ``judge_most``).
    ``higher``: what a rate above the claim means to a reader (a dead end that fails more
    often than documented is still to be avoided), said after a contradiction of that side."""
    if measured.n == 0:
        return NOT_MEASURABLE, why_empty
    if claimed is None:
        return judge_most(measured, implicit)
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the 95% interval {pct(low)[:-1]}–{pct(high)}"
    if not measured.contains(claimed):
        side = "above" if claimed > high else "below"
        meaning = f": {higher}" if higher and side == "below" else ""
        return CONTRADICTED, f"claimed {pct(claimed)} lies {side} {interval}{meaning}"
    if claimed - MARGIN - 1e-12 <= low and high <= claimed + MARGIN + 1e-12:
        return CONFIRMED, f"{interval} lies within claimed {pct(claimed)} ± {pct(MARGIN)}"
    return INCONCLUSIVE, (
        f"claimed {pct(claimed)} lies in {interval}, which also holds rates more than "
        f"{pct(MARGIN)} away from it"
    )


def judge_most(measured: Rate, what: str) -> tuple[str, str]:
    """An implicit claim, "this works" or "this fails", read as "in most applicable runs":
    confirmed when the whole 95% interval lies above 50%, contradicted when it lies below,
    inconclusive otherwise."""
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the 95% interval {pct(low)[:-1]}–{pct(high)}"
    claim = f"no rate stated: the claim is that it {what} in most runs"
    if low > 0.5:
        return CONFIRMED, f"{claim}; {interval} lies above 50%"
    if high < 0.5:
        return CONTRADICTED, f"{claim}; {interval} lies below 50%"
    return INCONCLUSIVE, f"{claim}; {interval} spans 50%"


def _message_text(m: MessageSeen | None) -> str:
    return "" if m is None else f"{m.type}: {m.message}"


def _why_no_applicable(agg: EntryAggregate, v: VariantAggregate) -> str:
    baselines = [b for b in agg.variants if b.kind == "baseline"]
    if not v.runs:
        return "the variant has no runs"
    if v.kind in ("workaround", "dead_end"):
        if not any(b.overall.k for b in baselines):
            if not any(b.overall.n for b in baselines):
                return "no baseline run was applicable (all unsupported, skipped or env_failed), so no cell reproduces"
            why = "the baseline never reproduced, so there is no cell in which to test it"
            if v.anywhere.n:
                seen = "; ".join(f"{_message_text(m)} (×{m.count})" for m in v.messages[:2])
                why += (
                    f"; where it ran, it was "
                    f"{'ok' if v.kind == 'workaround' else 'failing as documented'} in "
                    f"{v.anywhere.k}/{v.anywhere.n} applicable runs"
                    + (f" ({seen})" if seen else "")
                )
            return why
        return "none of its runs in reproducing cells was applicable (unsupported, skipped or env_failed)"
    return "all its runs were unsupported, skipped or env_failed"


_EXPECTED = {
    "workaround": frozenset({Outcome.OK.value}),
    "control": frozenset({Outcome.OK.value}),
    "dead_end": frozenset({Outcome.REPRODUCED.value, Outcome.RELATED.value}),
    "baseline": frozenset({Outcome.REPRODUCED.value}),
}


def verdicts(entry: Entry | None, agg: EntryAggregate) -> tuple[Verdict, ...]:
    """Every claim of the entry, judged against its aggregate (docs/reference/outcomes-and-verdicts.md)."""
    out: list[Verdict] = []
    baselines = [v for v in agg.variants if v.kind == "baseline"]
    workarounds = [v for v in agg.variants if v.kind == "workaround"]
    claims = entry.claims if entry is not None else None

    # the documented message
    out.append(_message_verdict(agg, baselines))

    # fix rate
    if claims is not None and claims.fix_rate is not None:
        out.append(_fix_rate_verdict(claims.fix_rate, agg, workarounds))

    # version table
    if claims is not None:
        for row in claims.version_table:
            out.append(_version_verdict(row, agg, baselines))

    # per-variant rates: a stated rate, or the implicit claim of an unrated recommendation
    for v in agg.variants:
        if v.kind not in ("workaround", "dead_end") or (
            v.claim_ref is None and v.claimed_rate is None
        ):
            continue
        out.append(_variant_verdict(agg, v))
    return tuple(out)


def _fix_rate_verdict(
    fix_rate: float, agg: EntryAggregate, workarounds: list[VariantAggregate]
) -> Verdict:
    measured_w = [w for w in workarounds if w.overall.n]
    pooled = Rate.of(sum(w.overall.k for w in workarounds), sum(w.overall.n for w in workarounds))
    if not workarounds:
        return Verdict(
            "fix rate",
            "",
            pct(fix_rate),
            "–",
            NOT_MEASURABLE,
            "the entry has no workaround variant",
        )
    if not measured_w:
        why = _why_no_applicable(agg, workarounds[0])
        return Verdict(
            "fix rate", "", pct(fix_rate), "0/0 (no applicable runs)", NOT_MEASURABLE, why
        )
    best = max(measured_w, key=lambda w: (w.overall.value, w.overall.n, _neg(w.name)))
    verdict, why = judge_rate(
        fix_rate, best.overall, "", higher="it works more often than the document says"
    )
    why = f"basis: best workaround {best.name!r}; {why}; pooled workaround runs ok: {pooled.text()}"
    seen = ""
    if verdict != CONFIRMED:
        seen = _failures_text(best, _EXPECTED["workaround"])
    return Verdict(
        "fix rate", "", pct(fix_rate), best.overall.text(), verdict, why, seen, best.overall.n
    )


def _variant_verdict(agg: EntryAggregate, v: VariantAggregate) -> Verdict:
    what = v.claim_ref or v.kind.replace("_", " ")
    label = f"{what}: {v.metric}" + (f" ({v.reading} reading)" if v.reading else "")
    implicit = "works" if v.kind == "workaround" else "fails as documented"
    higher = (
        "it works more often than the document says"
        if v.kind == "workaround"
        else "it fails as documented more often than the document says (the advice to avoid "
        "it holds)"
        if v.kind == "dead_end"
        else ""
    )
    verdict, why = judge_rate(
        v.claimed_rate, v.overall, _why_no_applicable(agg, v), implicit, higher
    )
    documented = documented_failure_text(v.fails_as)
    if v.kind == "dead_end" and v.overall.n:
        # a failure for another reason is named, never counted as this claim's failure
        ways = []
        if v.related.k:
            ways.append(f"its own expected error in {v.related.k}")
        if v.silent.k:
            ways.append(f"{documented} in {v.silent.k}")
        why += (
            f"; failed as documented in {v.overall.k}/{v.overall.n}"
            + (f" ({', '.join(ways)})" if ways else "")
            + f", for another reason in {v.failed_otherwise}/{v.overall.n}"
            + f", ok in {v.ok.k}/{v.overall.n}"
        )
    seen = ""
    if v.overall.n and (verdict != CONFIRMED or (v.kind == "dead_end" and v.failed_otherwise)):
        seen = _failures_text(v, _EXPECTED.get(v.kind, _EXPECTED["workaround"]))
    claimed = pct(v.claimed_rate) if v.claimed_rate is not None else f"it {implicit} (no rate)"
    if documented:
        claimed += f"; documented failure: {documented}"
    return Verdict(label, v.name, claimed, v.overall.text(), verdict, why, seen, v.overall.n)


def documented_failure_text(postconditions: tuple[str, ...]) -> str:
    """A dead end's declared silent failure as the reports say it ("" when none)."""
    if not postconditions:
        return ""
    return f"postcondition {' or '.join(postconditions)} fails"


def _failures_text(v: VariantAggregate, expected: frozenset[str]) -> str:
    """What the variant's runs did instead of what its claim expects, most frequent first:
    exceptions (type: message) and, for runs without one, the outcome and its reason."""
    seen = [
        (f.count, f.text)
        for f in v.failures
        if f.outcome not in expected and f.outcome != "ok" and not f.as_documented
    ]
    seen.sort(key=lambda cf: -cf[0])
    return "; ".join(f"{text} (×{count})" for count, text in seen[:3])


def _neg(s: str) -> tuple[int, ...]:
    # for max(): ties on rate and n go to the alphabetically first name
    return tuple(-ord(c) for c in s)


def _messages_instead(baselines: list[VariantAggregate], envs: set[str] | None = None) -> str:
    """Baseline exceptions other than the documented one (a variant's related error
    included), most frequent first (top 3)."""
    instead: Counter[tuple[str, str]] = Counter()
    for b in baselines:
        for m in b.messages:
            if m.outcomes == (Outcome.REPRODUCED.value,):
                continue
            if envs is not None and not envs.intersection(m.envs):
                continue
            instead[(m.type, m.message)] += m.count
    top = sorted(instead.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(f"{t}: {msg} (×{c})" for (t, msg), c in top[:3])


def _message_verdict(agg: EntryAggregate, baselines: list[VariantAggregate]) -> Verdict:
    """The documented message occurs: one reproduction shows it; none, in enough applicable
    runs that an error occurring in half of them would have been seen (the 95% interval of
    0/n lies below 50%), contradicts it; fewer runs are inconclusive."""
    claimed = f"{agg.signature_type}: {agg.signature_text}" if agg.signature_type else "–"
    k = sum(b.overall.k for b in baselines)
    n = sum(b.overall.n for b in baselines)
    seen = _messages_instead(baselines)
    if not baselines:
        return Verdict(
            "documented message",
            "",
            claimed,
            "–",
            NOT_MEASURABLE,
            "the entry has no baseline variant",
        )
    measured = f"documented error in {k}/{n} applicable baseline runs"
    related = [b for b in baselines if b.related.k]
    if related:
        measured += (
            f", the variant's related error in {sum(b.related.k for b in related)}/{n} ("
            + ", ".join(b.name for b in related)
            + ")"
        )
    if k:
        why = "the documented signature was raised"
        if related:
            why += "; a variant's own (related) error is counted apart, never as the documented one"
        return Verdict("documented message", "", claimed, measured, CONFIRMED, why, "", n)
    if not n:
        why = "no baseline run was applicable (all unsupported, skipped or env_failed)"
        if not any(b.runs for b in baselines):
            why = "the baseline has no runs"
        return Verdict("documented message", "", claimed, measured, NOT_MEASURABLE, why)
    why = "never seen" + (
        "; seen instead: " + seen if seen else "; the baseline raised no exception"
    )
    retyped = _documented_message_other_type(agg, baselines)
    if retyped:
        why = f"the documented message was raised as {retyped}, not {agg.signature_type}; " + why
    high = Rate.of(0, n).high or 0.0
    if high < 0.5:
        return Verdict("documented message", "", claimed, measured, CONTRADICTED, why, seen, n)
    why += f"; in {n} runs an error occurring in up to {pct(high)} of runs could stay unseen"
    return Verdict("documented message", "", claimed, measured, INCONCLUSIVE, why, seen, n)


def _documented_message_other_type(agg: EntryAggregate, baselines: list[VariantAggregate]) -> str:
    """The type of an exception that carried the documented message under another type
    (a document naming ValueError where the framework raises its own exception), or ""."""
    if not agg.signature_message:
        return ""
    pattern = re.compile(agg.signature_message, re.DOTALL)
    for b in baselines:
        for m in b.messages:
            if Outcome.REPRODUCED.value not in m.outcomes and pattern.search(m.message):
                return m.type
    return ""


def _env_version(env: EnvInfo, field_name: str) -> Version | None:
    return _public(_version(getattr(env, field_name)))


def _baseline_by_env(
    agg: EntryAggregate, baselines: list[VariantAggregate]
) -> dict[str, list[int]]:
    """env id -> [documented reproductions, applicable baseline runs], any device/precision."""
    names = {b.name for b in baselines}
    out: dict[str, list[int]] = {}
    for (variant, env, _, _), value in agg.cells.items():
        if variant not in names:
            continue
        slot = out.setdefault(env, [0, 0])
        for o, c in value.counts:
            if o in _NOT_COUNTED_VALUES:
                continue
            slot[1] += c
            if o == _REPRODUCED_VALUE:
                slot[0] += c
    return out


def _outside_bounds(
    row: Any, envs: Iterable[EnvInfo], field_name: str, counts: Mapping[str, Sequence[int]]
) -> list[str]:
    """The row's introduced / deprecated bounds that a reproduction falls outside of (each
    contradicts the row), named with the first environment that shows it."""
    problems: list[str] = []
    for bound, below in (("introduced", True), ("deprecated", False)):
        raw = getattr(row, bound)
        bv = _public(_version(raw)) if raw else None
        if bv is None:
            continue
        for e in envs:
            ev = _env_version(e, field_name)
            if ev is None or not counts.get(e.id, (0, 0))[0]:
                continue
            if (below and ev < bv) or (not below and ev >= bv):
                problems.append(
                    f"reproduces in {e.id}, {'before' if below else 'at/after'} {bound} {raw}"
                )
                break
    return problems


def _version_verdict(row: Any, agg: EntryAggregate, baselines: list[VariantAggregate]) -> Verdict:
    """A version-table row, judged environment by environment: an environment where the
    documented error reproduced shows it present; one where it never did shows it absent
    only when the 95% interval of 0/n lies below 50%, else that environment is undecided."""
    label = f"version table: {row.spec} ({row.status})"
    claimed = row.status + "".join(
        f", {k} {v}"
        for k, v in (("introduced", row.introduced), ("deprecated", row.deprecated))
        if v
    )
    try:
        field_name, spec = parse_claim_spec(row.spec)
    except ValueError as exc:  # entries validate at load; a hand-built claim may not
        return Verdict(label, row.spec, claimed, "–", NOT_MEASURABLE, str(exc))
    counts = _baseline_by_env(agg, baselines)
    satisfying: list[EnvInfo] = []
    for e in agg.envs:
        v = _env_version(e, field_name)
        if v is not None and spec.contains(v, prereleases=True):
            satisfying.append(e)
    applicable = [e for e in satisfying if counts.get(e.id, (0, 0))[1]]
    rep = [e for e in applicable if counts[e.id][0]]
    absent = [
        e
        for e in applicable
        if not counts[e.id][0] and (Rate.of(0, counts[e.id][1]).high or 0.0) < 0.5
    ]
    undecided = [e for e in applicable if e not in rep and e not in absent]
    n = sum(counts[e.id][1] for e in applicable)
    measured = f"reproduces in {len(rep)}/{len(applicable)} measured envs satisfying the spec"
    if undecided:
        measured += f" ({len(undecided)} with too few runs to tell)"
    if not satisfying:
        why = f"no measured environment satisfies {row.spec}"
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE, why)
    if not applicable:
        why = (
            "every baseline run in the environments satisfying the spec was unsupported, "
            "skipped or env_failed"
        )
        return Verdict(label, row.spec, claimed, measured, NOT_MEASURABLE, why)
    problems = _outside_bounds(row, agg.envs, field_name, counts)
    present = row.status.strip().lower() in PRESENT_STATUSES
    if present and absent:
        problems.insert(0, "does not reproduce in " + ", ".join(e.id for e in absent))
    elif not present and rep:
        problems.insert(0, "reproduces in " + ", ".join(e.id for e in rep))
    if problems:
        seen = _messages_instead(baselines, {e.id for e in absent}) if present else ""
        return Verdict(
            label, row.spec, claimed, measured, CONTRADICTED, "; ".join(problems), seen, n
        )
    if undecided:
        why = "too few applicable baseline runs to tell in " + ", ".join(
            f"{e.id} (0/{counts[e.id][1]})" for e in undecided
        )
        return Verdict(label, row.spec, claimed, measured, INCONCLUSIVE, why, "", n)
    return Verdict(
        label,
        row.spec,
        claimed,
        measured,
        CONFIRMED,
        "consistent in " + ", ".join(e.id for e in applicable),
        "",
        n,
    )
