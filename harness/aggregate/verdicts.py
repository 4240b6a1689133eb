"""Claimed vs measured: the verdict rules, one function per kind of claim. Every rule is
stated in docs/reference/outcomes-and-verdicts.md; this module is where each is applied."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from harness.aggregate.model import (
    CONFIRMED,
    CONTRADICTED,
    FAILS_OTHERWISE,
    HOLDS,
    INCONCLUSIVE,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    NOT_STATED,
    OVERSTATED,
    UNDERSTATED,
    WRONG,
    EntryAggregate,
    EnvInfo,
    MessageSeen,
    VariantAggregate,
    Verdict,
    _public,
    _version,
)
from harness.aggregate.stats import Rate, pct
from harness.aggregate.unmeasured import unmeasured_verdicts
from harness.domain import PRESENT_STATUSES, parse_claim_spec
from harness.outcomes import GRADES, NOT_COUNTED, SHOWS, Grade, Outcome

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = [
    "ADVICE_RULES",
    "ENV_TRIALS",
    "FIGURE_RULES",
    "MARGIN",
    "RateReading",
    "documented_failure_text",
    "failed_silently_as_documented",
    "read_rate",
    "verdicts",
]

# a stated rate is read as "about c": c ± MARGIN (docs/reference/outcomes-and-verdicts.md)
MARGIN = 0.10
_EPS = 1e-12  # rounding noise: every comparison of the rules goes through _le / _gt
_MOST = 0.5  # "in most applicable runs"
# runs of an environment without a sighting of the documented error after which it lacks
# the error: the trials of the matrix's measuring profiles (matrix.yaml: cpu, full and
# gpu-nightly run 3). A reproducer is a deterministic script: an environment that raises
# the error now and then shows it as a flaky cell, and one sighting is a sighting
ENV_TRIALS = 3
_NOT_COUNTED_VALUES = frozenset(o.value for o in NOT_COUNTED)
_WRONG_RESULT_VALUE = Outcome.WRONG_RESULT.value
_SHOWS_VALUES = frozenset(g.value for g in SHOWS)


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


# -- a rate claim: its advice and its figure, one rule each per case --------------------------


def _le(a: float, b: float) -> bool:
    return a <= b + _EPS


def _gt(a: float, b: float) -> bool:
    return not _le(a, b)


# (answer, rule over the 95% interval [low, high]): for every interval exactly one applies
ADVICE_RULES: tuple[tuple[str, Callable[[float, float], bool]], ...] = (
    (HOLDS, lambda low, high: _gt(low, _MOST)),  # it works (fails as documented) in most runs
    (WRONG, lambda low, high: _gt(_MOST, high)),  # ... in few
    (INCONCLUSIVE, lambda low, high: _le(low, _MOST) and _le(_MOST, high)),
)
# (answer, rule over the stated rate c and the interval): for every case exactly one applies
FIGURE_RULES: tuple[tuple[str, Callable[[float, float, float], bool]], ...] = (
    # the interval lies within c ± MARGIN: the measured rate is "about c"
    (CONFIRMED, lambda c, low, high: _le(c - MARGIN, low) and _le(high, c + MARGIN)),
    # the interval lies above c, reaching beyond the margin: the document is too modest
    (UNDERSTATED, lambda c, low, high: _gt(low, c) and _gt(high, c + MARGIN)),
    # ... below c, beyond the margin: the document promises more than the runs show
    (OVERSTATED, lambda c, low, high: _gt(c, high) and _gt(c - MARGIN, low)),
    # c lies in the interval, which also holds rates beyond the margin
    (
        INCONCLUSIVE,
        lambda c, low, high: (
            _le(low, c) and _le(c, high) and (_gt(c - MARGIN, low) or _gt(high, c + MARGIN))
        ),
    ),
)


@dataclass(frozen=True)
class RateReading:
    """A rate claim read against its runs: two answers, the one word counts use, and why."""

    advice: str  # one of ADVICE
    figure: str  # one of FIGURES
    verdict: str  # contradicted for wrong advice or an overstated figure
    why: str


def _one(rules: Sequence[tuple[str, Callable[..., bool]]], *args: float) -> str:
    [answer] = [name for name, rule in rules if rule(*args)]  # the rules are a partition
    return answer


def read_rate(
    claimed: float | None,
    measured: Rate,
    *,
    why_empty: str = "",
    what: str = "works",
    higher: str = "",
) -> RateReading:
    """The one rule for rate claims (docs/reference/outcomes-and-verdicts.md). ``what``:
    what the advice says the variant does in most runs ("works", "fails as documented");
    ``higher``: what a figure below the measured rate means to a reader, said with an
    understated figure; ``why_empty``: why nothing can be measured, when no run is
    applicable."""
    if measured.n == 0:
        figure = NOT_STATED if claimed is None else NOT_MEASURABLE
        return RateReading(NOT_MEASURABLE, figure, NOT_MEASURABLE, why_empty)
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the 95% interval {pct(low)[:-1]}–{pct(high)}"
    advice = _one(ADVICE_RULES, low, high)
    side = {HOLDS: "lies above 50%", WRONG: "lies below 50%", INCONCLUSIVE: "spans 50%"}
    why = f"advice {advice}: the claim is that it {what} in most runs; {interval} {side[advice]}"
    if claimed is None:
        figure = NOT_STATED
        why += "; no rate stated"
    else:
        figure = _one(FIGURE_RULES, claimed, low, high)
        c, around = pct(claimed), f"{pct(claimed)} ± {pct(MARGIN)}"
        why += (
            "; figure "
            + {
                CONFIRMED: f"{figure}: {interval} lies within claimed {around}",
                UNDERSTATED: f"{figure}: {interval} lies above claimed {c}, beyond {around}"
                + (f": {higher}" if higher else ""),
                OVERSTATED: f"{figure}: {interval} lies below claimed {c}, beyond {around}",
                INCONCLUSIVE: f"{figure}: claimed {c} lies in {interval}, which also holds rates "
                f"more than {pct(MARGIN)} away from it",
            }[figure]
        )
    return RateReading(advice, figure, _rate_verdict(advice, figure), why)


def _rate_verdict(advice: str, figure: str) -> str:
    """The one word a count uses: contradicted for wrong advice or an overstated figure;
    otherwise the advice's answer (holds: confirmed; the figure is said beside it). A dead
    end that fails otherwise is "not as documented", whatever its figure."""
    if advice == NOT_MEASURABLE:
        return NOT_MEASURABLE
    if advice == FAILS_OTHERWISE:
        return NOT_AS_DOCUMENTED
    if advice == WRONG or figure == OVERSTATED:
        return CONTRADICTED
    return INCONCLUSIVE if advice == INCONCLUSIVE else CONFIRMED


def _rate_words(reading: RateReading, claimed: float | None, measured: Rate) -> str:
    """'holds; figure understated: 57/57 vs 80% claimed', contradicted ones said first."""
    if reading.advice == NOT_MEASURABLE:
        return NOT_MEASURABLE
    advice = (
        f"{INCONCLUSIVE} (n={measured.n})"
        if reading.advice == INCONCLUSIVE
        else "fails, not as documented (avoid it: the advice holds, not its reason)"
        if reading.advice == FAILS_OTHERWISE
        else reading.advice
    )
    words = f"{advice}; figure {reading.figure}: {measured.k}/{measured.n}"
    if claimed is not None:
        words += f" vs {pct(claimed)} claimed"
    return f"{CONTRADICTED}: {words}" if reading.verdict == CONTRADICTED else words


def _rate_verdict_of(
    claim: str,
    subject: str,
    claimed_text: str,
    claimed: float | None,
    measured: Rate,
    reading: RateReading,
    why: str,
    seen: str,
) -> Verdict:
    return Verdict(
        claim,
        subject,
        claimed_text,
        measured.text(),
        reading.verdict,
        why,
        seen,
        measured.n,
        advice=reading.advice,
        figure=reading.figure,
        words=_rate_words(reading, claimed, measured),
    )


def _message_text(m: MessageSeen | None) -> str:
    return "" if m is None else f"{m.type}: {m.message}"


def _why_no_applicable(agg: EntryAggregate, v: VariantAggregate) -> str:
    baselines = [b for b in agg.variants if b.kind == "baseline"]
    if not v.runs:
        return "the variant has no runs"
    if v.kind in ("workaround", "dead_end"):
        if not any(b.shown.k for b in baselines):
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

    # the documented message, and its grade: how the claims below read the baselines' runs
    message = _message_verdict(entry, agg, baselines)
    out.append(message)

    # fix rate
    if claims is not None and claims.fix_rate is not None:
        out.append(_fix_rate_verdict(claims.fix_rate, agg, workarounds))

    # version table
    if claims is not None:
        for row in claims.version_table:
            out.append(_version_verdict(row, agg, baselines, message.grade))

    # per-variant rates: a stated rate, or the implicit claim of an unrated recommendation
    for v in agg.variants:
        if v.kind not in ("workaround", "dead_end") or (
            v.claim_ref is None and v.claimed_rate is None
        ):
            continue
        out.append(_variant_verdict(agg, v))
    out += unmeasured_verdicts(entry)  # the claims no variant measures: not measured, why
    return tuple(out)


def best_workaround(workarounds: Sequence[VariantAggregate]) -> VariantAggregate | None:
    """The basis of the fix-rate claim: the measured workaround that works most often (more
    runs, then the first name, on ties); None where none was measured."""
    measured = [w for w in workarounds if w.overall.n]
    if not measured:
        return None
    return max(measured, key=lambda w: (w.overall.value, w.overall.n, _neg(w.name)))


def _fix_rate_verdict(
    fix_rate: float, agg: EntryAggregate, workarounds: list[VariantAggregate]
) -> Verdict:
    measured_w = [w for w in workarounds if w.overall.n]
    pooled = Rate.of(sum(w.overall.k for w in workarounds), sum(w.overall.n for w in workarounds))
    if not workarounds:
        reading = RateReading(
            NOT_MEASURABLE, NOT_MEASURABLE, NOT_MEASURABLE, "the entry has no workaround variant"
        )
        verdict = _rate_verdict_of(
            "fix rate", "", pct(fix_rate), fix_rate, Rate.of(0, 0), reading, reading.why, ""
        )
        return Verdict(**{**verdict.__dict__, "measured": "–"})
    if not measured_w:
        why = _why_no_applicable(agg, workarounds[0])
        reading = read_rate(fix_rate, Rate.of(0, 0), why_empty=why)
        return _rate_verdict_of(
            "fix rate", "", pct(fix_rate), fix_rate, Rate.of(0, 0), reading, why, ""
        )
    best = best_workaround(workarounds)
    assert best is not None
    reading = read_rate(fix_rate, best.overall, higher="it works more often than the document says")
    why = (
        f"basis: best workaround {best.name!r}; {reading.why}; pooled workaround runs ok: "
        f"{pooled.text()}"
    )
    seen = ""
    if reading.advice != HOLDS or reading.figure not in (CONFIRMED, UNDERSTATED):
        seen = _failures_text(best, _EXPECTED["workaround"])
    return _rate_verdict_of(
        "fix rate", "", pct(fix_rate), fix_rate, best.overall, reading, why, seen
    )


def _variant_verdict(agg: EntryAggregate, v: VariantAggregate) -> Verdict:
    what = v.claim_ref or v.kind.replace("_", " ")
    label = f"{what}: {v.metric}" + (f" ({v.reading} reading)" if v.reading else "")
    diagnostic = v.kind == "workaround" and v.claim_kind == "diagnostic"
    implicit = (
        "flags the faulty input and passes a good one"
        if diagnostic
        else "works"
        if v.kind == "workaround"
        else "fails as documented"
    )
    claimed = pct(v.claimed_rate) if v.claimed_rate is not None else f"it {implicit} (no rate)"
    documented = documented_failure_text(v.fails_as) if v.measured_kind else ""
    if v.kind == "dead_end" and v.claim_kind:
        claimed += f"; documented failure: {_KIND_WORDS.get(v.claim_kind, v.claim_kind)}"
        if documented:
            claimed += f" ({documented})"
    elif diagnostic:
        claimed += "; a check, judged by whether it detects the fault"
    if v.condition:
        claimed += f"; only when: {v.condition}"
    if v.condition and not v.within:
        # outside its condition the claim says nothing: it is not judged
        reading = RateReading(
            NOT_MEASURABLE,
            NOT_MEASURABLE if v.claimed_rate is not None else NOT_STATED,
            NOT_MEASURABLE,
            f"outside its condition: the document says it applies only when {v.condition!r}, "
            "and this variant does not meet that condition",
        )
        return _rate_verdict_of(
            label, v.name, claimed, v.claimed_rate, v.overall, reading, reading.why, ""
        )
    if v.kind == "dead_end":
        return _dead_end_verdict(agg, v, label, claimed, documented)
    if v.unmeasured:
        # a promise these runs cannot judge as the document means it (a check judged as a
        # fix): never decided by a substitute
        reading = RateReading(
            NOT_MEASURABLE,
            NOT_MEASURABLE if v.claimed_rate is not None else NOT_STATED,
            NOT_MEASURABLE,
            f"what it promises ({v.claim_kind or 'a fix'}) is not what these runs measure: "
            f"{v.unmeasured}",
        )
        return _rate_verdict_of(
            label, v.name, claimed, v.claimed_rate, v.overall, reading, reading.why, ""
        )
    higher = "it works more often than the document says" if v.kind == "workaround" else ""
    reading = read_rate(
        v.claimed_rate,
        v.overall,
        why_empty=_why_no_applicable(agg, v),
        what=implicit,
        higher=higher,
    )
    why = reading.why
    if v.condition and v.within:
        why += f"; within its condition ({v.condition}): {v.within}"
    seen = ""
    settled = reading.advice == HOLDS and reading.figure in (CONFIRMED, UNDERSTATED, NOT_STATED)
    if v.overall.n and not settled:
        seen = _failures_text(v, _EXPECTED.get(v.kind, _EXPECTED["workaround"]))
    return _rate_verdict_of(label, v.name, claimed, v.claimed_rate, v.overall, reading, why, seen)


# a dead end's documented failure, as the reports say it (entries.FAILURE_KINDS)
_KIND_WORDS = {
    "raises": "an error",
    "wrong-result": "a wrong result",
    "slower": "slower",
    "more-memory": "more memory",
    "security": "a security risk",
    "precision": "lost precision (or mixed precision)",
    "brittle": "brittle",
}


def _dead_end_verdict(
    agg: EntryAggregate, v: VariantAggregate, label: str, claimed: str, documented: str
) -> Verdict:
    """A dead end read as its document means it: it fails as documented (only a
    measurement of the documented kind counts), fails otherwise (harder, another error: the
    advice to avoid it holds, its reason does not), or works (the advice is wrong). A
    documented kind these runs cannot measure is never decided by a substitute."""
    n = v.overall.n
    failing = Rate.of(n - v.ok.k, n)  # any way of not working: as documented or otherwise
    kind_words = _KIND_WORDS.get(v.claim_kind or "raises", v.claim_kind or "")
    if v.measured_kind is None:
        reason = v.unmeasured or "these runs do not measure it"
        why = f"the document's failure is {kind_words}, which these runs cannot show: {reason}"
        if not n:
            why += f"; {_why_no_applicable(agg, v)}"
            reading = RateReading(NOT_MEASURABLE, _no_figure(v), NOT_MEASURABLE, why)
            return _rate_verdict_of(
                label, v.name, claimed, v.claimed_rate, v.overall, reading, why, ""
            )
        low = failing.low or 0.0
        if _gt(low, _MOST):
            why = (
                f"it fails, not as documented: it failed in {n - v.ok.k}/{n} applicable runs "
                f"(the 95% interval {pct(low)[:-1]}–{pct(failing.high or 0.0)} lies above 50%), "
                f"so the advice to avoid it holds; {why}"
            )
            reading = RateReading(FAILS_OTHERWISE, _no_figure(v), NOT_AS_DOCUMENTED, why)
            seen = _failures_text(v, frozenset())
            return _rate_verdict_of(
                label, v.name, claimed, v.claimed_rate, v.overall, reading, why, seen
            )
        why += f"; ok in {v.ok.k}/{n} applicable runs, which says nothing of it"
        reading = RateReading(NOT_MEASURABLE, _no_figure(v), NOT_MEASURABLE, why)
        return _rate_verdict_of(label, v.name, claimed, v.claimed_rate, v.overall, reading, why, "")

    higher = (
        "it fails as documented more often than the document says (the advice to avoid it holds)"
    )
    reading = read_rate(
        v.claimed_rate,
        v.overall,
        why_empty=_why_no_applicable(agg, v),
        what="fails as documented",
        higher=higher,
    )
    why = reading.why
    if n:
        ways = []
        if v.related.k:
            ways.append(f"its own expected error in {v.related.k}")
        if v.silent.k:
            ways.append(f"{documented} in {v.silent.k}")
        why += (
            f"; failed as documented in {v.overall.k}/{n}"
            + (f" ({', '.join(ways)})" if ways else "")
            + f", for another reason in {v.failed_otherwise}/{n}"
            + f", ok in {v.ok.k}/{n}"
        )
        if reading.advice != HOLDS and _gt(failing.low or 0.0, _MOST):
            # it fails in most runs, not as documented: avoid it, for another reason
            why = (
                f"it fails, not as documented: it failed in {n - v.ok.k}/{n} applicable runs, "
                f"as documented in {v.overall.k}; the advice to avoid it holds, its reason "
                f"({kind_words}) is not what happens; " + why
            )
            reading = RateReading(FAILS_OTHERWISE, reading.figure, NOT_AS_DOCUMENTED, why)
        elif reading.advice == WRONG and not _gt(_MOST, failing.high or 0.0):
            # not as documented in most runs, yet not working in most either: undecided
            why = (
                f"it failed in {n - v.ok.k}/{n} applicable runs, as documented in "
                f"{v.overall.k}: whether it works is not settled; " + why
            )
            reading = RateReading(
                INCONCLUSIVE, reading.figure, _rate_verdict(INCONCLUSIVE, reading.figure), why
            )
    if v.condition and v.within:
        why += f"; within its condition ({v.condition}): {v.within}"
        reading = RateReading(reading.advice, reading.figure, reading.verdict, why)
    seen = ""
    settled = reading.advice == HOLDS and reading.figure in (CONFIRMED, UNDERSTATED, NOT_STATED)
    expected = _EXPECTED["dead_end"] if v.measured_kind == "raises" else frozenset()
    if n and (not settled or v.failed_otherwise):
        seen = _failures_text(v, expected)
    return _rate_verdict_of(label, v.name, claimed, v.claimed_rate, v.overall, reading, why, seen)


def _no_figure(v: VariantAggregate) -> str:
    """The figure of a claim whose documented failure these runs cannot count."""
    return NOT_STATED if v.claimed_rate is None else NOT_MEASURABLE


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
    """Baseline exceptions that do not read as the documented error (a variant's related
    error included), most frequent first (top 3)."""
    instead: Counter[tuple[str, str]] = Counter()
    for b in baselines:
        for m in b.messages:
            if m.grade in _SHOWS_VALUES:
                continue
            if envs is not None and not envs.intersection(m.envs):
                continue
            instead[(m.type, m.message)] += m.count
    top = sorted(instead.items(), key=lambda kv: (-kv[1], kv[0]))
    return "; ".join(f"{t}: {msg} (×{c})" for (t, msg), c in top[:3])


def _example(baselines: list[VariantAggregate], grade: Grade, limit: int = 240) -> str:
    """The most frequent baseline message read at ``grade``, as 'Type: message'."""
    seen = [m for b in baselines for m in b.messages if m.grade == grade.value]
    if not seen:
        return ""
    m = max(seen, key=lambda m: (m.count, m.type, m.message))
    text = " ".join(f"{m.type}: {m.message}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_verdict(
    entry: Entry | None, agg: EntryAggregate, baselines: list[VariantAggregate]
) -> Verdict:
    """The documented message occurs, read at its grade (harness.outcomes.grade): the best
    grade any applicable baseline run reached. A run at verbatim, variable-parts or a
    declared rewording shows the documented error and confirms the claim; none, in enough
    applicable runs that an error occurring in half of them would have been seen (the 95%
    interval of 0/n lies below 50%), contradicts it; fewer runs are inconclusive."""
    claim = "documented message"
    claimed = f"{agg.signature_type}: {agg.signature_text}" if agg.signature_type else "–"
    if not baselines:
        return Verdict(
            claim,
            "",
            claimed,
            "–",
            NOT_MEASURABLE,
            "the entry has no baseline variant",
            grade=NOT_MEASURABLE,
        )
    k = sum(b.shown.k for b in baselines)
    n = sum(b.shown.n for b in baselines)
    device = entry.signature.device if entry is not None else ""
    if device:
        # a message only a run on ``device`` can raise: the other devices' runs (a CPU twin,
        # a silent stand-in) can neither show it nor speak against it
        on_device = sum(
            r.n
            for b in baselines
            for slice_id, r in b.by_slice
            if slice_id.startswith(device + "-")
        )
        if not on_device:
            elsewhere = f" ({n} runs on other devices, stand-ins that cannot show it)" if n else ""
            return Verdict(
                claim,
                "",
                claimed,
                f"no {device} run{elsewhere}",
                NOT_MEASURABLE,
                f"a message only a {device.upper()} run can raise (entry.yaml signature.device): "
                f"waiting for a {device.upper()} run{elsewhere}",
                grade=NOT_MEASURABLE,
            )
        k, n = min(k, on_device), on_device
    per_grade: Counter[str] = Counter()
    for b in baselines:
        per_grade.update(dict(b.grades))
    ranked = [g for g in GRADES if per_grade[g.value]]
    best = ranked[0] if ranked else None
    grade = best.value if best is not None else NOT_MEASURABLE
    measured = f"shown in {k}/{n} applicable baseline runs"
    if ranked:
        measured += " (" + ", ".join(f"{g.value} {per_grade[g.value]}" for g in ranked) + ")"
    related = [b for b in baselines if b.related.k]
    if related:
        measured += (
            f", the variant's related error in {sum(b.related.k for b in related)}/{n} ("
            + ", ".join(b.name for b in related)
            + ")"
        )
    seen = _messages_instead(baselines)

    def verdict(verdict_: str, why: str, seen_: str = "") -> Verdict:
        label = f"{verdict_} (n={n})" if verdict_ == INCONCLUSIVE else verdict_
        words = f"{label}; grade {grade}: {k}/{n} baseline runs" if n else label
        return Verdict(
            claim, "", claimed, measured, verdict_, why, seen_, n, grade=grade, words=words
        )

    if best in SHOWS:
        why = _shown_why(entry, baselines, best)
        if related:
            why += "; a variant's own (related) error is counted apart, never as the documented one"
        return verdict(CONFIRMED, why)
    if not n:
        why = "no baseline run was applicable (all unsupported, skipped or env_failed)"
        if not any(b.runs for b in baselines):
            why = "the baseline has no runs"
        return Verdict(claim, "", claimed, measured, NOT_MEASURABLE, why, grade=grade)
    # a run that raised its variant's own declared error (a stand-in such as a CPU twin of a
    # CUDA error) is the behaviour that variant expects: it shows nothing of the message;
    # unless the baseline declares that error is torch's words in the documented situation
    # (signature.instead): then it is what torch said instead of the document's message
    said = _said_instead(entry)
    open_n = n - sum(b.related.k for b in baselines if b.name not in said)
    if open_n <= 0:
        why = (
            "every applicable baseline run raised the error its variant declares instead "
            "(a stand-in for the documented situation, e.g. a CPU twin): none could show the "
            "documented message"
        )
        waiting = _waiting_for_cuda(entry, baselines)
        if waiting:
            why += f"; {waiting}"
        return Verdict(claim, "", claimed, measured, NOT_MEASURABLE, why, grade=grade)
    why = "never seen" + (
        "; seen instead: " + seen if seen else "; the baseline raised no exception"
    )
    declared = [
        f"{name}: {said[name]}"
        for name in sorted(said)
        if any(b.name == name and b.related.k for b in baselines)
    ]
    if declared:
        why += (
            "; what torch raises there instead, declared in entry.yaml ("
            + "; ".join(declared)
            + ")"
        )
    retyped = _documented_message_other_type(agg, baselines)
    if retyped:
        why = f"the documented message was raised as {retyped}, not {agg.signature_type}; " + why
    if open_n < n:
        why += f"; {open_n} of the {n} runs could show it (the others raised their own error)"
    high = Rate.of(0, open_n).high or 0.0
    if high < _MOST:
        return verdict(CONTRADICTED, why, seen)
    why += f"; in {open_n} runs an error occurring in up to {pct(high)} of runs could stay unseen"
    return verdict(INCONCLUSIVE, why, seen)


def _said_instead(entry: Entry | None) -> dict[str, str]:
    """The baselines whose own declared error is torch's words in the documented situation
    (signature.instead), with the reason."""
    if entry is None:
        return {}
    return {
        v.name: v.signature.instead
        for v in entry.variants
        if v.kind == "baseline" and v.signature is not None and v.signature.instead
    }


def _waiting_for_cuda(entry: Entry | None, baselines: list[VariantAggregate]) -> str:
    """The CUDA-only baselines that have no applicable run yet, said as such."""
    if entry is None:
        return ""
    names = sorted(
        b.name for b in baselines if not b.shown.n and _devices(entry, b.name) == ("cuda",)
    )
    if not names:
        return ""
    return "the baselines that can raise it need CUDA and have no run yet: " + ", ".join(names)


def _devices(entry: Entry, name: str) -> tuple[str, ...]:
    try:
        return tuple(entry.variant(name).devices)
    except KeyError:
        return ()


def _shown_why(entry: Entry | None, baselines: list[VariantAggregate], best: Grade) -> str:
    """Why a run showed the documented error, at the entry's grade."""
    if best is Grade.VERBATIM:
        return "the documented signature was raised"
    if best is Grade.VARIABLE_PARTS:
        return (
            "torch's message holds the document's words in order, with what the document "
            "dropped between them (sizes, shapes, numbers, names): " + _example(baselines, best)
        )
    reason = entry.reworded.why if entry is not None and entry.reworded else ""
    return f"declared reworded in entry.yaml: {reason}; torch says: " + _example(baselines, best)


def _documented_message_other_type(agg: EntryAggregate, baselines: list[VariantAggregate]) -> str:
    """The type of an exception that carried the documented message under another type
    (a document naming ValueError where the framework raises its own exception), or ""."""
    if not agg.signature_message:
        return ""
    pattern = re.compile(agg.signature_message, re.DOTALL)
    named = (agg.signature_type or "").rsplit(".", 1)[-1]
    for b in baselines:
        for m in b.messages:
            if m.type.rsplit(".", 1)[-1] == named:
                continue  # the type the document names: not raised "as another type"
            if m.grade not in _SHOWS_VALUES and pattern.search(m.message):
                return m.type
    return ""


def _env_version(env: EnvInfo, field_name: str) -> Version | None:
    return _public(_version(getattr(env, field_name)))


def _baseline_by_env(baselines: list[VariantAggregate]) -> dict[str, list[int]]:
    """env id -> [runs showing the documented error at its grade, applicable baseline runs],
    any device, precision and trial."""
    out: dict[str, list[int]] = {}
    for b in baselines:
        for env, shows, n in b.env_shows:
            slot = out.setdefault(env, [0, 0])
            slot[0] += shows
            slot[1] += n
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


def _version_verdict(
    row: Any, agg: EntryAggregate, baselines: list[VariantAggregate], grade: str
) -> Verdict:
    """A version-table row, judged on environments at the message's grade: an environment
    shows the error when one of its applicable baseline runs does; it lacks it when none of
    at least ENV_TRIALS does; fewer runs leave it undecided. A row for a message that shows
    nowhere is not measured at all: the message's own verdict says it once."""
    label = f"version table: {row.spec} ({row.status})"
    claimed = row.status + "".join(
        f", {k} {v}"
        for k, v in (("introduced", row.introduced), ("deprecated", row.deprecated))
        if v
    )

    def verdict(verdict_: str, measured: str, why: str, seen: str = "", n: int = 0) -> Verdict:
        return Verdict(label, row.spec, claimed, measured, verdict_, why, seen, n, grade=grade)

    try:
        field_name, spec = parse_claim_spec(row.spec)
    except ValueError as exc:  # entries validate at load; a hand-built claim may not
        return verdict(NOT_MEASURABLE, "–", str(exc))
    counts = _baseline_by_env(baselines)
    satisfying: list[EnvInfo] = []
    for e in agg.envs:
        v = _env_version(e, field_name)
        if v is not None and spec.contains(v, prereleases=True):
            satisfying.append(e)
    applicable = [e for e in satisfying if counts.get(e.id, (0, 0))[1]]
    shows = [e for e in applicable if counts[e.id][0]]
    lacks = [e for e in applicable if not counts[e.id][0] and counts[e.id][1] >= ENV_TRIALS]
    undecided = [e for e in applicable if e not in shows and e not in lacks]
    n = sum(counts[e.id][1] for e in applicable)
    at = "" if grade == Grade.VERBATIM.value else f" (read at grade {grade})"
    measured = f"reproduces in {len(shows)}/{len(applicable)} measured envs satisfying the spec"
    if undecided:
        measured += f" ({len(undecided)} with too few runs to tell)"
    if not satisfying:
        return verdict(NOT_MEASURABLE, measured, f"no measured environment satisfies {row.spec}")
    if not applicable:
        why = (
            "every baseline run in the environments satisfying the spec was unsupported, "
            "skipped or env_failed"
        )
        return verdict(NOT_MEASURABLE, measured, why)
    if grade not in _SHOWS_VALUES:
        why = (
            f"the documented error shows in no environment (the message's grade: {grade}): "
            "where it occurs cannot be measured, and the documented message's verdict says "
            "it once"
        )
        return verdict(NOT_MEASURABLE, measured, why, "", n)
    too_few = ", ".join(f"{e.id} (0/{counts[e.id][1]})" for e in undecided)
    problems = _outside_bounds(row, agg.envs, field_name, counts)
    present = row.status.strip().lower() in PRESENT_STATUSES
    if present and lacks:
        problems.insert(
            0,
            "does not reproduce in " + ", ".join(f"{e.id} (0/{counts[e.id][1]})" for e in lacks),
        )
    elif not present and shows:
        problems.insert(0, "reproduces in " + ", ".join(e.id for e in shows))
    if problems:
        seen = _messages_instead(baselines, {e.id for e in lacks}) if present else ""
        return verdict(CONTRADICTED, measured, "; ".join(problems) + at, seen, n)
    # a present row needs every environment to show it; a fixed row one that lacks it
    # (an undecided environment speaks against a present row, never against a fixed one)
    if (present and undecided) or (not present and not lacks):
        return verdict(
            INCONCLUSIVE, measured, "too few applicable baseline runs to tell in " + too_few, "", n
        )
    why = "consistent in " + ", ".join(e.id for e in (shows if present else lacks)) + at
    if undecided:
        why += "; too few runs to tell in " + too_few
    return verdict(CONFIRMED, measured, why, "", n)
