"""The evidence model's rules, each on records whose answer is known and each able to fail:
a bound needs the releases around it, figures count scenarios, a claim whose scenarios part
at one release depends on it, an unmeasurable failure kind is never "not as documented"."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.aggregate import (
    CONFIRMED,
    CONSISTENT,
    CONTRADICTED,
    DEPENDS,
    INCONCLUSIVE,
    NOT_MEASURABLE,
    OVERSTATED,
    aggregate_entry,
)
from harness.aggregate.verdicts import release_split
from harness.outcomes import Outcome
from harness.spec.entries import (
    ClaimMeaning,
    Claims,
    Entry,
    FailsAs,
    Signature,
    Variant,
    VersionClaim,
)
from harness.store.records import ExceptionInfo, Record

R, OK, OTHER = Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR
MSG = "the documented error"
LIGHTNING_OF = {"1.12.1": "2.1.4", "2.13.0": "2.6.6"}


def env_of(torch: str, lightning: str | None = None) -> str:
    return f"py3.11-torch{torch}-lightning{lightning or LIGHTNING_OF.get(torch, '2.6.6')}"


def rec(
    variant: str,
    kind: str,
    torch: str,
    outcome: Outcome,
    *,
    trial: int = 0,
    lightning: str | None = None,
) -> Record:
    env = env_of(torch, lightning)
    exc = None
    if outcome in (R, OTHER):
        exc = ExceptionInfo("RuntimeError", MSG if outcome is R else "another error", "x.py:1")
    return Record(
        entry="pytorch/rules",
        variant=variant,
        kind=kind,
        cell=f"{env}-cpu-fp32",
        env=env,
        device="cpu",
        precision="fp32",
        trial=trial,
        outcome=outcome,
        exception=exc,
        versions={
            "python": "3.11.7",
            "torch": torch,
            "lightning": lightning or LIGHTNING_OF.get(torch, "2.6.6"),
        },
        provenance={"host": "box", "harness_version": "0.1.0", "git_rev": "abc123"},
        started_at="2026-05-01T10:00:00Z",
    )


def entry(*variants: Variant, table: tuple[VersionClaim, ...] = ()) -> Entry:
    here = Path("/nonexistent/document.md")
    return Entry(
        id="pytorch/rules",
        dir=here.parent,
        title="rules",
        signature=Signature("RuntimeError", MSG),
        claims=Claims(verification="ai_generated", version_table=table),
        variants=(Variant("base", "baseline", "the error"), *variants),
        source=here,
        document=here,
        repro=here,
    )


def row(agg, spec: str):
    [v] = [v for v in agg.verdicts if v.claim.startswith(f"version table: {spec} ")]
    return v


def claim(agg, ref: str):
    [v] = [v for v in agg.verdicts if v.claim.startswith(ref)]
    return v


# -- 1. a version bound needs the release just below it and the release at it ----------------

INTRODUCED_2_1 = (
    VersionClaim("torch>=2.1", "active", introduced="2.1"),
    VersionClaim("torch<2.1", "not_affected"),
)


def test_the_smoke_profile_leaves_a_torch_bound_inconclusive_with_the_command_to_settle_it():
    # the documented first run: 1.12.1 (ok) and 2.13.0 (the error): truth is 2.0.0
    records = [rec("base", "baseline", "1.12.1", OK), rec("base", "baseline", "2.13.0", R)]
    agg = aggregate_entry(entry(table=INTRODUCED_2_1), records)
    active, before = row(agg, "torch>=2.1"), row(agg, "torch<2.1")
    assert active.verdict == INCONCLUSIVE and before.verdict == INCONCLUSIVE
    assert "the change lies between torch 1.12.1 and 2.13.0" in active.why
    assert "python -m harness bisect pytorch/rules" in active.why
    assert "--torch 1.12.1..2.13.0" in active.why
    # one ok scenario on 1.12.1 counts as much as one failing scenario on 2.13.0
    assert "does not reproduce in every measured release it covers (torch 1.12.1" in before.why


def test_a_torch_bound_is_confirmed_with_both_neighbours_measured_and_contradicted_by_them():
    base = [rec("base", "baseline", "1.12.1", OK), rec("base", "baseline", "2.13.0", R)]
    # the release just below 2.1 (2.0.1) and the release at it (2.1.2), each as the row says
    settled = [*base, rec("base", "baseline", "2.0.1", OK), rec("base", "baseline", "2.1.2", R)]
    # the edges of torch>=2.1 are 2.1.2 and the newest release the matrix knows: measure it
    newest = "2.15.0"
    settled.append(rec("base", "baseline", newest, R))
    agg = aggregate_entry(entry(table=INTRODUCED_2_1), settled)
    assert row(agg, "torch>=2.1").verdict == CONFIRMED
    assert "measured at and just below each bound" in row(agg, "torch>=2.1").why
    # truth 2.0.0: a bisect's run of 2.0.1 shows the error, below the documented bound
    truth = [*base, rec("base", "baseline", "2.0.1", R), rec("base", "baseline", "2.1.2", R)]
    agg = aggregate_entry(entry(table=INTRODUCED_2_1), truth)
    assert row(agg, "torch>=2.1").verdict == CONTRADICTED
    assert "reproduces in 2.0.1, before introduced 2.1" in row(agg, "torch>=2.1").why
    assert row(agg, "torch<2.1").verdict == CONTRADICTED


def test_a_lightning_bound_needs_the_lightning_releases_around_it():
    table = (VersionClaim("lightning>=1.9", "active", introduced="1.9"),)
    smoke = [
        rec("base", "baseline", "1.12.1", R, lightning="2.1.4"),
        rec("base", "baseline", "2.13.0", R, lightning="2.6.6"),
    ]
    agg = aggregate_entry(entry(table=table), smoke)
    v = row(agg, "lightning>=1.9")
    assert v.verdict == INCONCLUSIVE
    assert "lightning 1.8.6 (the release just below introduced 1.9)" in v.why
    # lightning 1.9.5 shows it and 1.8.6 does not: the bound holds at the line the matrix has
    full = [
        *smoke,
        rec("base", "baseline", "1.12.1", OK, lightning="1.8.6"),
        rec("base", "baseline", "1.12.1", R, lightning="1.9.5"),
    ]
    assert row(aggregate_entry(entry(table=table), full), "lightning>=1.9").verdict == CONFIRMED


# -- 2. a figure counts scenarios; a population figure is never shown too low ----------------


def test_trials_of_one_scenario_count_once_and_a_flaky_scenario_is_no_hit():
    wa = Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=0.5)
    records = [rec("base", "baseline", t, R) for t in ("2.12.1", "2.13.0")]
    records += [rec("wa", "workaround", "2.12.1", OK, trial=i) for i in range(50)]
    records += [
        rec("wa", "workaround", "2.13.0", OK),
        rec("wa", "workaround", "2.13.0", OTHER, trial=1),
    ]
    v = aggregate_entry(entry(wa), records).variant("wa")
    assert (v.overall.k, v.overall.n, v.runs) == (1, 2, 52)


def test_a_figure_below_what_every_scenario_shows_is_consistent_never_understated():
    wa = Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=0.3)
    torches = ("2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1")
    records = [rec("base", "baseline", t, R) for t in torches]
    records += [rec("wa", "workaround", t, OK, trial=i) for t in torches for i in range(3)]
    v = claim(aggregate_entry(entry(wa), records), "workaround 1")
    assert (v.advice, v.figure) == ("holds", CONSISTENT)
    assert v.label == "holds; figure consistent: 8/8 scenarios vs 30% claimed"


def test_a_figure_is_overstated_only_where_scenarios_fail_beyond_the_margin():
    wa = Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=0.9)
    torches = ("2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1")
    records = [rec("base", "baseline", t, R) for t in torches]
    # it fails in alternate releases: no single change parts them
    records += [rec("wa", "workaround", t, OK if i % 2 else OTHER) for i, t in enumerate(torches)]
    v = claim(aggregate_entry(entry(wa), records), "workaround 1")
    assert v.figure == OVERSTATED and v.verdict == CONTRADICTED


# -- the same, where the scenarios part at one release ----------------------------------------

TORCHES = ("2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0")


def test_a_dead_end_failing_exactly_after_a_release_depends_on_it_and_says_which():
    de = Variant(
        "de",
        "dead_end",
        "whole-model pickle",
        claim_ref="dead end 2",
        claimed_rate=0.78,
        signature=Signature("UnpicklingError", "Weights only load failed"),
    )
    records = [rec("base", "baseline", t, R) for t in TORCHES]
    for t in TORCHES:
        if t >= "2.6":
            records.append(
                Record(
                    **{
                        **rec("de", "dead_end", t, OTHER).__dict__,
                        "exception": ExceptionInfo(
                            "UnpicklingError", "Weights only load failed", "x.py:1"
                        ),
                    }
                )
            )
        else:
            records.append(rec("de", "dead_end", t, OK))
    agg = aggregate_entry(entry(de), records)
    split = release_split(agg, agg.variant("de"))
    assert split is not None and (str(split.below), str(split.at)) == ("2.5.1", "2.6.0")
    v = claim(agg, "dead end 2")
    assert v.verdict == DEPENDS and v.advice == DEPENDS
    assert v.label == (
        "depends on the release: fails as documented in torch 2.6.0–2.8.0 (3 measured "
        "releases), does not fail as documented in 2.3.1–2.5.1: the change lies between "
        "torch 2.5.1 and 2.6.0"
    )


def test_a_release_that_mixes_hits_and_misses_is_no_split():
    wa = Variant("wa", "workaround", "w", claim_ref="workaround 1")
    records = [rec("base", "baseline", t, R) for t in TORCHES]
    records += [rec("wa", "workaround", t, OK if t >= "2.6" else OTHER) for t in TORCHES]
    # a second scenario of 2.7.1 (another lightning) that fails: 2.7.1 mixes
    records.append(rec("base", "baseline", "2.7.1", R, lightning="2.5.6"))
    records.append(rec("wa", "workaround", "2.7.1", OTHER, lightning="2.5.6"))
    agg = aggregate_entry(entry(wa), records)
    assert release_split(agg, agg.variant("wa")) is None
    assert claim(agg, "workaround 1").verdict != DEPENDS


# -- 4. a failure kind the runs cannot measure is never "not as documented" -------------------


@pytest.mark.parametrize("outcome", [OTHER, R])
def test_an_unmeasurable_dead_end_kind_is_not_measurable_whatever_its_runs(outcome):
    de = Variant(
        "de",
        "dead_end",
        "autocast disabled",
        claim_ref="dead end 2",
        claimed_rate=0.7,
        meaning=ClaimMeaning(kind="precision", unmeasured="the runs do not read the dtype"),
    )
    records = [rec("base", "baseline", t, R) for t in TORCHES]
    records += [rec("de", "dead_end", t, outcome) for t in TORCHES]
    v = claim(aggregate_entry(entry(de), records), "dead end 2")
    assert v.verdict == NOT_MEASURABLE and "not as documented" not in v.label
    if outcome is R:  # it left the baseline's situation as it was: it could not act
        assert "applied where it cannot act" in v.why and not v.seen_instead
    else:
        assert "where it could act, it failed in 6/6" in v.why


# -- 3. a situation that raises nothing, declared, judges the advice ---------------------------


def test_a_baseline_declaring_its_silent_situation_makes_the_cells_that_judge_the_advice():
    base = Variant(
        "base",
        "baseline",
        "the loss goes nan",
        fails_as=FailsAs(
            "wrong_result", ("loss_finite",), instead="torch checks no loss: it raises nothing"
        ),
    )
    wa = Variant("wa", "workaround", "w", claim_ref="workaround 1", baselines=("base",))
    records = []
    for t in TORCHES:
        silent = rec("base", "baseline", t, Outcome.WRONG_RESULT)
        records.append(
            Record(**{**silent.__dict__, "checks": {"loss_finite": {"ok": False, "detail": "nan"}}})
        )
        records.append(rec("wa", "workaround", t, OK))
    here = Path("/nonexistent/document.md")
    e = Entry(
        id="pytorch/rules",
        dir=here.parent,
        title="rules",
        signature=Signature("RuntimeError", MSG),
        claims=Claims(verification="ai_generated"),
        variants=(base, wa),
        source=here,
        document=here,
        repro=here,
    )
    agg = aggregate_entry(e, records)
    assert claim(agg, "workaround 1").verdict == CONFIRMED
    message = claim(agg, "documented message")
    assert "where the documented situation raises nothing" in message.why
    assert "postcondition loss_finite fails" in message.why
    # without the declaration, nothing reproduces: the advice is not judged
    plain = Entry(**{**e.__dict__, "variants": (Variant("base", "baseline", "x"), wa)})
    assert claim(aggregate_entry(plain, records), "workaround 1").verdict == NOT_MEASURABLE
