"""Claimed vs measured: the verdict rules, one function per kind of claim. Every rule is
stated in docs/reference/outcomes-and-verdicts.md; this module is where each is applied."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from harness.aggregate.model import (
    CONFIRMED,
    CONSISTENT,
    CONTRADICTED,
    DEPENDS,
    FAILS_OTHERWISE,
    HOLDS,
    INCONCLUSIVE,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    NOT_STATED,
    OVERSTATED,
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
from harness.outcomes import GRADES, NOT_COUNTED, SHOWS, Grade, Outcome, found_in

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = [
    "ADVICE_RULES",
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
_MOST = 0.5  # "in most applicable scenarios"
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
# (answer, rule over the stated rate c and the scenarios' interval): for every case exactly
# one applies. A stated rate is a population figure ("how often this helps people who hit
# the error"); the scenarios can show it too high, never too low
FIGURE_RULES: tuple[tuple[str, Callable[[float, float, float], bool]], ...] = (
    # the interval reaches no lower than c - MARGIN: nothing measured says less than "about c"
    (CONSISTENT, lambda c, low, high: _le(c - MARGIN, low)),
    # the interval lies below c, reaching beyond the margin: the document promises more
    (OVERSTATED, lambda c, low, high: _gt(c, high) and _gt(c - MARGIN, low)),
    # c lies in the interval, which also holds rates below the margin
    (INCONCLUSIVE, lambda c, low, high: _le(c, high) and _gt(c - MARGIN, low)),
)


@dataclass(frozen=True)
class RateReading:
    """A rate claim read against its runs: two answers, the one word counts use, and why."""

    advice: str  # one of ADVICE
    figure: str  # one of FIGURES
    verdict: str  # contradicted for wrong advice or an overstated figure
    why: str
    label: str = ""  # the short words, where the answer needs more than its name


def _one(rules: Sequence[tuple[str, Callable[..., bool]]], *args: float) -> str:
    [answer] = [name for name, rule in rules if rule(*args)]  # the rules are a partition
    return answer


def read_rate(
    claimed: float | None,
    measured: Rate,
    *,
    why_empty: str = "",
    what: str = "works",
) -> RateReading:
    """The one rule for rate claims (docs/reference/outcomes-and-verdicts.md). ``what``:
    what the advice says the variant does in most scenarios ("works", "fails as
    documented"); ``why_empty``: why nothing can be measured, when no run is
    applicable."""
    if measured.n == 0:
        figure = NOT_STATED if claimed is None else NOT_MEASURABLE
        return RateReading(NOT_MEASURABLE, figure, NOT_MEASURABLE, why_empty)
    low, high = measured.low or 0.0, measured.high or 0.0
    interval = f"the scenarios' 95% interval {pct(low)[:-1]}–{pct(high)}"
    advice = _one(ADVICE_RULES, low, high)
    side = {HOLDS: "lies above 50%", WRONG: "lies below 50%", INCONCLUSIVE: "spans 50%"}
    why = (
        f"advice {advice}: the claim is that it {what} in most scenarios; {interval} {side[advice]}"
    )
    if claimed is None:
        figure = NOT_STATED
        why += "; no rate stated"
    else:
        figure = _one(FIGURE_RULES, claimed, low, high)
        c, around = pct(claimed), f"{pct(claimed)} ± {pct(MARGIN)}"
        why += (
            "; figure "
            + {
                CONSISTENT: f"{figure}: {interval} reaches no lower than "
                f"{pct(max(claimed - MARGIN, 0.0))} (claimed {around}; a population figure, "
                "which scenarios can show too high, never too low)",
                OVERSTATED: f"{figure}: {interval} lies below claimed {c}, beyond {around}",
                INCONCLUSIVE: f"{figure}: claimed {c} lies in {interval}, which also holds rates "
                f"more than {pct(MARGIN)} below it",
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
    """'holds; figure consistent: 57/57 scenarios vs 80% claimed', contradicted ones said
    first."""
    if reading.advice == NOT_MEASURABLE:
        return NOT_MEASURABLE
    if reading.label:
        return reading.label
    advice = (
        f"{INCONCLUSIVE} (n={measured.n})"
        if reading.advice == INCONCLUSIVE
        else "fails, not as documented (avoid it: the advice holds, not its reason)"
        if reading.advice == FAILS_OTHERWISE
        else reading.advice
    )
    words = f"{advice}; figure {reading.figure}: {measured.k}/{measured.n} scenarios"
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


@dataclass(frozen=True)
class ReleaseSplit:
    """Where a variant's scenarios part at one change: every scenario of the releases on
    one side was a hit (it works; a dead end fails as documented), none on the other, and
    no release between mixes them."""

    package: str  # torch or lightning
    hits: tuple[Version, ...]  # the measured releases where every scenario was a hit
    misses: tuple[Version, ...]  # ... where none was
    below: Version  # the last measured release before the change
    at: Version  # the first measured release after it

    def words(self, hit: str, miss: str) -> str:
        """'fails as documented in torch 2.6.0–2.15.0, works in 1.10.2–2.5.1: the change
        lies between 2.5.1 and 2.6.0'."""
        return (
            f"{hit} in {self.package} {_span(self.hits)} ({len(self.hits)} measured "
            f"release{'s' if len(self.hits) > 1 else ''}), {miss} in {_span(self.misses)}: the "
            f"change lies between {self.package} {self.below} and {self.at}"
        )


def release_split(agg: EntryAggregate, v: VariantAggregate) -> ReleaseSplit | None:
    """The variant's scenarios parted by one change of torch (else of lightning), or None
    where they are not: all alike, a release that mixes hits and misses, or more than one
    change."""
    counts = {env: (k, n) for env, k, n, *_rest in v.by_env}
    for package in ("torch", "lightning"):
        per = _release_states(package, agg.envs, counts)
        # a flaky scenario mixes hits and misses in its release, as a mixed release does
        flaky = _release_states(package, agg.envs, {e: counts.get(e, (0, 0)) for e in v.flaky_envs})
        if flaky or any(0 < k < n for k, n in per.values()):
            continue
        order = list(per)
        states = [per[r][0] > 0 for r in order]
        changes = [i for i in range(1, len(states)) if states[i] != states[i - 1]]
        if len(changes) != 1:
            continue
        cut = changes[0]
        hits = tuple(r for r, hit in zip(order, states, strict=True) if hit)
        misses = tuple(r for r, hit in zip(order, states, strict=True) if not hit)
        return ReleaseSplit(package, hits, misses, order[cut - 1], order[cut])
    return None


def _split_reading(split: ReleaseSplit, reading: RateReading, hit: str, miss: str) -> RateReading:
    """A rate claim whose scenarios part by release: the advice and the figure depend on
    the release, said with both sides and where the change lies."""
    words = split.words(hit, miss)
    why = f"depends on the release: {words}; over every release: {reading.why}"
    return RateReading(DEPENDS, DEPENDS, DEPENDS, why, f"{DEPENDS}: {words}")


# what a variant's claim says it does, and its negation, as a release split says them
_HIT_WORDS = {
    "workaround": ("works", "does not work"),
    "diagnostic": ("flags the fault and passes a good input", "does not"),
    "dead_end": ("fails as documented", "does not fail as documented"),
}


def _with_split(agg: EntryAggregate, v: VariantAggregate, reading: RateReading) -> RateReading:
    """``reading``, or the release split's where the variant's scenarios part by release."""
    if reading.advice == NOT_MEASURABLE:
        return reading
    split = release_split(agg, v)
    if split is None:
        return reading
    kind = "diagnostic" if v.claim_kind == "diagnostic" else v.kind
    return _split_reading(split, reading, *_HIT_WORDS.get(kind, _HIT_WORDS["workaround"]))


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
                    f"{v.anywhere.k}/{v.anywhere.n} applicable scenarios"
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
    reading = _with_split(agg, best, read_rate(fix_rate, best.overall))
    why = (
        f"basis: best workaround {best.name!r}; {reading.why}; pooled workaround scenarios ok: "
        f"{pooled.text()}"
    )
    seen = ""
    if reading.advice != HOLDS or reading.figure != CONSISTENT:
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
    reading = read_rate(
        v.claimed_rate,
        v.overall,
        why_empty=_why_no_applicable(agg, v),
        what=implicit,
    )
    reading = _with_split(agg, v, reading)
    why = reading.why
    if v.condition and v.within:
        why += f"; within its condition ({v.condition}): {v.within}"
    seen = ""
    settled = reading.advice == HOLDS and reading.figure in (CONSISTENT, NOT_STATED)
    if v.overall.n and not settled:
        seen = _failures_text(v, _EXPECTED.get(v.kind, _EXPECTED["workaround"]))
    verdict = _rate_verdict_of(
        label, v.name, claimed, v.claimed_rate, v.overall, reading, why, seen
    )
    left = _left_unmeasured(v)
    if not left:
        return verdict
    return Verdict(**{**verdict.__dict__, "words": f"{verdict.words}; {left}"})


def _left_unmeasured(v: VariantAggregate) -> str:
    """Version advice that could not be followed everywhere: "not measured on torch 2.12.1,
    2.13.0 (its requirements did not install there)", the torch releases where a variant
    with ``requires`` has env_failed runs, or runs the index could not serve, and no counted
    run; "" elsewhere."""
    if not v.requires:
        return ""
    from harness.domain import parse_env_id

    torches = {
        parse_env_id(env).torch
        for nc in v.not_counted
        if nc.outcome == Outcome.ENV_FAILED.value
        or (nc.outcome == Outcome.UNSUPPORTED.value and "requirements" in nc.reason)
        for env in nc.envs
    }
    torches.discard("")
    # a release where other cells measured it is measured: only those left with none
    torches -= {parse_env_id(row[0]).torch for row in v.by_env}
    if not torches:
        return ""
    listed = ", ".join(sorted(torches, key=Version))
    return f"not measured on torch {listed} (its requirements did not install there)"


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


def _dead_end_unmeasured(
    agg: EntryAggregate, v: VariantAggregate, label: str, claimed: str, kind_words: str
) -> Verdict:
    """A dead end whose documented kind of failure these runs cannot measure."""
    n = v.overall.n
    reason = v.unmeasured or "these runs do not measure it"
    why = f"the document's failure is {kind_words}, which these runs cannot show: {reason}"
    if not n:
        why += f"; {_why_no_applicable(agg, v)}"
        reading = RateReading(NOT_MEASURABLE, _no_figure(v), NOT_MEASURABLE, why)
        return _rate_verdict_of(label, v.name, claimed, v.claimed_rate, v.overall, reading, why, "")
    # its runs never say the untested reason is false: "not as documented" would. They
    # are a note, and only where the dead end could act: a run that raised the
    # documented error itself left the situation as the baseline has it
    acted = [f for f in v.failures if f.outcome != Outcome.REPRODUCED.value]
    unchanged = sum(f.count for f in v.failures if f.outcome == Outcome.REPRODUCED.value)
    if n - v.ok.k and not acted:
        why += (
            f"; applied where it cannot act: its {n - v.ok.k} failing scenarios raised the "
            "documented error itself, as the baseline does"
        )
    elif n:
        why += (
            f"; where it could act, it failed in {n - v.ok.k - unchanged}/{n - unchanged} "
            f"applicable scenarios and was ok in {v.ok.k}, which says nothing of its "
            "documented failure"
        )
    reading = RateReading(NOT_MEASURABLE, _no_figure(v), NOT_MEASURABLE, why)
    seen = _failures_text(v, frozenset()) if acted else ""
    return _rate_verdict_of(label, v.name, claimed, v.claimed_rate, v.overall, reading, why, seen)


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
        return _dead_end_unmeasured(agg, v, label, claimed, kind_words)

    reading = read_rate(
        v.claimed_rate,
        v.overall,
        why_empty=_why_no_applicable(agg, v),
        what="fails as documented",
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
                f"it fails, not as documented: it failed in {n - v.ok.k}/{n} applicable scenarios, "
                f"as documented in {v.overall.k}; the advice to avoid it holds, its reason "
                f"({kind_words}) is not what happens; " + why
            )
            reading = RateReading(FAILS_OTHERWISE, reading.figure, NOT_AS_DOCUMENTED, why)
        elif reading.advice == WRONG and not _gt(_MOST, failing.high or 0.0):
            # not as documented in most runs, yet not working in most either: undecided
            why = (
                f"it failed in {n - v.ok.k}/{n} applicable scenarios, as documented in "
                f"{v.overall.k}: whether it works is not settled; " + why
            )
            reading = RateReading(
                INCONCLUSIVE, reading.figure, _rate_verdict(INCONCLUSIVE, reading.figure), why
            )
    reading = _with_split(agg, v, RateReading(reading.advice, reading.figure, reading.verdict, why))
    why = reading.why
    if v.condition and v.within:
        why += f"; within its condition ({v.condition}): {v.within}"
        reading = RateReading(reading.advice, reading.figure, reading.verdict, why, reading.label)
    seen = ""
    settled = reading.advice == HOLDS and reading.figure in (CONSISTENT, NOT_STATED)
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


def _top_message(baselines: list[VariantAggregate], grade: Grade) -> MessageSeen | None:
    """The most frequent baseline message read at ``grade``."""
    seen = [m for b in baselines for m in b.messages if m.grade == grade.value]
    return max(seen, key=lambda m: (m.count, m.type, m.message)) if seen else None


def _example(baselines: list[VariantAggregate], grade: Grade, limit: int = 240) -> str:
    """The most frequent baseline message read at ``grade``, as 'Type: message'."""
    m = _top_message(baselines, grade)
    if m is None:
        return ""
    text = " ".join(f"{m.type}: {m.message}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _on_device(
    device: str,
    baselines: list[VariantAggregate],
    claim: str,
    claimed: str,
    k: int,
    n: int,
) -> tuple[int, int] | Verdict:
    """The counts of a message only a run on ``device`` can raise, or its verdict where no
    run was on that device."""
    # a message only a run on ``device`` can raise: the other devices' runs (a CPU twin,
    # a silent stand-in) can neither show it nor speak against it
    on_device = sum(
        r.n for b in baselines for slice_id, r in b.by_slice if slice_id.startswith(device + "-")
    )
    if not on_device:
        elsewhere = f" ({n} scenarios on other devices, stand-ins that cannot show it)" if n else ""
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
    return min(k, on_device), on_device


def _message_measured(
    baselines: list[VariantAggregate], k: int, n: int
) -> tuple[Grade | None, str, str, list[VariantAggregate]]:
    """The best grade the baselines reached (and its value), what was measured, in words,
    and the baselines that raised their own related error."""
    per_grade: Counter[str] = Counter()
    for b in baselines:
        per_grade.update(dict(b.grades))
    ranked = [g for g in GRADES if per_grade[g.value]]
    best = ranked[0] if ranked else None
    grade = best.value if best is not None else NOT_MEASURABLE
    measured = f"shown in {k}/{n} applicable baseline scenarios"
    if ranked:
        measured += " (" + ", ".join(f"{g.value} {per_grade[g.value]}" for g in ranked) + ")"
    related = [b for b in baselines if b.related.k]
    if related:
        measured += (
            f", the variant's related error in {sum(b.related.k for b in related)}/{n} ("
            + ", ".join(b.name for b in related)
            + ")"
        )
    return best, grade, measured, related


def _never_seen_why(
    entry: Entry | None,
    agg: EntryAggregate,
    baselines: list[VariantAggregate],
    seen: str,
    said: dict[str, str],
) -> str:
    """Why the documented message was never seen, with what was declared and raised instead."""
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
    quiet = _silent_situations(entry)
    if quiet:
        why += (
            "; where the documented situation raises nothing, declared in entry.yaml ("
            + "; ".join(f"{name}: {text}" for name, text in sorted(quiet.items()))
            + ")"
        )
    retyped = _documented_message_other_type(agg, baselines)
    if retyped:
        why = f"the documented message was raised as {retyped}, not {agg.signature_type}; " + why
    return why


def _message_verdict(
    entry: Entry | None, agg: EntryAggregate, baselines: list[VariantAggregate]
) -> Verdict:
    """The documented message occurs, read at its grade (harness.outcomes.grade): the best
    grade any applicable baseline run reached. A run at verbatim, variable-parts or a
    declared rewording shows the documented error and confirms the claim; none, in enough
    applicable scenarios that an error occurring in half of them would have been seen (the 95%
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
        limited = _on_device(device, baselines, claim, claimed, k, n)
        if isinstance(limited, Verdict):
            return limited
        k, n = limited
    best, grade, measured, related = _message_measured(baselines, k, n)
    seen = _messages_instead(baselines)

    def verdict(verdict_: str, why: str, seen_: str = "") -> Verdict:
        label = f"{verdict_} (n={n})" if verdict_ == INCONCLUSIVE else verdict_
        words = f"{label}; grade {grade}: {k}/{n} baseline scenarios" if n else label
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
    why = _never_seen_why(entry, agg, baselines, seen, said)
    if open_n < n:
        why += f"; {open_n} of the {n} scenarios could show it (the others raised their own error)"
    high = Rate.of(0, open_n).high or 0.0
    if high < _MOST:
        return verdict(CONTRADICTED, why, seen)
    why += (
        f"; in {open_n} scenarios an error occurring in up to {pct(high)} of them could stay unseen"
    )
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


def _silent_situations(entry: Entry | None) -> dict[str, str]:
    """The baselines whose documented situation fails silently (fails_as with instead): the
    postconditions that fail there, and why torch raises nothing."""
    if entry is None:
        return {}
    return {
        v.name: f"postcondition {' or '.join(v.fails_as.postconditions)} fails; "
        f"{v.fails_as.instead}"
        for v in entry.variants
        if v.kind == "baseline" and v.fails_as is not None and v.fails_as.instead
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
    if entry is None or entry.reworded is None or not _example_declared(entry, baselines):
        return (
            "torch says the document's first sentence and the rest in its own words, not the "
            "whole documented message: " + _example(baselines, best)
        )
    return f"declared reworded in entry.yaml: {entry.reworded.why}; torch says: " + _example(
        baselines, best
    )


def _example_declared(entry: Entry, baselines: list[VariantAggregate]) -> bool:
    """Whether the most frequent reworded message is the entry's declared rewording."""
    assert entry.reworded is not None
    m = _top_message(baselines, Grade.REWORDED)
    return m is not None and found_in(entry.reworded.message, m.message)


def _documented_message_other_type(agg: EntryAggregate, baselines: list[VariantAggregate]) -> str:
    """The type of an exception that carried the documented message under another type
    (a document naming ValueError where the framework raises its own exception), or ""."""
    if not agg.signature_message:
        return ""
    named = (agg.signature_type or "").rsplit(".", 1)[-1]
    for b in baselines:
        for m in b.messages:
            if m.type.rsplit(".", 1)[-1] == named:
                continue  # the type the document names: not raised "as another type"
            if m.grade not in _SHOWS_VALUES and found_in(agg.signature_message, m.message):
                return m.type
    return ""


def _env_version(env: EnvInfo, field_name: str) -> Version | None:
    return _public(_version(getattr(env, field_name)))


def _baseline_by_env(baselines: list[VariantAggregate]) -> dict[str, list[int]]:
    """env id -> [scenarios showing the documented error at its grade, applicable ones],
    any device, precision and trial."""
    out: dict[str, list[int]] = {}
    for b in baselines:
        for env, shows, n in b.env_shows:
            slot = out.setdefault(env, [0, 0])
            slot[0] += shows
            slot[1] += n
    return out


def _outside_bounds(row: Any, releases: Mapping[Version, Sequence[int]]) -> list[str]:
    """The row's introduced / deprecated bounds that a reproduction falls outside of (each
    contradicts the row), named with the first release that shows it."""
    problems: list[str] = []
    for bound, below in (("introduced", True), ("deprecated", False)):
        raw = getattr(row, bound)
        bv = _public(_version(raw)) if raw else None
        if bv is None:
            continue
        for release, (shows, _n) in releases.items():
            if shows and ((below and release < bv) or (not below and release >= bv)):
                problems.append(
                    f"reproduces in {release}, {'before' if below else 'at/after'} {bound} {raw}"
                )
                break
    return problems


@functools.cache
def _matrix_releases() -> Mapping[str, tuple[Version, ...]]:
    """The releases the project measures, per package (matrix.yaml's axes): what "the release
    just below a bound" means. Empty where the matrix cannot be read (the measured releases
    alone then stand for it)."""
    from harness.spec.matrix import load_matrix  # the aggregate needs the matrix only here

    try:
        axes = load_matrix(Path(__file__).resolve().parents[2] / "matrix.yaml").axes
    except Exception:  # a checkout without its matrix: the measured releases decide
        return {}
    out: dict[str, tuple[Version, ...]] = {}
    for axis, values in axes.items():
        parsed = [_public(_version(v)) for v in values]
        out[axis] = tuple(sorted({v for v in parsed if v is not None}))
    return out


def _release_states(
    field_name: str, envs: Iterable[EnvInfo], counts: Mapping[str, Sequence[int]]
) -> dict[Version, list[int]]:
    """release -> [scenarios showing the documented error, applicable scenarios], the
    environments of one release (of ``field_name``'s package) added up, in release order."""
    out: dict[Version, list[int]] = {}
    for e in envs:
        v = _env_version(e, field_name)
        shows, n = counts.get(e.id, (0, 0))
        if v is None or not n:
            continue
        slot = out.setdefault(v, [0, 0])
        slot[0] += shows
        slot[1] += n
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class _Edge:
    """A release a row's claim rests on: where the error must show (or not)."""

    release: Version | None  # None: no release of the project lies there
    what: str  # "the release just below introduced 2.1"


def _edges(row: Any, spec: Any, known: Sequence[Version]) -> list[_Edge]:
    """The releases that settle a row: the first and the last release its spec covers, and
    for each introduced / deprecated bound the release just below it and the release at it."""
    inside = [v for v in known if spec.contains(v, prereleases=True)]
    edges: list[_Edge] = []
    if inside:
        edges.append(_Edge(inside[0], f"the first release {row.spec} covers"))
        if inside[-1] != inside[0]:
            edges.append(_Edge(inside[-1], f"the last release {row.spec} covers"))
    for bound in ("introduced", "deprecated"):
        raw = getattr(row, bound)
        bv = _public(_version(raw)) if raw else None
        if bv is None:
            continue
        below = [v for v in known if v < bv]
        at = [v for v in known if v >= bv]
        edges.append(_Edge(below[-1] if below else None, f"the release just below {bound} {raw}"))
        edges.append(_Edge(at[0] if at else None, f"the release at {bound} {raw}"))
    return edges


def _span(versions: Sequence[Version]) -> str:
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}–{versions[-1]}"


def _settle_commands(
    agg: EntryAggregate,
    baselines: Sequence[VariantAggregate],
    field_name: str,
    missing: Sequence[Version],
    releases: Mapping[Version, Sequence[int]],
) -> str:
    """The commands that measure the releases a row rests on: a bisect between the measured
    releases around those that lie between two, a run of each that lies beyond them all."""
    flag = "--lightning" if field_name == "lightning" else "--torch"
    base = baselines[0] if baselines else None
    where = next(
        (sid.split("-", 1) for b in baselines for sid, r in b.by_slice if r.n and "-" in sid),
        ["cpu", "fp32"],
    )
    variant = base.name if base is not None else "<baseline>"
    inner = [v for v in missing if any(r < v for r in releases) and any(r > v for r in releases)]
    commands = []
    if inner:
        low = max(r for r in releases if r < min(inner))
        high = min(r for r in releases if r > max(inner))
        commands.append(
            f"python -m harness bisect {agg.id} --variant {variant} --device {where[0]} "
            f"--precision {where[1]} {flag} {low}..{high}"
        )
    commands += [
        f"python -m harness run --entry {agg.id} --env '*{field_name}{v}*'"
        for v in missing
        if v not in inner
    ]
    return "`; `".join(commands)


def _between(
    bound: Version, releases: Mapping[Version, Sequence[int]]
) -> tuple[Version | None, Version | None]:
    """The measured releases nearest a bound on each side."""
    below = [v for v in releases if v < bound]
    above = [v for v in releases if v >= bound]
    return (below[-1] if below else None, above[0] if above else None)


def _version_problems(
    row: Any,
    releases: dict[Version, list[int]],
    present: bool,
    field_name: str,
    shows: list[Version],
    lacks: list[Version],
) -> list[str]:
    """What contradicts a version-table row: a covered release that behaves otherwise, a
    reproduction outside its bounds."""
    problems = _outside_bounds(row, releases)
    if present and lacks:
        problems.insert(0, "does not reproduce in " + ", ".join(f"{field_name} {v}" for v in lacks))
    elif not present and shows:
        problems.insert(0, "reproduces in " + ", ".join(f"{field_name} {v}" for v in shows))
    return problems


def _version_unsettled(
    agg: EntryAggregate,
    baselines: list[VariantAggregate],
    field_name: str,
    missing: list[_Edge],
    releases: dict[Version, list[int]],
    consistent: str,
) -> str:
    """Why a version-table row is not settled: which releases it rests on were not
    measured, between which the change lies, and the command that settles it."""
    whats: dict[Version | None, list[str]] = {}
    for e in missing:
        whats.setdefault(e.release, []).append(e.what)
    unmeasured = "; ".join(
        (f"{field_name} {release} ({' and '.join(what)})" if release else " and ".join(what))
        for release, what in whats.items()
    )
    why = f"{consistent}; not measured: {unmeasured}"
    placed = sorted(release for release in whats if release is not None)
    spans = sorted({_between(v, releases) for v in placed}, key=str)
    for low, high in spans:
        if low is not None and high is not None:
            why += f"; the change lies between {field_name} {low} and {high}"
    if placed:
        commands = _settle_commands(agg, baselines, field_name, placed, releases)
        why += f"; settle it with `{commands}`"
    return why


def _version_verdict(
    row: Any, agg: EntryAggregate, baselines: list[VariantAggregate], grade: str
) -> Verdict:
    """A version-table row, judged per release at the message's grade. A release shows the
    error when one of its applicable baseline scenarios does, and lacks it when it has
    applicable scenarios and none does (trials only settle flakiness). A row is contradicted
    by a release it covers that behaves otherwise, or by a reproduction outside its
    introduced / deprecated bound; it is confirmed only where every release it rests on was
    measured (its first and last covered release, and on both sides of each bound);
    otherwise it is inconclusive, naming between which measured releases the change lies
    and the command that settles it. A row for a message that shows nowhere is not measured
    at all: the message's own verdict says it once."""
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
    releases = _release_states(field_name, agg.envs, counts)
    inside = {v: sn for v, sn in releases.items() if spec.contains(v, prereleases=True)}
    shows = [v for v, (k, _n) in inside.items() if k]
    lacks = [v for v, (k, _n) in inside.items() if not k]
    n = sum(sn[1] for sn in inside.values())
    at = "" if grade == Grade.VERBATIM.value else f" (read at grade {grade})"
    measured = (
        f"reproduces in {len(shows)}/{len(inside)} measured {field_name} releases the spec covers"
    )
    if not inside:
        satisfying = (_env_version(e, field_name) for e in agg.envs)
        if not any(v is not None and spec.contains(v, prereleases=True) for v in satisfying):
            return verdict(
                NOT_MEASURABLE, measured, f"no measured environment satisfies {row.spec}"
            )
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
    present = row.status.strip().lower() in PRESENT_STATUSES
    problems = _version_problems(row, releases, present, field_name, shows, lacks)
    if problems:
        lacking_envs = {e.id for e in agg.envs if _env_version(e, field_name) in set(lacks)}
        seen = _messages_instead(baselines, lacking_envs) if present else ""
        return verdict(CONTRADICTED, measured, "; ".join(problems) + at, seen, n)
    known = sorted(set(_matrix_releases().get(field_name, ())) | set(releases))
    missing = [e for e in _edges(row, spec, known) if e.release not in releases]
    agree = shows if present else lacks
    consistent = (
        f"{'reproduces' if present else 'does not reproduce'} in every measured release it "
        f"covers ({field_name} {_span(agree)}, {len(agree)} release{'s' if len(agree) > 1 else ''})"
        + at
    )
    if not missing:
        settled = (
            "measured at and just below each bound"
            if row.introduced or row.deprecated
            else "its first and last covered releases measured"
        )
        return verdict(CONFIRMED, measured, f"{consistent}; {settled}", "", n)
    why = _version_unsettled(agg, baselines, field_name, missing, releases, consistent)
    return verdict(INCONCLUSIVE, measured, why, "", n)
