"""The verdict rules of docs/reference/outcomes-and-verdicts.md, one test per rule: two answers per rate claim
(advice, figure), graded documented messages, version rows per release on the same grade,
and one verdict per case (a property test over claimed rate x k x n). Every count is in
scenarios (one cell of one variant); trials only settle whether a scenario is flaky."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import outcomes
from harness.aggregate import Rate, aggregate_entry
from harness.aggregate import model as M
from harness.aggregate import verdicts as V
from harness.outcomes import Outcome
from harness.spec.entries import Claims, Entry, Signature, Variant, VersionClaim
from harness.store.records import ExceptionInfo, Record
from tests.aggregate.test_aggregate import E1, E2, E3, LIGHTNING, MSG, TORCH, make_entry, verdict

R, OK, OTHER = Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR

# releases the matrix measures between and beyond the fixtures' 1.10.2, 1.12.1 and 2.5.1:
# the edges a version row rests on
E4 = "py3.9-torch1.11.0-lightning1.9.5"
E5 = "py3.11-torch2.15.0-lightning2.6.6"
TORCH_OF = {**TORCH, E4: "1.11.0", E5: "2.15.0"}
LIGHTNING_OF = {**LIGHTNING, E4: "1.9.5", E5: "2.6.6"}
PRECISIONS = ("fp32", "fp16", "bf16")

BROADCAST = "The size of tensor a must match the size of tensor b"
BROADCAST_TORCH = (
    "The size of tensor a (4) must match the size of tensor b (2) at non-singleton dimension 1"
)


def run(
    variant: str,
    kind: str,
    env: str,
    outcome: Outcome,
    *,
    trial: int = 0,
    exc: tuple[str, str] | None = None,
    entry: str = "pytorch/demo",
    precision: str = "fp32",
) -> Record:
    return Record(
        entry=entry,
        variant=variant,
        kind=kind,
        cell=f"{env}-cpu-{precision}",
        env=env,
        device="cpu",
        precision=precision,
        trial=trial,
        outcome=outcome,
        exception=ExceptionInfo(exc[0], exc[1], "repro.py:1 in run") if exc else None,
        versions={
            "python": env[2:6].rstrip("-"),
            "torch": TORCH_OF[env],
            "lightning": LIGHTNING_OF[env],
        },
        provenance={"host": "box", "harness_version": "0.1.0", "git_rev": "abc123"},
        started_at="2024-05-01T10:00:00Z",
    )


def scenarios(
    variant: str,
    kind: str,
    envs: tuple[str, ...],
    outcome: Outcome,
    *,
    trials: int = 3,
    exc: tuple[str, str] | None = None,
) -> list[Record]:
    """``trials`` runs of each of the envs x PRECISIONS scenarios (three per environment)."""
    return [
        run(variant, kind, e, outcome, trial=t, exc=exc, precision=p)
        for e in envs
        for p in PRECISIONS
        for t in range(trials)
    ]


def graded_entry(
    signature: Signature,
    *,
    reworded: object = None,
    table: tuple[VersionClaim, ...] = (),
    wa_rate: float | None = 0.8,
) -> Entry:
    base = make_entry(table=table)
    fields = {
        **base.__dict__,
        "signature": signature,
        "claims": Claims(version_table=table),
        "variants": (
            Variant("base", "baseline", "the error"),
            Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=wa_rate),
            Variant("de", "dead_end", "d", claim_ref="dead end 1", claimed_rate=0.7),
            Variant("ctl", "control", "c"),
        ),
    }
    if reworded is not None:
        fields["reworded"] = reworded
    return Entry(**fields)


# -- two answers per rate claim: advice and figure -------------------------------------------


def test_a_modest_figure_is_consistent_never_understated_and_the_advice_holds() -> None:
    # a stated rate is a population figure: 57/57 scenarios against a claimed 80% say nothing
    # lower than it, and cannot say it is too low
    reading = V.read_rate(0.80, Rate.of(57, 57))
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.HOLDS,
        M.CONSISTENT,
        M.CONFIRMED,
    )
    assert "contradicted" not in reading.why and "never too low" in reading.why
    assert not hasattr(M, "UNDERSTATED") and M.CONFIRMED not in M.FIGURES


def test_a_figure_is_consistent_where_the_interval_reaches_no_lower_than_the_margin() -> None:
    # 57/57 = CI 93.7-100%: consistent with a claimed 92%, and with 100% (the interval
    # reaches 100%), never "confirmed": the scenarios are not the population
    for claimed in (0.92, 1.0):
        reading = V.read_rate(claimed, Rate.of(57, 57))
        assert (reading.advice, reading.figure, reading.verdict) == (
            M.HOLDS,
            M.CONSISTENT,
            M.CONFIRMED,
        )
    # the interval's low end just below c - MARGIN: no longer consistent
    # (70/100: CI 60.4-78.1%, against 75%: 75 lies in it, 65 above its low end)
    # (the verdict follows the advice; the figure is said beside it)
    reading = V.read_rate(0.75, Rate.of(70, 100))
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.HOLDS,
        M.INCONCLUSIVE,
        M.CONFIRMED,
    )
    # and few scenarios, all hits, leave even a modest figure inconclusive (3/3: CI 43.9-100%)
    assert V.read_rate(0.8, Rate.of(3, 3)).figure == M.INCONCLUSIVE


def test_wrong_advice_and_an_overstated_figure_are_contradicted() -> None:
    reading = V.read_rate(0.90, Rate.of(0, 157))
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.WRONG,
        M.OVERSTATED,
        M.CONTRADICTED,
    )
    # the advice can hold while the figure is overstated: still contradicted, for the figure
    reading = V.read_rate(0.95, Rate.of(70, 100))  # CI 60.4-78.1%: most runs, far below 95%
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.HOLDS,
        M.OVERSTATED,
        M.CONTRADICTED,
    )


def test_an_unrated_claim_has_advice_and_no_figure() -> None:
    assert (V.read_rate(None, Rate.of(8, 8)).advice, V.read_rate(None, Rate.of(8, 8)).figure) == (
        M.HOLDS,
        M.NOT_STATED,
    )
    wrong = V.read_rate(None, Rate.of(0, 8), what="fails as documented")
    assert (wrong.advice, wrong.figure, wrong.verdict) == (M.WRONG, M.NOT_STATED, M.CONTRADICTED)
    assert "fails as documented in most scenarios" in wrong.why
    empty = V.read_rate(0.9, Rate.of(0, 0), why_empty="no cell reproduces")
    assert (empty.advice, empty.figure, empty.verdict, empty.why) == (
        M.NOT_MEASURABLE,
        M.NOT_MEASURABLE,
        M.NOT_MEASURABLE,
        "no cell reproduces",
    )


def test_small_samples_read_the_same_both_ways() -> None:
    low, high = V.read_rate(None, Rate.of(0, 2)), V.read_rate(None, Rate.of(2, 2))
    assert low.advice == high.advice == M.INCONCLUSIVE
    low, high = V.read_rate(0.5, Rate.of(0, 2)), V.read_rate(0.5, Rate.of(2, 2))
    assert (low.advice, low.figure) == (high.advice, high.figure) == (M.INCONCLUSIVE,) * 2
    assert low.verdict == high.verdict == M.INCONCLUSIVE
    # where the interval decides, it decides: 0/2 excludes 90%
    assert V.read_rate(0.9, Rate.of(0, 2)).advice == M.INCONCLUSIVE
    assert V.read_rate(0.9, Rate.of(0, 2)).figure == M.OVERSTATED


def mirror_of(answer: str) -> str:
    """An advice read the other way round: holds <-> wrong."""
    pairs = {M.HOLDS: M.WRONG}
    pairs |= {b: a for a, b in pairs.items()}
    return pairs.get(answer, answer)


@settings(max_examples=3000, deadline=None)
@given(
    percent=st.integers(0, 100),
    kn=st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_exactly_one_rule_decides_each_case_and_both_directions_read_alike(
    percent: int, kn: tuple[int, int]
) -> None:
    k, n = kn
    claimed, rate = percent / 100, Rate.of(k, n)
    advice = [name for name, rule in V.ADVICE_RULES if rule(rate.low, rate.high)]
    figure = [name for name, rule in V.FIGURE_RULES if rule(claimed, rate.low, rate.high)]
    assert len(advice) == 1, (claimed, k, n, advice)
    assert len(figure) == 1, (claimed, k, n, figure)
    reading = V.read_rate(claimed, rate)
    assert (reading.advice, reading.figure) == (advice[0], figure[0])
    # "contradicted" is the word for wrong advice and overstated figures, and only for them
    assert (reading.verdict == M.CONTRADICTED) == (
        reading.advice == M.WRONG or reading.figure == M.OVERSTATED
    )
    # the same evidence the other way round gives the mirror image of the advice
    mirror = V.read_rate((100 - percent) / 100, Rate.of(n - k, n))
    assert mirror.advice == mirror_of(reading.advice)
    # a figure can be shown too high, never too low: a lower claim on the same evidence is
    # never read as worse, a higher one never as better
    assert reading.figure in (M.CONSISTENT, M.OVERSTATED, M.INCONCLUSIVE)
    worse = {M.CONSISTENT: 0, M.INCONCLUSIVE: 1, M.OVERSTATED: 2}
    if percent > 0:
        lower = V.read_rate((percent - 1) / 100, rate).figure
        assert worse[lower] <= worse[reading.figure], (claimed, k, n, lower)
    # consistent exactly where the interval reaches no lower than c - MARGIN
    assert (reading.figure == M.CONSISTENT) == V._le(claimed - V.MARGIN, rate.low)


def test_rate_verdicts_say_both_answers_in_words_and_carry_them_in_json() -> None:
    # 19 trials of 9 scenarios (3 environments x 3 precisions): the counts are scenarios
    records = scenarios("base", "baseline", (E1, E2, E3), R, trials=19)
    records += scenarios("wa", "workaround", (E1, E2, E3), OK, trials=19)
    agg = aggregate_entry(make_entry(wa_rate=0.7, fix_rate=0.7), records)
    assert agg.variant("wa").runs == 171
    wa = verdict(agg, "workaround 1")
    assert (wa.advice, wa.figure, wa.verdict) == (M.HOLDS, M.CONSISTENT, M.CONFIRMED)
    assert wa.label == "holds; figure consistent: 9/9 scenarios vs 70% claimed"
    data = wa.to_dict()
    assert (data["advice"], data["figure"], data["label"]) == (
        "holds",
        "consistent",
        "holds; figure consistent: 9/9 scenarios vs 70% claimed",
    )
    fix = verdict(agg, "fix rate").to_dict()
    assert (fix["advice"], fix["figure"]) == ("holds", "consistent")
    message = verdict(agg, "documented message").to_dict()
    assert message["grade"] == "verbatim" and message["advice"] is None


def test_contradicted_rate_verdicts_say_so_first() -> None:
    records = scenarios("base", "baseline", (E1, E2), R)
    records += scenarios("wa", "workaround", (E1, E2), OTHER, exc=("ValueError", "nope"))
    agg = aggregate_entry(make_entry(wa_rate=0.9), records)
    wa = verdict(agg, "workaround 1")
    assert wa.label == "contradicted: wrong; figure overstated: 0/6 scenarios vs 90% claimed"
    # the same trials in fewer scenarios say less: 0/2 leaves the advice open
    few = [r for r in records if r.precision == "fp32"]
    wa = verdict(aggregate_entry(make_entry(wa_rate=0.9), few), "workaround 1")
    assert wa.label == (
        "contradicted: inconclusive (n=2); figure overstated: 0/2 scenarios vs 90% claimed"
    )


# -- graded messages: one function decides -----------------------------------------------------

STATE_DICT = r"Error\(s\) in loading state_dict: Missing key\(s\) in state_dict.*?Unexpected key\(s"
STATE_DICT_TORCH = (
    'Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "layer1.weight", '
    '"layer1.bias". \n\tUnexpected key(s) in state_dict: "module.layer1.weight". '
)


@pytest.mark.parametrize(
    ("outcome", "exc_type", "message", "sig_type", "pattern", "reworded", "grade"),
    [
        ("reproduced", "RuntimeError", "anything", "RuntimeError", "x", None, "verbatim"),
        # the documented text, read on the host (a record older than the signature)
        (
            "other_error",
            "RuntimeError",
            BROADCAST + " (4)",
            "RuntimeError",
            BROADCAST,
            None,
            "verbatim",
        ),
        # sizes, names, numbers and shapes the document dropped
        (
            "other_error",
            "RuntimeError",
            BROADCAST_TORCH,
            "RuntimeError",
            BROADCAST,
            None,
            "variable-parts",
        ),
        (
            "other_error",
            "RuntimeError",
            STATE_DICT_TORCH,
            "RuntimeError",
            STATE_DICT,
            None,
            "variable-parts",
        ),
        (
            "other_error",
            "ValueError",
            "Expected input batch_size (4) to match target batch_size (2).",
            "ValueError",
            "Expected input batch_size to match target batch_size",
            None,
            "variable-parts",
        ),
        (
            "other_error",
            "RuntimeError",
            "hook 'hook' has changed the size of value",
            "RuntimeError",
            "hook has changed the size of value",
            None,
            "variable-parts",
        ),
        (
            "other_error",
            "RuntimeError",
            "shape '[2, 4]' is invalid for input of size torch.Size([3, 3])",
            "RuntimeError",
            "shape is invalid for input of size",
            None,
            "variable-parts",
        ),
        # other words are not a dropped part
        (
            "other_error",
            "IndexError",
            "index out of range in self",
            "IndexError",
            "index out of range in Embedding",
            None,
            "other-error",
        ),
        (
            "other_error",
            "torch.jit.frontend.UnsupportedNodeError",
            "Set aren't supported:",
            "torch.jit.frontend.UnsupportedNodeError",
            "Set is not supported in TorchScript",
            None,
            "other-error",
        ),
        (
            "other_error",
            "RuntimeError",
            "the gradient was not computed",
            "RuntimeError",
            "the gradient was computed",
            None,
            "other-error",
        ),
        (
            "other_error",
            "RuntimeError",
            "a Please b",
            "RuntimeError",
            "a b",
            None,
            "other-error",
        ),
        # the documented words under another exception type: something else was raised
        (
            "other_error",
            "ValueError",
            BROADCAST_TORCH,
            "RuntimeError",
            BROADCAST,
            None,
            "other-error",
        ),
        # a document naming the base class matches any type by name
        (
            "other_error",
            "ValueError",
            "Module is not registered",
            "Exception",
            "not registered",
            None,
            "verbatim",
        ),
        # a declared rewording: the same type, torch's words
        (
            "other_error",
            "IndexError",
            "index out of range in self",
            "IndexError",
            "index out of range in Embedding",
            "index out of range in self",
            "reworded",
        ),
        (
            "other_error",
            "KeyError",
            "index out of range in self",
            "IndexError",
            "index out of range in Embedding",
            "index out of range in self",
            "other-error",
        ),
        ("related", "RuntimeError", "its own", "RuntimeError", "x", None, "other-error"),
        ("crashed", "", "", "RuntimeError", "x", None, "other-error"),
        ("timeout", "", "", "RuntimeError", "x", None, "other-error"),
        ("ok", "", "", "RuntimeError", "x", None, "not-raised"),
        ("wrong_result", "", "", "RuntimeError", "x", None, "not-raised"),
        ("unsupported", "", "", "RuntimeError", "x", None, None),
        ("env_failed", "", "", "RuntimeError", "x", None, None),
    ],
)
def test_one_function_grades_a_run(
    outcome: str,
    exc_type: str,
    message: str,
    sig_type: str,
    pattern: str,
    reworded: str | None,
    grade: str | None,
) -> None:
    got = outcomes.grade(outcome, exc_type, message, sig_type, pattern, reworded)
    assert (got.value if got is not None else None) == grade


def test_a_message_with_its_numbers_dropped_is_the_documented_error() -> None:
    # the spec ends at a measured release (2.5.1): its first and last release are measured
    table = (VersionClaim("torch>=1.10,<2.6", "active"),)
    records = scenarios(
        "base", "baseline", (E1, E2, E3), OTHER, exc=("RuntimeError", BROADCAST_TORCH)
    )
    records += scenarios("wa", "workaround", (E1, E2, E3), OK)
    agg = aggregate_entry(graded_entry(Signature("RuntimeError", BROADCAST), table=table), records)
    msg = verdict(agg, "documented message")
    assert (msg.verdict, msg.grade) == (M.CONFIRMED, "variable-parts")
    assert "9/9" in msg.measured and BROADCAST_TORCH in msg.why
    # the run outcomes stay as they are: the grade is how the claim is read
    assert agg.cells[("base", E1, "cpu", "fp32")].status == "other_error"
    # the claims that depend on a reproducing cell are measured in those cells
    wa = verdict(agg, "workaround 1")
    assert wa.advice == M.HOLDS and wa.measured.startswith("9/9")
    row = verdict(agg, "version table")
    assert (row.verdict, row.grade) == (M.CONFIRMED, "variable-parts")


def test_a_declared_rewording_is_read_as_the_documented_error_and_says_why() -> None:
    records = scenarios(
        "base", "baseline", (E1, E2), OTHER, exc=("IndexError", "index out of range in self")
    )
    reason = "torch names the lookup's weight argument, the document the module"
    entry = graded_entry(
        Signature("IndexError", "index out of range in Embedding"),
        reworded=M_reworded("index out of range in self", reason),
    )
    msg = verdict(aggregate_entry(entry, records), "documented message")
    assert (msg.verdict, msg.grade) == (M.CONFIRMED, "reworded")
    assert reason in msg.why and "index out of range in self" in msg.why
    # without the declaration the same runs read as another error: an invented message
    plain = graded_entry(Signature("IndexError", "index out of range in Embedding"))
    msg = verdict(aggregate_entry(plain, records), "documented message")
    assert (msg.verdict, msg.grade) == (M.CONTRADICTED, "other-error")
    assert msg.label == "contradicted; grade other-error: 0/6 baseline scenarios"


def test_a_rewording_raised_as_a_subclass_of_the_documented_type_is_read_when_declared() -> None:
    """A record keeps the exception's own class: a rewording names the subclass torch
    raises it as (reworded.type), else the subclass reads as another error."""
    sub = "torch.onnx.errors.UnsupportedOperatorError"
    words = "Exporting the operator 'aten::x' to ONNX opset version 11 is not supported"
    sig = ("OnnxExporterError", "model export to ONNX failed")
    pattern = "Exporting the operator .* to ONNX opset version \\d+ is not supported"
    assert outcomes.grade("other_error", sub, words, *sig, pattern) is outcomes.Grade.OTHER_ERROR
    named = outcomes.grade("other_error", sub, words, *sig, pattern, "UnsupportedOperatorError")
    assert named is outcomes.Grade.REWORDED
    # the subclass with other words, or another class with these words: not the rewording
    assert outcomes.grade(
        "other_error", sub, "boom", *sig, pattern, "UnsupportedOperatorError"
    ) is (outcomes.Grade.OTHER_ERROR)
    assert outcomes.grade(
        "other_error", "KeyError", words, *sig, pattern, "UnsupportedOperatorError"
    ) is (outcomes.Grade.OTHER_ERROR)
    from harness.spec.entries import Reworded

    records = [
        run("base", "baseline", e, OTHER, trial=t, exc=(sub, words))
        for e in (E1, E2)
        for t in range(3)
    ]
    entry = graded_entry(
        Signature(*sig),
        reworded=Reworded(
            message=pattern, why="the exporter names the operator", type="UnsupportedOperatorError"
        ),
    )
    msg = verdict(aggregate_entry(entry, records), "documented message")
    assert (msg.verdict, msg.grade) == (M.CONFIRMED, "reworded")


def M_reworded(message: str, why: str) -> object:
    from harness.spec.entries import Reworded

    return Reworded(message=message, why=why)


def test_a_baseline_that_raises_nothing_is_graded_not_raised() -> None:
    records = scenarios("base", "baseline", (E1, E2), OK, trials=2)
    msg = verdict(aggregate_entry(make_entry(), records), "documented message")
    assert (msg.verdict, msg.grade) == (M.CONTRADICTED, "not-raised")
    # the same runs in two scenarios cannot rule out an error of half of them
    fp32 = [r for r in records if r.precision == "fp32"]
    msg = verdict(aggregate_entry(make_entry(), fp32), "documented message")
    assert (msg.verdict, msg.grade) == (M.INCONCLUSIVE, "not-raised")
    unmeasured = [run("base", "baseline", E1, Outcome.UNSUPPORTED)]
    msg = verdict(aggregate_entry(make_entry(), unmeasured), "documented message")
    assert (msg.verdict, msg.grade) == (M.NOT_MEASURABLE, M.NOT_MEASURABLE)


def test_a_dead_end_raising_the_graded_error_fails_as_documented() -> None:
    records = [
        run("base", "baseline", E1, OTHER, trial=t, exc=("RuntimeError", BROADCAST_TORCH))
        for t in range(3)
    ]
    records += [
        run("de", "dead_end", E1, OTHER, trial=t, exc=("RuntimeError", BROADCAST_TORCH))
        for t in range(3)
    ]
    agg = aggregate_entry(graded_entry(Signature("RuntimeError", BROADCAST)), records)
    de = agg.variant("de")
    # one scenario of three trials
    assert (de.overall.k, de.overall.n, de.failed_otherwise, de.runs) == (1, 1, 0, 3)
    assert verdict(agg, "dead end 1").seen_instead == ""


# -- version rows: per release, on the same grade ----------------------------------------------


def by_env(outcomes_per_env: dict[str, tuple[Outcome, int]]) -> list[Record]:
    out = []
    for env, (outcome, trials) in outcomes_per_env.items():
        exc = ("ValueError", "Attempting to unscale FP16 gradients.") if outcome is R else None
        out += [run("base", "baseline", env, outcome, trial=t, exc=exc) for t in range(trials)]
    return out


def test_a_row_is_confirmed_only_with_the_releases_at_its_edges_measured() -> None:
    table = (VersionClaim("torch>=1.12", "not_affected"), VersionClaim("torch<1.12", "active"))
    # every release either row covers at its edges: 1.10.2 and 1.11.0 below 1.12, 1.12.1
    # and 2.15.0 (the matrix's last) at and above it
    records = by_env({E1: (R, 3), E4: (R, 3), E2: (OK, 3), E3: (OK, 3), E5: (OK, 3)})
    agg = aggregate_entry(make_entry(table=table), records)
    fixed, active = (v for v in agg.verdicts if v.claim.startswith("version table"))
    assert fixed.verdict == M.CONFIRMED, fixed.why
    assert active.verdict == M.CONFIRMED, active.why
    assert fixed.grade == "verbatim"
    # without 1.11.0, the last release torch<1.12 covers, the change may lie anywhere
    # between 1.10.2 and 1.12.1: the active row is not settled, the other still is
    records = [r for r in records if r.env != E4]
    agg = aggregate_entry(make_entry(table=table), records)
    fixed, active = (v for v in agg.verdicts if v.claim.startswith("version table"))
    assert fixed.verdict == M.CONFIRMED
    assert active.verdict == M.INCONCLUSIVE
    assert "not measured: torch 1.11.0 (the last release torch<1.12 covers)" in active.why
    assert "the change lies between torch 1.10.2 and 1.12.1" in active.why
    assert "python -m harness bisect pytorch/demo" in active.why and "1.10.2..1.12.1" in active.why
    # ... and without 2.15.0, the last the other covers, neither is
    records = [r for r in records if r.env != E5]
    fixed = verdict(aggregate_entry(make_entry(table=table), records), "version table: torch>=")
    assert fixed.verdict == M.INCONCLUSIVE
    assert "not measured: torch 2.15.0 (the last release torch>=1.12 covers)" in fixed.why


def test_one_scenario_decides_a_release_either_way() -> None:
    # a release with one trial of one scenario: it lacks the error (one is enough), and a
    # release that shows it once shows it
    table = (VersionClaim("torch>=1.12", "fixed"),)
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (OK, 1), E5: (OK, 1)})
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict == M.CONFIRMED, row.why
    assert "torch 1.12.1–2.15.0, 3 releases" in row.why
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (R, 1), E5: (OK, 1)})
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict == M.CONTRADICTED and row.why.startswith("reproduces in torch 2.5.1")


def test_a_present_row_is_contradicted_by_a_release_whose_scenarios_all_miss() -> None:
    table = (VersionClaim("torch>=1.10", "active"),)
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (R, 1)})
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict == M.CONTRADICTED and "does not reproduce in torch 1.12.1" in row.why
    # a release whose trials mix shows it: one sighting is a sighting
    records = by_env({E1: (R, 3), E3: (R, 1)}) + [
        run("base", "baseline", E2, OK, trial=0),
        run("base", "baseline", E2, R, trial=1, exc=("ValueError", MSG)),
    ]
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict != M.CONTRADICTED and "1.12.1" not in row.why.split(";")[0]


def test_a_version_row_does_not_echo_a_message_that_never_shows() -> None:
    table = (VersionClaim("torch>=1.10", "active"),)
    records = scenarios(
        "base", "baseline", (E1, E2, E3), OTHER, trials=4, exc=("ValueError", "something else")
    )
    agg = aggregate_entry(make_entry(table=table), records)
    assert verdict(agg, "documented message").verdict == M.CONTRADICTED
    row = verdict(agg, "version table")
    assert (row.verdict, row.grade) == (M.NOT_MEASURABLE, "other-error")
    assert "documented message" in row.why


def test_a_stand_in_baselines_own_error_shows_nothing_of_the_documented_message() -> None:
    """A CPU twin of a CUDA error declares the error the CPU raises (related): its runs can
    neither confirm nor contradict the documented message; the CUDA baseline waits."""
    base = graded_entry(Signature("RuntimeError", "device-side assert triggered"))
    twin = Variant(
        "base-cpu", "baseline", "the CPU twin", signature=Signature("IndexError", "out of bounds")
    )
    gpu = Variant("base-gpu", "baseline", "on the GPU", devices=("cuda",))
    entry = Entry(**{**base.__dict__, "variants": (twin, gpu, *base.variants[1:])})
    related = [
        run(
            "base-cpu",
            "baseline",
            e,
            Outcome.RELATED,
            trial=t,
            exc=("IndexError", "Target 4 is out of bounds."),
        )
        for e in (E1, E2)
        for t in range(3)
    ]
    msg = verdict(aggregate_entry(entry, related), "documented message")
    assert msg.verdict == M.NOT_MEASURABLE, msg.why
    assert "declares instead" in msg.why and "need CUDA and have no run yet: base-gpu" in msg.why
    # one baseline that could show it and never did still counts, over its own runs only
    plain = Variant("base", "baseline", "the error")
    entry = Entry(**{**base.__dict__, "variants": (twin, plain, *base.variants[1:])})
    never = [
        run("base", "baseline", E1, OTHER, trial=t, exc=("ValueError", "something else"))
        for t in range(2)
    ]
    msg = verdict(aggregate_entry(entry, related + never), "documented message")
    # 0/1 is inconclusive, where 0/3 scenarios could not have contradicted it either: the
    # twin's two scenarios are counted, not read
    assert msg.verdict == M.INCONCLUSIVE and "1 of the 3 scenarios could show it" in msg.why


def test_version_advice_names_the_releases_its_requirements_left_unmeasured() -> None:
    from types import SimpleNamespace

    failed = M.NotCounted("env_failed", "No module named 'pkg_resources'", 2, (E3,))
    unserved = M.NotCounted(
        "unsupported", "the variant's requirements x<1 cannot be installed", 1, (E5,)
    )
    other = M.NotCounted("unsupported", "needs cuda", 1, (E4,))
    measured = ((E1, 1, 1, 0, 0, 0),)
    advice = SimpleNamespace(
        requires=("pytorch-lightning<2.0",), not_counted=(failed, unserved, other), by_env=measured
    )
    assert V._left_unmeasured(advice) == (
        f"not measured on torch {TORCH_OF[E3]}, 2.15.0 (its requirements did not install there)"
    )
    # a release measured in another cell is measured; without requires, nothing is said
    assert (
        V._left_unmeasured(
            SimpleNamespace(
                **{**advice.__dict__, "by_env": ((E3, 1, 1, 0, 0, 0), (E5, 1, 1, 0, 0, 0))}
            )
        )
        == ""
    )
    assert V._left_unmeasured(SimpleNamespace(**{**advice.__dict__, "requires": ()})) == ""
