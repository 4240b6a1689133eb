"""Aggregates on hand-built record sets whose answers are known."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.aggregate import (
    CONFIRMED,
    CONSISTENT,
    CONTRADICTED,
    FAILS_OTHERWISE,
    FLAKY,
    INCONCLUSIVE,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    Rate,
    aggregate,
    aggregate_entry,
    cell_value,
    env_info,
    failed_silently_as_documented,
    read_rate,
    wilson,
)
from harness.aggregate.cells import _SEVERAL_MACHINES
from harness.outcomes import Outcome
from harness.report.render.markdown import render_entry
from harness.spec.entries import Claims, Entry, FailsAs, Signature, Variant, VersionClaim
from harness.store.records import ExceptionInfo, Record

R, OK, OTHER = Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR
REL = Outcome.RELATED
UNS, SKIP, ENVF = Outcome.UNSUPPORTED, Outcome.SKIPPED, Outcome.ENV_FAILED

E1 = "py3.9-torch1.10.2-lightning1.9.5"
E2 = "py3.10-torch1.12.1-lightning2.1.4"
E3 = "py3.11-torch2.5.1-lightning2.4.0"
TORCH = {E1: "1.10.2+cpu", E2: "1.12.1+cu102", E3: "2.5.1"}
LIGHTNING = {E1: "1.9.5", E2: "2.1.4", E3: "2.4.0"}
KIND = {
    "base": "baseline",
    "wa": "workaround",
    "wa2": "workaround",
    "de": "dead_end",
    "ctl": "control",
}
MSG = "Attempting to unscale FP16 gradients."


def rec(
    variant: str,
    env: str,
    outcome: Outcome,
    *,
    trial: int = 0,
    device: str = "cpu",
    precision: str = "fp16",
    message: str | None = None,
    reason: str = "",
    entry: str = "pytorch/demo",
    day: int = 1,
) -> Record:
    exc = None
    if outcome in (R, OTHER, REL) or message:
        exc = ExceptionInfo(
            "RuntimeError" if outcome in (R, REL) else "ValueError",
            message or (MSG if outcome is R else "other thing"),
            "x.py:1 in f",
        )
    return Record(
        entry=entry,
        variant=variant,
        kind=KIND[variant],
        cell=f"{env}-{device}-{precision}",
        env=env,
        device=device,
        precision=precision,
        trial=trial,
        outcome=outcome,
        reason=reason,
        exception=exc,
        versions={"python": env[2:6].rstrip("-"), "torch": TORCH[env], "lightning": LIGHTNING[env]},
        provenance={"host": "box", "harness_version": "0.1.0", "git_rev": "abc123"},
        started_at=f"2024-05-{day:02d}T10:00:00Z",
    )


def across(records: list[Record], precisions: tuple[str, ...] = ("fp16", "fp32", "bf16")):
    """Each record in every one of ``precisions``: three scenarios where it was one (every
    count is in scenarios, one cell of one variant each)."""
    return [
        dataclasses.replace(r, precision=p, cell=f"{r.env}-{r.device}-{p}")
        for r in records
        for p in precisions
    ]


def make_entry(
    *,
    fix_rate: float | None = None,
    table: tuple[VersionClaim, ...] = (),
    wa_rate: float | None = None,
    de_rate: float | None = None,
    doc: Path | None = None,
    entry_id: str = "pytorch/demo",
) -> Entry:
    here = doc or Path("/nonexistent/document.md")
    return Entry(
        id=entry_id,
        dir=here.parent,
        title="Demo error",
        signature=Signature("ValueError", "Attempting to unscale"),
        claims=Claims(verification="ai_generated", fix_rate=fix_rate, version_table=table),
        variants=(
            Variant("base", "baseline", "the error"),
            Variant(
                "wa", "workaround", "workaround 1", claim_ref="workaround 1", claimed_rate=wa_rate
            ),
            Variant("de", "dead_end", "dead end 1", claim_ref="dead end 1", claimed_rate=de_rate),
            Variant("ctl", "control", "sanity"),
        ),
        source=here,
        document=here,
        repro=here,
    )


def verdict(agg, claim_prefix: str):
    [v] = [v for v in agg.verdicts if v.claim.startswith(claim_prefix)]
    return v


# -- Wilson and the rate rule ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (5, 10, 0.236593, 0.763407),
        (0, 10, 0.0, 0.277533),
        (10, 10, 0.722467, 1.0),
        (1, 10, 0.017876, 0.404150),
        (81, 263, 0.255289, 0.366210),  # Wilson (1927) example as quoted in the literature
    ],
)
def test_wilson_known_values(k, n, low, high):
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-6)
    assert hi == pytest.approx(high, abs=1e-6)


def test_wilson_empty_and_invalid():
    assert wilson(0, 0) is None
    assert Rate.of(0, 0).text() == "0/0 (no applicable runs)"
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_read_rate_rule():
    r = Rate.of(9, 10)  # [0.596, 0.982]
    # inside the interval, but so are rates far from it: the figure is not decided
    assert read_rate(0.88, r).figure == INCONCLUSIVE and read_rate(0.88, r).advice == "holds"
    assert read_rate(0.88, Rate.of(90, 100)).figure == CONSISTENT  # [0.826, 0.945]
    # a figure below the interval is consistent, never understated: a population figure
    assert read_rate(0.5, r).figure == CONSISTENT
    assert "reaches no lower than 40%" in read_rate(0.5, r).why
    assert read_rate(0.1, Rate.of(10, 10)).figure == CONSISTENT
    assert read_rate(0.99, Rate.of(5, 10)).verdict == CONTRADICTED  # overstated
    assert read_rate(0.5, Rate.of(0, 0), why_empty="because").why == "because"
    assert read_rate(0.5, Rate.of(0, 0), why_empty="because").verdict == NOT_MEASURABLE


def test_an_unrated_claim_is_that_it_works_in_most_scenarios():
    assert read_rate(None, Rate.of(8, 8)).verdict == CONFIRMED  # [0.676, 1]
    reading = read_rate(None, Rate.of(0, 8))
    assert reading.verdict == CONTRADICTED and "works in most scenarios" in reading.why
    assert read_rate(None, Rate.of(2, 2)).verdict == INCONCLUSIVE  # [0.342, 1] spans 50%
    assert "fails" in read_rate(None, Rate.of(0, 8), what="fails").why


# -- cells ----------------------------------------------------------------------------------


def test_cell_flaky_when_counted_trials_disagree():
    v = cell_value([R, OK, R])
    assert v.status == FLAKY
    assert dict(v.counts) == {"reproduced": 2, "ok": 1}


def test_cell_not_counted_trials_do_not_make_it_flaky():
    assert cell_value([R, UNS]).status == "reproduced"
    assert cell_value([UNS, SKIP]).status == "unsupported"  # tie: first in outcome order
    assert cell_value([SKIP, SKIP, UNS]).status == "skipped"


# -- environments ---------------------------------------------------------------------------


def test_env_order_by_version_not_text():
    envs = [
        "py3.10-torch1.9.0-lightning1.5.0",
        "py3.10-torch1.10.0-lightning1.5.0",
        "py3.10-torch1.10.0-lightning1.10.0",
        "py3.10-torch2.0.0-lightning1.5.0",
    ]
    infos = [
        env_info(e, {"torch": e.split("torch")[1].split("-")[0] + "+cu117"}) for e in reversed(envs)
    ]
    assert [i.id for i in sorted(infos, key=lambda i: i.sort_key)] == envs
    assert infos[0].torch == "2.0.0+cu117"  # the local label is kept for display


def test_env_versions_from_id_when_records_carry_none():
    e = env_info("py3.8-torch1.10.2-lightning1.9.5")
    assert (e.python, e.torch, e.lightning) == ("3.8", "1.10.2", "1.9.5")


# -- one entry, known answers ----------------------------------------------------------------


def scenario() -> list[Record]:
    return [
        # baseline: reproduces in E1 (twice) and E2 (flaky), never in E3
        rec("base", E1, R),
        rec("base", E1, R, trial=1),
        rec("base", E2, R),
        rec("base", E2, OK, trial=1),
        rec("base", E3, OTHER, message="new message"),
        rec("base", E3, OTHER, trial=1, message="new message"),
        # workaround: ok in E1 and E2 (reproducing cells); fails in E3, which does not count
        rec("wa", E1, OK),
        rec("wa", E1, OK, trial=1),
        rec("wa", E2, OK),
        rec("wa", E2, OTHER, trial=1),
        rec("wa", E3, OTHER),
        rec("wa", E3, OTHER, trial=1),
        # dead end: fails in E1, ok in E2, unsupported in E3
        rec("de", E1, OTHER),
        rec("de", E1, R, trial=1),
        rec("de", E2, OK),
        rec("de", E2, UNS, trial=1, reason="no API"),
        rec("de", E3, UNS, reason="no API"),
        # control: ok everywhere but one env could not be built
        rec("ctl", E1, OK),
        rec("ctl", E2, OK),
        rec("ctl", E3, ENVF, reason="no wheel for py3.11"),
    ]


def test_rates_and_counts():
    agg = aggregate_entry(make_entry(), scenario())
    base, wa, de, ctl = (agg.variant(n) for n in ("base", "wa", "de", "ctl"))
    # every count is in scenarios (one cell each here): a scenario is a hit only where every
    # counted trial was; the runs stay trials
    assert (base.overall.k, base.overall.n, base.runs) == (1, 3, 6)  # E2 is flaky, no hit
    # E3 is not a reproducing cell; E2, ok then failing, is flaky: 1/2, not 3/4
    assert (wa.overall.k, wa.overall.n, wa.runs) == (1, 2, 6)
    # failed as documented (reproduced) in every applicable trial of a scenario: none (E1
    # mixes it with an OTHER, a failure for another reason: named, never counted as the dead
    # end's failure; E2 was ok)
    assert (de.overall.k, de.overall.n) == (0, 2)
    assert (de.failed_otherwise, de.ok.k) == (1, 1)
    assert (ctl.overall.k, ctl.overall.n) == (2, 2)  # env_failed never counts
    assert ctl.not_counted[0].outcome == "env_failed"
    assert ctl.not_counted[0].reason == "no wheel for py3.11"
    assert [(n.reason, n.count) for n in de.not_counted] == [("no API", 2)]
    assert agg.cells[("base", E2, "cpu", "fp16")].status == FLAKY
    assert dict(agg.cells[("base", E2, "cpu", "fp16")].counts) == {"reproduced": 1, "ok": 1}
    assert [e.id for e in agg.envs] == [E1, E2, E3]
    assert base.overall.low == pytest.approx(wilson(1, 3)[0])


def test_range_first_last_newest():
    agg = aggregate_entry(make_entry(), scenario())
    [overall, cpu16] = agg.variant("base").ranges
    assert overall.slice == "*" and cpu16.slice == "cpu-fp16"
    assert (overall.first, overall.last, overall.newest, overall.in_newest) == (E1, E2, E3, False)
    assert overall.gaps == ()


def test_range_gap_and_slices():
    records = [
        rec("base", E1, R),
        rec("base", E2, OK),
        rec("base", E3, R),
        rec("base", E1, OK, device="cuda", precision="bf16"),
        rec("base", E3, UNS, device="cuda", precision="bf16"),
    ]
    agg = aggregate_entry(make_entry(), records)
    ranges = {r.slice: r for r in agg.variant("base").ranges}
    assert ranges["*"].gaps == (E2,)
    assert ranges["*"].in_newest is True
    assert ranges["cuda-bf16"].first is None
    assert ranges["cuda-bf16"].newest == E1  # E3 was unsupported: not measured
    assert list(agg.slices) == [("cpu", "fp16"), ("cuda", "bf16")]
    by_slice = dict(agg.variant("base").by_slice)
    assert (by_slice["cuda-bf16"].k, by_slice["cuda-bf16"].n) == (0, 1)


def test_verdicts_claimed_vs_measured():
    table = (
        VersionClaim("torch>=1.10", "active"),  # E3 does not reproduce -> contradicted
        VersionClaim("torch<2.0", "active"),  # E1, E2 reproduce -> confirmed
        VersionClaim("torch>=3.0", "active"),  # nothing measured -> not measurable
        VersionClaim("torch>=2.0", "fixed"),  # E3 does not reproduce -> confirmed
        VersionClaim(
            "torch>=1.0", "active", introduced="1.11"
        ),  # reproduces in 1.10 -> contradicted
    )
    entry = make_entry(fix_rate=0.88, table=table, wa_rate=0.9, de_rate=0.95)
    agg = aggregate_entry(entry, scenario())
    assert verdict(agg, "documented message").verdict == CONFIRMED
    fix = verdict(agg, "fix rate")
    # 1/2: a hit in torch 1.10.2; 1.12.1's only scenario is flaky (ok, then another error):
    # a release that mixes hits and misses parts nothing, and 1/2 settles nothing
    assert (fix.verdict, fix.advice, fix.figure) == (INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE)
    assert fix.label == "inconclusive (n=2); figure inconclusive: 1/2 scenarios vs 88% claimed"
    assert "best workaround 'wa'" in fix.why and "pooled" in fix.why
    rows = [v for v in agg.verdicts if v.claim.startswith("version table")]
    assert [v.verdict for v in rows] == [
        CONTRADICTED,  # torch 2.5.1 does not reproduce: one scenario is enough
        INCONCLUSIVE,  # torch 1.13.1, the last release <2.0 covers, was not measured
        NOT_MEASURABLE,
        INCONCLUSIVE,  # torch 2.0.1 and 2.15.0, its first and last, were not measured
        CONTRADICTED,
    ]
    assert rows[0].why == "does not reproduce in torch 2.5.1"
    assert "not measured: torch 1.13.1 (the last release torch<2.0 covers)" in rows[1].why
    assert "torch 2.0.1 (the first release torch>=2.0 covers)" in rows[3].why
    assert "before introduced 1.11" in rows[4].why
    assert verdict(agg, "workaround 1").verdict == INCONCLUSIVE
    de = verdict(agg, "dead end 1")
    assert de.verdict == CONTRADICTED and de.measured.startswith("0/2")
    assert "for another reason in 1/2" in de.why
    assert de.seen_instead == "ValueError: other thing (×1)"


def test_version_rows_decided_by_one_scenario_per_release():
    table = (
        VersionClaim("torch>=1.10", "active"),
        VersionClaim("torch>=2.5,<2.6", "fixed"),
        VersionClaim("torch>=2.0", "fixed"),
    )
    for trials in (4, 1):  # a release's one scenario decides, whatever its trials
        records = [rec("base", E1, R)] + [
            rec("base", E3, OTHER, trial=t, message="new message") for t in range(trials)
        ]
        agg = aggregate_entry(make_entry(table=table), records)
        active, fixed, wide = (v for v in agg.verdicts if v.claim.startswith("version table"))
        assert active.verdict == CONTRADICTED
        assert "torch 2.5.1" in active.why
        assert (
            active.seen_instead == "ValueError: new message (×1)"
        )  # one scenario, whatever its trials
        # a row whose only release, its first and last, was measured: confirmed
        assert fixed.verdict == CONFIRMED, fixed.why
        # one whose first and last releases (2.0.1, 2.15.0) were not: open
        assert wide.verdict == INCONCLUSIVE and "torch 2.0.1" in wide.why


def test_no_reproduction_makes_rates_not_measurable_and_names_messages():
    records = across(
        [
            rec("base", E1, OTHER, message="seen A"),
            rec("base", E2, OTHER, message="seen B"),
            rec("base", E3, OTHER, message="seen B"),
            rec("base", E2, OTHER, trial=1, message="seen B"),
            rec("base", E3, OTHER, trial=1, message="seen B"),
        ]
    ) + [rec("wa", E1, OK), rec("de", E1, OTHER)]
    agg = aggregate_entry(make_entry(fix_rate=0.5, wa_rate=0.9, de_rate=0.6), records)
    msg = verdict(agg, "documented message")
    assert msg.verdict == CONTRADICTED
    assert msg.why.index("seen B") < msg.why.index("seen A")  # most frequent first
    assert msg.seen_instead.startswith("ValueError: seen B (×")
    assert msg.seen_instead.index("seen B") < msg.seen_instead.index("seen A")
    wa = verdict(agg, "workaround 1")
    assert wa.verdict == NOT_MEASURABLE and "never reproduced" in wa.why
    assert "where it ran, it was ok in 1/1 applicable scenarios" in wa.why  # shown, not judged
    de = verdict(agg, "dead end 1")
    assert (
        "where it ran, it was failing as documented in 0/1 applicable scenarios "
        "(ValueError: other thing (×1))" in de.why
    )
    assert verdict(agg, "fix rate").verdict == NOT_MEASURABLE


def test_unsupported_only():
    records = [rec("base", e, UNS, reason="no torch.amp") for e in (E1, E2, E3)] + [
        rec("wa", E1, UNS)
    ]
    agg = aggregate_entry(
        make_entry(wa_rate=0.9, table=(VersionClaim("torch>=1.10", "active"),)), records
    )
    assert verdict(agg, "documented message").verdict == NOT_MEASURABLE
    assert "unsupported" in verdict(agg, "documented message").why
    assert "no baseline run was applicable" in verdict(agg, "workaround 1").why
    assert verdict(agg, "version table").verdict == NOT_MEASURABLE
    assert agg.variant("base").overall.n == 0
    assert agg.variant("base").not_counted[0].count == 3


def test_env_failed_everywhere():
    records = [
        rec(v, e, ENVF, reason="resolution failed") for v in ("base", "wa") for e in (E1, E2)
    ]
    agg = aggregate_entry(make_entry(wa_rate=0.9), records)
    assert agg.n_runs == 4 and agg.n_counted == 0
    assert verdict(agg, "documented message").verdict == NOT_MEASURABLE
    assert all(v.overall.n == 0 for v in agg.variants)


def test_variant_without_runs_and_unknown_entry():
    aggs = aggregate([rec("base", E1, R, entry="other/entry")], [make_entry()])
    assert [a.id for a in aggs.entries] == ["other/entry", "pytorch/demo"]
    other, demo = aggs.entries
    assert other.title == "other/entry" and other.document is None
    assert demo.n_runs == 0 and demo.variant("wa").overall.n == 0


def test_order_of_records_does_not_matter():
    records = scenario() + [rec("base", E1, R, trial=2, day=3)]
    shuffled = list(records)
    random.Random(4).shuffle(shuffled)
    a = aggregate(records, [make_entry(fix_rate=0.9)]).to_dict()
    b = aggregate(shuffled, [make_entry(fix_rate=0.9)]).to_dict()
    assert a == b
    assert a["schema"] == 1
    assert a["entries"][0]["newest"] == "2024-05-03T10:00:00Z"


def test_a_workaround_that_changes_the_precision_is_counted_where_the_baseline_reproduces() -> None:
    # the baseline runs (and reproduces) in fp16 only; the workaround is "switch to bf16"
    entry = make_entry()
    entry = Entry(
        **{
            **entry.__dict__,
            "variants": (
                Variant("base", "baseline", "the error", precisions=("fp16",)),
                Variant(
                    "wa",
                    "workaround",
                    "use bf16",
                    precisions=("bf16",),
                    claim_ref="workaround 1",
                    claimed_rate=0.9,
                ),
                Variant(
                    "wa2",
                    "workaround",
                    "same precision",
                    precisions=("fp16",),
                    claim_ref="workaround 2",
                ),
                Variant("ctl", "control", "sanity"),
            ),
        }
    )
    records = [
        rec("base", E2, R),
        rec("base", E3, R),
        rec("base", E1, OK),
        rec("wa", E2, OK, precision="bf16"),
        rec("wa", E3, OTHER, precision="bf16"),
        rec("wa", E1, OK, precision="bf16"),  # E1: the baseline did not reproduce: not counted
        rec("wa2", E2, OK),
        rec("wa2", E1, OK),  # same precision as the baseline: cell rule
    ]
    agg = aggregate_entry(entry, records)
    wa = next(v for v in agg.variants if v.name == "wa")
    wa2 = next(v for v in agg.variants if v.name == "wa2")
    assert (wa.overall.k, wa.overall.n) == (1, 2)
    assert (wa2.overall.k, wa2.overall.n) == (1, 1)


# -- documented vs related -------------------------------------------------------------------

RELATED_SIG = Signature("RuntimeError", "The current optimizer, \\w+, does not allow")


def entry_with_related() -> Entry:
    entry = make_entry()
    return Entry(
        **{
            **entry.__dict__,
            "signature": Signature("RuntimeError", "Attempting to unscale"),
            "variants": (
                Variant("base", "baseline", "the documented error"),
                Variant("trainer", "baseline", "the related error", signature=RELATED_SIG),
                Variant("de", "dead_end", "fails", claim_ref="dead end 1", claimed_rate=0.9),
                Variant("wa", "workaround", "works", claim_ref="solution 1", claimed_rate=0.9),
            ),
        }
    )


def test_the_documented_message_counts_only_the_documented_error() -> None:
    related = "The current optimizer, AdamW, does not allow for gradient clipping"
    records = [
        rec("base", E1, R),
        rec("base", E2, R),
        rec("base", E3, OK),
        Record(**{**rec("base", E1, REL, message=related).__dict__, "variant": "trainer"}),
        Record(**{**rec("base", E2, REL, message=related).__dict__, "variant": "trainer"}),
    ]
    agg = aggregate_entry(entry_with_related(), records)
    msg = verdict(agg, "documented message")
    assert msg.verdict == CONFIRMED
    assert msg.measured == (
        "shown in 2/5 applicable baseline scenarios (verbatim 2, other-error 2, not-raised 1), "
        "the variant's related error in 2/5 (trainer)"
    )
    trainer = agg.variant("trainer")
    assert (trainer.overall.k, trainer.related.k, trainer.overall.n) == (0, 2, 2)
    # the related error makes no reproducing cell and no measured range of the documented one
    assert trainer.ranges[0].first is None


def test_a_baseline_error_declared_as_what_torch_says_instead_counts_against_the_message() -> None:
    """A stand-in's related error shows nothing of the documented message (not measurable);
    one declared as torch's words where the document's message is (signature.instead) is
    what torch said instead: the message is contradicted, and the workarounds are judged
    there all the same."""
    related = "The current optimizer, AdamW, does not allow for gradient clipping"
    only_related = across(
        [
            Record(
                **{**rec("base", e, REL, message=related, trial=t).__dict__, "variant": "trainer"}
            )
            for e in (E1, E2, E3)
            for t in range(3)
        ]
    )
    entry = entry_with_related()
    alone = dataclasses.replace(entry, variants=entry.variants[1:])  # the related baseline only
    assert verdict(aggregate_entry(alone, only_related), "documented message").verdict == (
        NOT_MEASURABLE
    )
    why = "torch names the optimizer; the document's words are an umbrella it never says"
    said = dataclasses.replace(
        alone,
        variants=tuple(
            dataclasses.replace(v, signature=dataclasses.replace(RELATED_SIG, instead=why))
            if v.name == "trainer"
            else v
            for v in alone.variants
        ),
    )
    msg = verdict(aggregate_entry(said, only_related), "documented message")
    assert msg.verdict == CONTRADICTED
    assert "never seen" in msg.why and why in msg.why and related in msg.why


def test_schema_2_records_of_a_variant_with_its_own_signature_are_re_read() -> None:
    # schema 2 recorded the variant's own signature as "reproduced": re-read against the entry
    related = "The current optimizer, AdamW, does not allow for gradient clipping"
    old = Record(**{**rec("base", E1, R, message=related).__dict__, "variant": "trainer"})
    documented = Record(**{**rec("base", E2, R).__dict__, "variant": "trainer"})
    agg = aggregate_entry(entry_with_related(), [old, documented])
    assert agg.cells[("trainer", E1, "cpu", "fp16")].status == "related"
    assert agg.cells[("trainer", E2, "cpu", "fp16")].status == "reproduced"
    # a signature added to entry.yaml after the run: its other_error is re-read as related
    later = Record(
        **{**rec("base", E3, REL, message=related).__dict__, "variant": "trainer", "outcome": OTHER}
    )
    other = Record(**{**rec("base", E1, OTHER, message="else").__dict__, "variant": "trainer"})
    agg = aggregate_entry(entry_with_related(), [later, other])
    assert agg.cells[("trainer", E3, "cpu", "fp16")].status == "related"
    assert agg.cells[("trainer", E1, "cpu", "fp16")].status == "other_error"


def test_a_related_run_of_a_variant_whose_signature_was_removed_is_another_error() -> None:
    """The declaration taken out of entry.yaml after the run (a rewording declared on the
    entry instead): its related runs are read as other_error, at their grade."""
    related = "The current optimizer, AdamW, does not allow for gradient clipping"
    stored = Record(**{**rec("base", E1, REL, message=related).__dict__, "variant": "trainer"})
    agg = aggregate_entry(entry_with_related(), [stored])
    assert agg.cells[("trainer", E1, "cpu", "fp16")].status == "related"
    entry = entry_with_related()
    undeclared = dataclasses.replace(
        entry,
        variants=tuple(
            dataclasses.replace(v, signature=None) if v.name == "trainer" else v
            for v in entry.variants
        ),
    )
    agg = aggregate_entry(undeclared, [stored])
    assert agg.cells[("trainer", E1, "cpu", "fp16")].status == "other_error"


def test_a_dead_end_failing_for_another_reason_is_not_a_confirmation() -> None:
    records = across(
        [
            rec("base", E1, R),
            rec("base", E2, R),
            rec("de", E1, OTHER, message="AssertionError at step"),
            rec("de", E2, OTHER, message="AssertionError at step"),
            rec("de", E1, OTHER, trial=1, message="AssertionError at step"),
            rec("de", E2, OTHER, trial=1, message="AssertionError at step"),
        ]
    )
    agg = aggregate_entry(entry_with_related(), records)
    de = verdict(agg, "dead end 1")
    # it fails in every scenario, not as documented: the advice to avoid it holds, not its
    # reason; "wrong" is kept for a dead end that works
    assert de.verdict == NOT_AS_DOCUMENTED
    assert de.advice == FAILS_OTHERWISE
    assert de.label.startswith("fails, not as documented")
    assert de.measured.startswith("0/6")
    assert "for another reason in 6/6" in de.why
    assert de.seen_instead == "ValueError: AssertionError at step (×6)"  # scenarios, not trials
    # the same trials in two scenarios cannot say it fails in most
    fp16 = [r for r in records if r.precision == "fp16"]
    assert verdict(aggregate_entry(entry_with_related(), fp16), "dead end 1").advice != (
        FAILS_OTHERWISE
    )


def test_a_document_type_that_differs_is_named() -> None:
    records = across(
        [
            rec("base", e, OTHER, trial=t, message="Attempting to unscale FP16 gradients.")
            for e in (E1, E2)
            for t in range(4)
        ]
    )
    agg = aggregate_entry(entry_with_related(), records)
    msg = verdict(agg, "documented message")
    assert msg.verdict == CONTRADICTED
    assert msg.why.startswith("the documented message was raised as ValueError, not RuntimeError")


def test_a_documented_message_never_seen_in_few_runs_is_inconclusive() -> None:
    agg = aggregate_entry(make_entry(), [rec("base", E1, OTHER), rec("base", E2, OK)])
    msg = verdict(agg, "documented message")
    assert msg.verdict == INCONCLUSIVE
    assert msg.label == "inconclusive (n=2); grade other-error: 0/2 baseline scenarios"


def test_failed_workarounds_name_what_happened_instead() -> None:
    records = [rec("base", E1, R), rec("base", E2, R)] + [
        rec("wa", e, Outcome.WRONG_RESULT, trial=t, reason="postcondition failed: clipped")
        for e in (E1, E2)
        for t in range(3)
    ]
    agg = aggregate_entry(make_entry(wa_rate=0.9), records)
    wa = verdict(agg, "workaround 1")
    assert wa.verdict == CONTRADICTED
    # in scenarios: three trials in each of two
    assert wa.seen_instead == "wrong_result: postcondition failed: clipped (×2)"


# -- a dead end's silent documented failure (entry.yaml fails_as) ---------------------------

WRONG = Outcome.WRONG_RESULT


def silent_entry(de_rate: float | None = 0.75) -> Entry:
    entry = make_entry()
    de = Variant(
        "de",
        "dead_end",
        "strict=False",
        claim_ref="dead end 1",
        claimed_rate=de_rate,
        fails_as=FailsAs("wrong_result", ("weights_loaded",)),
    )
    return Entry(**{**entry.__dict__, "variants": (entry.variants[0], de)})


def wrong(
    env: str,
    trial: int,
    failed: tuple[str, ...],
    passed: tuple[str, ...] = (),
    precision: str = "fp16",
) -> Record:
    checks = {n: {"ok": False, "detail": f"{n} is wrong"} for n in failed}
    checks |= {n: {"ok": True, "detail": "fine"} for n in passed}
    checks["_warnings"] = ["UserWarning: something"]  # a record's warnings are no postcondition
    reason = "postcondition failed: " + "; ".join(f"{n}: {n} is wrong" for n in failed)
    r = rec("de", env, WRONG, trial=trial, reason=reason, precision=precision)
    return Record(**{**r.__dict__, "checks": checks})


def test_a_silent_dead_end_that_fails_as_documented_confirms_its_claim() -> None:
    records = across([rec("base", E1, R), rec("base", E2, R)]) + [
        wrong(e, t, ("weights_loaded", "same_outputs"), precision=p)
        for e in (E1, E2)
        for p in ("fp16", "fp32", "bf16")
        for t in range(2)
    ]
    agg = aggregate_entry(silent_entry(de_rate=None), records)
    de = agg.variant("de")
    assert (de.overall.k, de.overall.n, de.silent.k, de.failed_otherwise) == (6, 6, 6, 0)
    assert de.fails_as == ("weights_loaded",)
    assert all(f.as_documented for f in de.failures)
    v = verdict(agg, "dead end 1")
    assert v.verdict == CONFIRMED  # no rate: "it fails as documented", 6/6
    assert v.claimed == (
        "it fails as documented (no rate); documented failure: a wrong result "
        "(postcondition weights_loaded fails)"
    )
    assert "failed as documented in 6/6 (postcondition weights_loaded fails in 6)" in v.why
    assert "for another reason in 0/6" in v.why
    assert v.seen_instead == ""
    # the cells still show what happened: the runs ended wrong_result
    assert agg.cells[("de", E1, "cpu", "fp16")].status == "wrong_result"
    # the entry's page says what the documented failure is, beside the claim
    page = render_entry(agg)
    assert (
        "| de | dead_end | dead end 1, documented failure: postcondition weights_loaded fails |"
        in page
    )


def test_a_wrong_result_on_another_postcondition_is_still_seen_instead() -> None:
    records = across([rec("base", E1, R), rec("base", E2, R)])
    records += [wrong(e, t, ("weights_loaded",)) for e in (E1, E2) for t in range(2)]
    # the declared postcondition held; another failed: a failure for another reason
    records += [
        wrong(e, t, ("loss_finite",), passed=("weights_loaded",), precision="bf16")
        for e in (E1, E2)
        for t in range(2)
    ]
    records += [rec("de", E1, OK, trial=t, precision="fp32") for t in range(2)]
    # a scenario mixing the two is neither: flaky, counted, no hit
    records += [
        wrong("py3.10-torch1.12.1-lightning2.1.4", 0, ("weights_loaded",), precision="fp32"),
        wrong(
            "py3.10-torch1.12.1-lightning2.1.4",
            1,
            ("loss_finite",),
            passed=("weights_loaded",),
            precision="fp32",
        ),
    ]
    agg = aggregate_entry(silent_entry(de_rate=0.4), records)
    de = agg.variant("de")
    # scenarios: 2 as documented, 2 for another reason, 1 ok, 1 flaky (not a hit)
    assert (de.overall.k, de.overall.n, de.silent.k, de.failed_otherwise, de.ok.k) == (
        2,
        6,
        2,
        3,
        1,
    )
    v = verdict(agg, "dead end 1")
    assert "failed as documented in 2/6 (postcondition weights_loaded fails in 2)" in v.why
    assert "for another reason in 3/6" in v.why
    assert (
        v.seen_instead
        # the scenarios it ended so in: two, and the flaky one
        == "wrong_result: postcondition failed: loss_finite: loss_finite is wrong (×3)"
    )


def test_without_fails_as_a_silent_failure_is_a_failure_for_another_reason() -> None:
    records = across([rec("base", E1, R), rec("base", E2, R)]) + [
        wrong(e, t, ("weights_loaded",), precision=p)
        for e in (E1, E2)
        for p in ("fp16", "fp32", "bf16")
        for t in range(2)
    ]
    entry = silent_entry()
    plain = Entry(
        **{
            **entry.__dict__,
            "variants": (
                entry.variants[0],
                Variant("de", "dead_end", "x", claim_ref="dead end 1", claimed_rate=0.75),
            ),
        }
    )
    agg = aggregate_entry(plain, records)
    de = agg.variant("de")
    assert (de.overall.k, de.silent.k, de.failed_otherwise) == (0, 0, 6)
    # it fails in every run, though not with an error (its documented failure): avoid it,
    # for another reason than the document's
    assert verdict(agg, "dead end 1").verdict == NOT_AS_DOCUMENTED
    assert "documented failure: an error" in verdict(agg, "dead end 1").claimed
    assert "postcondition" not in verdict(agg, "dead end 1").claimed


def test_failed_silently_as_documented_reads_one_record() -> None:
    names = ("a", "b")
    assert failed_silently_as_documented(names, "wrong_result", {"b": {"ok": False}})
    assert not failed_silently_as_documented(names, "wrong_result", {"b": {"ok": True}})
    assert not failed_silently_as_documented(names, "wrong_result", {"c": {"ok": False}})
    assert not failed_silently_as_documented(names, "ok", {"a": {"ok": False}})
    assert not failed_silently_as_documented(names, "other_error", {"a": {"ok": False}})
    assert not failed_silently_as_documented((), "wrong_result", {"a": {"ok": False}})
    assert not failed_silently_as_documented(names, "wrong_result", {"a": ["not a check"]})


# -- several machines ---------------------------------------------------------------------


def on(record: Record, machine: str, machine_id: str = "") -> Record:
    return Record(**{**record.__dict__, "machine": machine, "machine_id": machine_id or machine})


def test_a_cell_measured_on_two_machines_shows_both_and_flags_disagreement() -> None:
    records = [
        on(rec("base", E1, R), "gpu-box"),
        on(rec("base", E1, OK), "laptop"),
        on(rec("base", E2, R), "gpu-box"),
        on(rec("base", E2, R), "laptop"),
        on(rec("base", E3, R), "gpu-box"),
        on(rec("base", E3, SKIP, reason="no CUDA"), "laptop"),
    ]
    agg = aggregate_entry(make_entry(), records)
    k1, k2, k3 = ((("base", e, "cpu", "fp16")) for e in (E1, E2, E3))
    assert [(m, v.status) for m, v in agg.by_machine[k1]] == [
        ("gpu-box", "reproduced"),
        ("laptop", "ok"),
    ]
    assert agg.disagree == {k1}  # E2 agrees; E3's laptop could not measure: no disagreement
    assert set(agg.by_machine) == {k1, k2, k3}
    assert [m.name for m in agg.machines] == ["gpu-box", "laptop"]


def test_two_machines_of_one_name_are_told_apart_by_id() -> None:
    records = [on(rec("base", E1, R), "ci", "aaaa1111"), on(rec("base", E1, OK), "ci", "bbbb2222")]
    agg = aggregate_entry(make_entry(), records)
    [(m1, _), (m2, _)] = agg.by_machine[("base", E1, "cpu", "fp16")]
    assert (m1, m2) == ("ci (aaaa1111)", "ci (bbbb2222)")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(*[st.sampled_from([None, "", "a", "b"])] * 2), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_several_machines_is_more_than_one_distinct_machine_key(cells) -> None:
    """The cells' flag for runs from several machines (min, max and counts: cheaper) says
    what count(DISTINCT (machine, machine_id)) > 1 says, NULLs among the values included."""
    rows = [(i, m, mid) for i, runs in enumerate(cells) for m, mid in runs]
    con = duckdb.connect()
    con.execute("CREATE TABLE runs (cell BIGINT, machine VARCHAR, machine_id VARCHAR)")
    con.executemany("INSERT INTO runs VALUES (?, ?, ?)", rows)
    got = con.execute(
        f"SELECT cell, {_SEVERAL_MACHINES}, count(DISTINCT (machine, machine_id)) > 1 "
        "FROM runs GROUP BY cell"
    ).fetchall()
    assert [(c, flag) for c, flag, _ in sorted(got)] == [(c, want) for c, _, want in sorted(got)]
    assert len(got) == len(cells)


def test_one_message_quoting_the_reproducer_is_one_message_whichever_checkout_ran_it():
    quoted = 'Unknown builtin op in "{}/repros/pytorch/demo/repro.py", line 12'
    runs = [
        # three scenarios (counts are in scenarios), each run from another checkout
        rec("wa", E1, OTHER, message=quoted.format("/work/wt/kbrun")),
        rec("wa", E2, OTHER, message=quoted.format("/work/wt/kbrun2")),
        rec("wa", E3, OTHER, message=quoted.format("/home/someone/harness")),
        rec("wa", E1, OTHER, trial=3, message="in /opt/lib/site-packages/torch/jit.py"),
    ]
    [agg] = aggregate(runs).entries
    [wa] = [v for v in agg.variants if v.name == "wa"]
    assert sorted((m.message, m.count) for m in wa.messages) == [
        ('Unknown builtin op in "repros/pytorch/demo/repro.py", line 12', 3),
        ("in /opt/lib/site-packages/torch/jit.py", 1),  # not a reproducer's path: as it was
    ]


# -- version advice: a variant with requirements -----------------------------------------------


def advised(r: Record, requires: dict[str, str], **installed: str) -> Record:
    """``r`` as run in the environment derived from its cell for ``requires``."""
    derived = r.env + "-with-" + "-".join(requires)
    return dataclasses.replace(
        r, ran_in=derived, requires=requires, versions={**r.versions, **installed}
    )


def test_version_advice_is_judged_in_the_cell_it_answers_for_and_says_what_it_changed() -> None:
    base = make_entry(wa_rate=0.9)
    pin = Variant(
        "wa",
        "workaround",
        "pin lightning<2.0",
        claim_ref="workaround 1",
        claimed_rate=0.9,
        requires=("lightning<2.0",),
    )
    entry = dataclasses.replace(
        base, variants=tuple(pin if v.name == "wa" else v for v in base.variants)
    )
    pinned = {"lightning": "lightning<2.0"}
    records = [
        rec("base", E1, OK),
        rec("base", E2, R),
        rec("base", E3, R),
        advised(rec("wa", E1, OK), pinned, lightning="1.9.5"),  # E1 has it: not reproducing
        advised(rec("wa", E2, OK), pinned, lightning="1.9.5"),
        advised(rec("wa", E3, OTHER), pinned, lightning="1.9.5"),
    ]
    agg = aggregate_entry(entry, records)
    wa = next(v for v in agg.variants if v.name == "wa")
    # counted in the cells it answers for, where the baseline reproduces there
    assert (wa.overall.k, wa.overall.n) == (1, 2)
    assert agg.cells[("wa", E2, "cpu", "fp16")].status == "ok"
    # the environments are the cells': the derived runs' versions are not theirs
    assert [(e.id, e.lightning) for e in agg.envs] == [(E1, "1.9.5"), (E2, "2.1.4"), (E3, "2.4.0")]
    assert wa.requires == ("lightning<2.0",)
    # E1's lightning 1.9.5 already satisfies lightning<2.0: kept there, as pip would
    assert wa.changed == (
        "lightning 2.1.4, 2.4.0 → 1.9.5",
        "already satisfied here: lightning 1.9.5",
    )
    assert verdict(agg, "workaround 1").subject == "wa"
    page = render_entry(agg)
    assert "workaround 1, 90%, requires lightning\\<2.0" in page
    assert (
        "### wa (workaround) on cpu: fp16, run with lightning\\<2.0 (lightning 2.1.4, 2.4.0 → "
        "1.9.5; already satisfied here: lightning 1.9.5)" in page
    )


def test_a_run_that_measured_another_release_where_the_cell_satisfied_the_advice_is_set_apart() -> (
    None
):
    from harness.aggregate.advice import measured_another_release

    wanted = {"torch": "torch<2.1"}
    # torch 1.12.1 satisfies torch<2.1: a run on 2.0.1 measured another release
    why = measured_another_release({"torch": "1.12.1+cu102"}, {"torch": "2.0.1+cu117"}, wanted)
    assert why == (
        "measured another release: torch 2.0.1 where the cell's 1.12.1 already satisfies "
        "torch<2.1 (the cell's own release is its answer)"
    )
    # the cell's own release (its local build aside), a cell that does not satisfy it, a
    # package the cell's versions do not name, or one requirement the cell lacks: its answer
    assert measured_another_release({"torch": "2.0.1"}, {"torch": "2.0.1+cu117"}, wanted) == ""
    assert measured_another_release({"torch": "2.5.1"}, {"torch": "2.0.1"}, wanted) == ""
    both = {"torch": "torch<2.1", "numpy": "numpy>=2"}
    row = {"torch": "1.12.1", "numpy": "1.26.4"}
    assert measured_another_release(row, {"torch": "2.0.1", "numpy": "2.1.0"}, both) == ""

    base = make_entry(wa_rate=0.9)
    pin = Variant("wa", "workaround", "pin torch<2.1", requires=("torch<2.1",))
    entry = dataclasses.replace(
        base, variants=tuple(pin if v.name == "wa" else v for v in base.variants)
    )
    records = [
        rec("base", E2, R),
        rec("base", E3, R),
        advised(rec("wa", E2, OK), wanted, torch="2.0.1+cu117"),  # before the rule
        advised(rec("wa", E3, OK), wanted, torch="2.0.1+cu117"),  # E3's 2.5.1 needs it
    ]
    agg = aggregate_entry(entry, records)
    wa = next(v for v in agg.variants if v.name == "wa")
    assert (wa.overall.k, wa.overall.n) == (1, 1)  # E3 only: E2's run is not its answer
    assert ("wa", E2, "cpu", "fp16") not in agg.cells
    [apart] = wa.not_counted
    assert (apart.outcome, apart.count, apart.envs) == ("ok", 1, (E2,))
    assert apart.reason.startswith("measured another release: torch 2.0.1 where the cell's 1.12.1")
    assert wa.changed == ("torch 2.5.1 → 2.0.1",)
    assert "measured another release" in render_entry(agg)
    # as pip follows it now: the run in E2 itself, asked for torch<2.1 (ran_in empty)
    kept = dataclasses.replace(rec("wa", E2, OK), requires=wanted)
    agg = aggregate_entry(entry, [*records[:2], records[3], kept])
    wa = next(v for v in agg.variants if v.name == "wa")
    assert (wa.overall.k, wa.overall.n) == (2, 2) and not wa.not_counted
    assert wa.changed == ("torch 2.5.1 → 2.0.1", "already satisfied here: torch 1.12.1")


def test_advice_on_a_package_the_cells_lack_says_what_it_added() -> None:
    base = make_entry()
    onnx = Variant("wa", "workaround", "export", requires=("pytorch-lightning<2.0", "onnx>=1.14"))
    entry = dataclasses.replace(
        base, variants=tuple(onnx if v.name == "wa" else v for v in base.variants)
    )
    # pytorch-lightning beside the cell's lightning 2.1.4, as pip leaves it (the record keeps
    # the distribution's name, from what the derived environment holds beyond its row's)
    versions = {"pytorch-lightning": "1.9.5", "onnx": "1.17.0"}
    wanted = {"pytorch-lightning": "pytorch-lightning<2.0", "onnx": "onnx>=1.14"}
    record = advised(rec("wa", E2, OK), wanted, **versions)
    assert record.versions["lightning"] == "2.1.4"
    [wa] = [v for v in aggregate_entry(entry, [record]).variants if v.name == "wa"]
    assert wa.changed == ("pytorch-lightning 1.9.5", "onnx 1.17.0")
    assert not wa.not_counted  # the cell's answer


def test_a_run_where_pytorch_lightning_replaced_the_cells_lightning_is_set_apart() -> None:
    """A derived environment once replaced the cell's lightning with the pytorch-lightning a
    requirement named: code importing ``lightning.pytorch`` then ran pytorch_lightning 1.9
    (``lightning`` imported as a version-less "?"), where pip keeps the cell's lightning
    beside it. Such a run measured another release: set apart, not the cell's answer."""
    from harness.aggregate.advice import measured_another_release

    wanted = {"pytorch-lightning": "pytorch-lightning<2.0"}
    row = {"torch": "2.13.0", "lightning": "2.6.6"}
    for ran in (
        {"torch": "2.13.0+cpu", "pytorch_lightning": "1.9.5", "lightning": "?"},
        {"torch": "2.13.0+cpu", "pytorch_lightning": "1.9.5"},
    ):
        assert measured_another_release(row, ran, wanted) == (
            "measured another release: pytorch-lightning 1.9.5 in place of the cell's "
            "lightning 2.6.6 (pip keeps what no requirement names: the run that kept it is "
            "the cell's answer)"
        )
    # beside the cell's lightning: its answer; a requirement on lightning itself replaces it
    kept = {"torch": "2.13.0+cpu", "lightning": "2.6.6", "pytorch-lightning": "1.9.5"}
    assert measured_another_release(row, kept, wanted) == ""
    assert measured_another_release(row, {"lightning": "1.9.5"}, {"lightning": "lightning<2"}) == ""
    # a reproducer that imports no lightning installs none: not another release
    assert measured_another_release(row, {"torch": "1.13.1"}, {"torch": "torch<2"}) == ""
    # the cell's torch, which no requirement names, at another release
    assert measured_another_release(row, {"torch": "2.12.1"}, {"numpy": "numpy>=2"}).startswith(
        "measured another release: torch 2.12.1 where the cell's 2.13.0 stays"
    )

    base = make_entry()
    pin = Variant("wa", "workaround", "pin", requires=("pytorch-lightning<2.0",))
    entry = dataclasses.replace(
        base, variants=tuple(pin if v.name == "wa" else v for v in base.variants)
    )
    records = [rec("base", E2, R), rec("base", E3, R)]
    before = advised(rec("wa", E2, OK), wanted, pytorch_lightning="1.9.5", lightning="?")
    now = advised(rec("wa", E3, R), wanted, **{"pytorch-lightning": "1.9.5"})
    agg = aggregate_entry(entry, [*records, before, now])
    wa = next(v for v in agg.variants if v.name == "wa")
    assert (wa.overall.k, wa.overall.n) == (0, 1)  # E3: the cell's lightning still raises
    [apart] = wa.not_counted
    assert (apart.outcome, apart.envs) == ("ok", (E2,))
    assert apart.reason.startswith("measured another release: pytorch-lightning 1.9.5 in place")
    assert wa.changed == ("pytorch-lightning 1.9.5",)


def test_what_advice_changed_is_one_line_per_package_over_the_environments() -> None:
    from harness.aggregate.cells import change_texts, changes

    envs = [f"py3.11-torch2.{i}.0-lightning2.6.6" for i in range(1, 15)]
    found = [
        (env, c)
        for i, env in enumerate(envs, 1)
        for c in changes(
            {"torch": f"2.{i}.0+cu121", "numpy": "1.26.4"},
            {"torch": "2.0.1+cu117", "numpy": "1.26.4"},
            {"torch": "torch<2.1", "numpy": "numpy<2"},
        )
    ]
    order = {e: i for i, e in enumerate(envs)}
    # numpy<2 was the cells' own numpy 1.26.4 already: kept there, as pip would
    assert change_texts(found, order) == (
        "torch 2.1.0 … 2.14.0 (14) → 2.0.1",
        "already satisfied here: numpy 1.26.4",
    )


def test_advice_that_did_not_install_changes_nothing_and_the_requirement_names_its_package() -> (
    None
):
    base = make_entry()
    pin = Variant("wa", "workaround", "pin", requires=("pytorch-lightning<2.0",))
    entry = dataclasses.replace(
        base, variants=tuple(pin if v.name == "wa" else v for v in base.variants)
    )
    # keyed by its axis, as the first records of version advice were
    wanted = {"lightning": "pytorch-lightning<2.0"}
    ran = advised(rec("wa", E2, OK), wanted, **{"pytorch-lightning": "1.9.5"})
    failed = dataclasses.replace(
        advised(rec("wa", E3, ENVF), wanted),
        versions={"python_requested": "3.11", "torch_requested": "2.5.1"},
    )
    [wa] = [v for v in aggregate_entry(entry, [ran, failed]).variants if v.name == "wa"]
    assert wa.changed == ("pytorch-lightning 1.9.5",)


def test_a_workaround_naming_its_baselines_is_judged_where_they_reproduce() -> None:
    """entry.yaml ``baselines``: a workaround for one baseline's case is counted only in the
    cells where that baseline reproduced, not in those only another one did."""
    base2 = Variant("base2", "baseline", "another case")
    wa = Variant("wa", "workaround", "fix for base2's case", claim_ref="workaround 1")
    plain = make_entry()
    for_base2 = Entry(
        **{**plain.__dict__, "variants": (plain.variants[0], base2, dataclasses.replace(wa))}
    )
    answering = Entry(
        **{
            **plain.__dict__,
            "variants": (plain.variants[0], base2, dataclasses.replace(wa, baselines=("base2",))),
        }
    )
    records = [rec("base", env, R) for env in (E1, E2)]
    records += [dataclasses.replace(rec("base", E1, R), variant="base2")]
    records += [dataclasses.replace(rec("base", E2, OTHER), variant="base2")]
    records += [rec("wa", E1, OK), rec("wa", E2, OTHER)]
    [every] = [v for v in aggregate_entry(for_base2, records).variants if v.name == "wa"]
    [named] = [v for v in aggregate_entry(answering, records).variants if v.name == "wa"]
    assert (every.overall.k, every.overall.n) == (1, 2)  # E2: only base reproduced there
    assert (named.overall.k, named.overall.n) == (1, 1)


def test_a_rewritten_variant_reads_only_the_records_made_since() -> None:
    """entry.yaml ``rewritten``: the records of an older reproducer's variant are not read
    (another machine's, which a rerun does not replace, included)."""
    plain = make_entry()
    wa = dataclasses.replace(plain.variant("wa"), rewritten="2024-05-02")
    rewritten = Entry(
        **{**plain.__dict__, "variants": tuple(wa if v.name == "wa" else v for v in plain.variants)}
    )
    records = [rec("base", E1, R), rec("wa", E1, OTHER, day=1)]
    records.append(dataclasses.replace(rec("wa", E1, OK, day=3), machine="other"))
    [before] = [v for v in aggregate_entry(plain, records).variants if v.name == "wa"]
    [after] = [v for v in aggregate_entry(rewritten, records).variants if v.name == "wa"]
    # before: both trials of the one scenario, ok and not: flaky, no hit
    assert (before.overall.k, before.overall.n, before.runs) == (0, 1, 2)
    assert (after.overall.k, after.overall.n, after.runs) == (1, 1, 1)


def test_a_named_baselines_own_error_makes_the_cells_that_judge_its_workaround() -> None:
    """A workaround that names a baseline answers that baseline's error, its own (related)
    signature included: the Trainer's RuntimeError judges the Trainer's solution."""
    trainer = Variant(
        "trainer", "baseline", "the related error", signature=Signature("KeyError", "k")
    )
    wa = Variant("wa", "workaround", "for the trainer", baselines=("trainer",))
    plain = make_entry()
    e = Entry(**{**plain.__dict__, "variants": (plain.variants[0], trainer, wa)})
    related = dataclasses.replace(rec("base", E2, REL), variant="trainer", kind="baseline")
    records = [rec("base", E1, R), rec("base", E2, OTHER), related]
    records += [rec("wa", E1, OK), rec("wa", E2, OK)]
    [named] = [v for v in aggregate_entry(e, records).variants if v.name == "wa"]
    assert (named.overall.k, named.overall.n) == (1, 1)  # E2 only: where the trainer's error is
    unnamed = Entry(
        **{
            **e.__dict__,
            "variants": (plain.variants[0], trainer, Variant("wa", "workaround", "any")),
        }
    )
    [every] = [v for v in aggregate_entry(unnamed, records).variants if v.name == "wa"]
    assert (every.overall.k, every.overall.n) == (1, 1)  # E1 only: the documented error's


def test_a_retired_variants_records_are_not_read() -> None:
    """entry.yaml ``retired``: a variant the entry no longer has (renamed) is neither a
    variant of the aggregate nor counted, though its records stay in the store."""
    plain = make_entry()
    records = [rec("base", E1, R), rec("wa", E1, OK)]
    old = dataclasses.replace(rec("wa", E1, OTHER), variant="wa-old", kind="workaround")
    names = [v.name for v in aggregate_entry(plain, [*records, old]).variants]
    assert "wa-old" in names  # a name only the records know is shown
    retired = Entry(**{**plain.__dict__, "retired": {"wa-old": "renamed to wa"}})
    agg = aggregate_entry(retired, [*records, old])
    assert "wa-old" not in [v.name for v in agg.variants] and agg.n_runs == 2
