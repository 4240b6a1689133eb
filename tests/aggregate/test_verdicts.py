"""The verdict rules of docs/reference/outcomes-and-verdicts.md, one test per rule: two answers per rate claim
(advice, figure), graded documented messages, version rows per environment on the same
grade, and one verdict per case (a property test over claimed rate x k x n)."""

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
from tests.aggregate.test_aggregate import E1, E2, E3, LIGHTNING, TORCH, make_entry, verdict

R, OK, OTHER = Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR

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
) -> Record:
    return Record(
        entry=entry,
        variant=variant,
        kind=kind,
        cell=f"{env}-cpu-fp32",
        env=env,
        device="cpu",
        precision="fp32",
        trial=trial,
        outcome=outcome,
        exception=ExceptionInfo(exc[0], exc[1], "repro.py:1 in run") if exc else None,
        versions={"python": env[2:6].rstrip("-"), "torch": TORCH[env], "lightning": LIGHTNING[env]},
        provenance={"host": "box", "harness_version": "0.1.0", "git_rev": "abc123"},
        started_at="2024-05-01T10:00:00Z",
    )


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


def test_a_modest_figure_is_understated_and_the_advice_holds() -> None:
    # tensor-size-mismatch's workaround 3: 57/57 against a claimed 80%
    reading = V.read_rate(0.80, Rate.of(57, 57))
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.HOLDS,
        M.UNDERSTATED,
        M.CONFIRMED,
    )
    assert "contradicted" not in reading.why


def test_a_figure_within_the_margin_is_confirmed_though_the_claim_lies_below_the_interval() -> None:
    # 57/57 = CI 93.7-100% against a claimed 92%: within 92 +- 10, one rule only (was both)
    reading = V.read_rate(0.92, Rate.of(57, 57))
    assert (reading.advice, reading.figure, reading.verdict) == (
        M.HOLDS,
        M.CONFIRMED,
        M.CONFIRMED,
    )


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
    assert "fails as documented in most runs" in wrong.why
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
    """An answer read the other way round: holds <-> wrong, understated <-> overstated."""
    pairs = {M.HOLDS: M.WRONG, M.UNDERSTATED: M.OVERSTATED}
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
    # the same evidence the other way round reads as its mirror image
    mirror = V.read_rate((100 - percent) / 100, Rate.of(n - k, n))
    assert (mirror.advice, mirror.figure) == (mirror_of(reading.advice), mirror_of(reading.figure))


def test_rate_verdicts_say_both_answers_in_words_and_carry_them_in_json() -> None:
    records = [run("base", "baseline", e, R, trial=t) for e in (E1, E2, E3) for t in range(19)]
    records += [run("wa", "workaround", e, OK, trial=t) for e in (E1, E2, E3) for t in range(19)]
    agg = aggregate_entry(make_entry(wa_rate=0.8, fix_rate=0.8), records)
    wa = verdict(agg, "workaround 1")
    assert (wa.advice, wa.figure, wa.verdict) == (M.HOLDS, M.UNDERSTATED, M.CONFIRMED)
    assert wa.label == "holds; figure understated: 57/57 vs 80% claimed"
    data = wa.to_dict()
    assert (data["advice"], data["figure"], data["label"]) == (
        "holds",
        "understated",
        "holds; figure understated: 57/57 vs 80% claimed",
    )
    fix = verdict(agg, "fix rate").to_dict()
    assert (fix["advice"], fix["figure"]) == ("holds", "understated")
    message = verdict(agg, "documented message").to_dict()
    assert message["grade"] == "verbatim" and message["advice"] is None


def test_contradicted_rate_verdicts_say_so_first() -> None:
    records = [run("base", "baseline", e, R, trial=t) for e in (E1, E2) for t in range(3)]
    records += [
        run("wa", "workaround", e, OTHER, trial=t, exc=("ValueError", "nope"))
        for e in (E1, E2)
        for t in range(3)
    ]
    agg = aggregate_entry(make_entry(wa_rate=0.9), records)
    wa = verdict(agg, "workaround 1")
    assert wa.label == "contradicted: wrong; figure overstated: 0/6 vs 90% claimed"


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
    table = (VersionClaim("torch>=1.10", "active"),)
    records = [
        run("base", "baseline", e, OTHER, trial=t, exc=("RuntimeError", BROADCAST_TORCH))
        for e in (E1, E2, E3)
        for t in range(3)
    ]
    records += [run("wa", "workaround", e, OK, trial=t) for e in (E1, E2, E3) for t in range(3)]
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
    records = [
        run("base", "baseline", e, OTHER, trial=t, exc=("IndexError", "index out of range in self"))
        for e in (E1, E2)
        for t in range(3)
    ]
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
    assert msg.label == "contradicted; grade other-error: 0/6 baseline runs"


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
    records = [run("base", "baseline", e, OK, trial=t) for e in (E1, E2) for t in range(2)]
    msg = verdict(aggregate_entry(make_entry(), records), "documented message")
    assert (msg.verdict, msg.grade) == (M.CONTRADICTED, "not-raised")
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
    assert (de.overall.k, de.overall.n, de.failed_otherwise) == (3, 3, 0)
    assert verdict(agg, "dead end 1").seen_instead == ""


# -- version rows: per environment, on the same grade ------------------------------------------


def by_env(outcomes_per_env: dict[str, tuple[Outcome, int]]) -> list[Record]:
    out = []
    for env, (outcome, trials) in outcomes_per_env.items():
        exc = ("ValueError", "Attempting to unscale FP16 gradients.") if outcome is R else None
        out += [run("base", "baseline", env, outcome, trial=t, exc=exc) for t in range(trials)]
    return out


def test_a_not_affected_row_is_confirmed_by_the_profiles_three_trials() -> None:
    table = (VersionClaim("torch>=1.12", "not_affected"), VersionClaim("torch<1.12", "active"))
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (OK, 3)})
    agg = aggregate_entry(make_entry(table=table), records)
    fixed, active = (v for v in agg.verdicts if v.claim.startswith("version table"))
    assert fixed.verdict == M.CONFIRMED  # 0/3 in each of two environments
    assert active.verdict == M.CONFIRMED
    assert fixed.grade == "verbatim"


def test_a_stray_one_trial_environment_does_not_keep_a_row_undecided() -> None:
    table = (VersionClaim("torch>=1.12", "fixed"),)
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (OK, 1)})
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict == M.CONFIRMED
    assert f"{E3} (0/1)" in row.why  # named, not decisive


def test_a_present_row_is_contradicted_by_an_environment_whose_trials_all_miss() -> None:
    table = (VersionClaim("torch>=1.10", "active"),)
    records = by_env({E1: (R, 3), E2: (OK, 3), E3: (R, 1)})
    row = verdict(aggregate_entry(make_entry(table=table), records), "version table")
    assert row.verdict == M.CONTRADICTED and E2 in row.why


def test_a_version_row_does_not_echo_a_message_that_never_shows() -> None:
    table = (VersionClaim("torch>=1.10", "active"),)
    records = [
        run("base", "baseline", e, OTHER, trial=t, exc=("ValueError", "something else"))
        for e in (E1, E2, E3)
        for t in range(4)
    ]
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
    # 0/2 is inconclusive, where 0/8 would have contradicted it
    assert msg.verdict == M.INCONCLUSIVE and "2 of the 8 runs could show it" in msg.why
