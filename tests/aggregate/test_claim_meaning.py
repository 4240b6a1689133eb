"""Claims judged as their document means them (docs/reference/outcomes-and-verdicts.md,
"What a claim means"): a dead end's failure kind, a claim's condition, a diagnostic, a
promise the runs cannot judge, and the environment's failures in derived environments.
Each test fails on the reading before it (a substitute error counted, a condition ignored,
an import failure counted against the advice)."""

from __future__ import annotations

import dataclasses

from harness.aggregate import (
    CONFIRMED,
    FAILS_OTHERWISE,
    HOLDS,
    NOT_AS_DOCUMENTED,
    NOT_MEASURABLE,
    WRONG,
    aggregate_entry,
)
from harness.aggregate.cells import environment_failure
from harness.spec.entries import ClaimMeaning, Entry, FailsAs, Variant
from harness.store.records import ExceptionInfo, Record
from tests.aggregate.test_aggregate import (
    E1,
    E2,
    OK,
    OTHER,
    R,
    across,
    make_entry,
    rec,
    verdict,
    wrong,
)


def with_dead_end(**fields) -> Entry:
    entry = make_entry()
    de = Variant("de", "dead_end", "dead end 1", claim_ref="dead end 1", claimed_rate=0.7)
    de = dataclasses.replace(de, **fields)
    return Entry(**{**entry.__dict__, "variants": (entry.variants[0], de)})


def baseline_reproduces() -> list[Record]:
    """Six reproducing scenarios: two environments x three precisions."""
    return across([rec("base", E1, R), rec("base", E2, R)])


def in_scenarios(variant_records: list[Record]) -> list[Record]:
    """The records in each of the six scenarios baseline_reproduces makes."""
    return across(variant_records)


def test_a_substitute_error_never_confirms_a_failure_of_another_kind() -> None:
    """dtype-mismatch dead end 2 ("loses mixed precision benefits") came back with the
    documented error itself: before, 18/18 "holds"; the document's failure is precision,
    which these runs cannot measure: not measurable, never "not as documented"."""
    meaning = ClaimMeaning(kind="precision", unmeasured="no dtype read")
    records = baseline_reproduces() + in_scenarios(
        [rec("de", e, R, trial=t) for e in (E1, E2) for t in (0, 1)]
    )
    v = verdict(aggregate_entry(with_dead_end(meaning=meaning), records), "dead end 1")
    assert v.advice == NOT_MEASURABLE and v.verdict == NOT_MEASURABLE
    assert v.figure == NOT_MEASURABLE  # only runs that fail as documented decide the figure
    assert "the document's failure is lost precision" in v.why
    # it raised the baseline's own error: it never acted, which its runs say as a note
    assert "applied where it cannot act: its 6 failing scenarios raised the documented" in v.why
    assert v.seen_instead == ""
    # failing in most scenarios with another error says nothing of lost precision either
    other = baseline_reproduces() + in_scenarios(
        [rec("de", e, OTHER, trial=t, message="boom") for e in (E1, E2) for t in (0, 1)]
    )
    v = verdict(aggregate_entry(with_dead_end(meaning=meaning), other), "dead end 1")
    assert (v.advice, v.verdict) == (NOT_MEASURABLE, NOT_MEASURABLE)
    assert "where it could act, it failed in 6/6 applicable scenarios and was ok in 0" in v.why
    assert v.seen_instead == "ValueError: boom (×6)"
    # the same runs with an error as the documented failure: as documented
    plain = verdict(aggregate_entry(with_dead_end(), records), "dead end 1")
    assert plain.advice == HOLDS and plain.verdict == CONFIRMED


def test_an_unmeasured_kind_that_runs_ok_is_not_measurable_never_wrong() -> None:
    """state-dict-key-mismatch dead end 2 ("brittle") read "wrong 0/57" from one checkpoint
    that cannot show brittleness."""
    meaning = ClaimMeaning(kind="brittle", unmeasured="nothing changes the model")
    records = baseline_reproduces() + in_scenarios(
        [rec("de", e, OK, trial=t) for e in (E1, E2) for t in (0, 1)]
    )
    v = verdict(aggregate_entry(with_dead_end(meaning=meaning), records), "dead end 1")
    assert v.verdict == NOT_MEASURABLE and v.advice == NOT_MEASURABLE
    assert "brittle" in v.why and "nothing changes the model" in v.why
    # the old reading, without the kind: the dead end works, the advice is wrong
    assert verdict(aggregate_entry(with_dead_end(), records), "dead end 1").advice == WRONG


def test_a_measured_kind_counts_its_postconditions_and_not_an_error() -> None:
    """A dead end documented as slower, measured by a time ratio (fails_as measures
    slower): the failing ratio counts, the documented error does not."""
    meaning = ClaimMeaning(kind="slower")
    fails = FailsAs("wrong_result", ("within_2x_of_control",), measures="slower")
    entry = with_dead_end(meaning=meaning, fails_as=fails)
    slow = in_scenarios(
        [
            Record(**{**r.__dict__, "variant": "de"})
            for r in (wrong(e, t, ("within_2x_of_control",)) for e in (E1, E2) for t in (0, 1))
        ]
    )
    agg = aggregate_entry(entry, baseline_reproduces() + slow)
    assert agg.variant("de").overall.k == 6
    assert verdict(agg, "dead end 1").advice == HOLDS
    errors = in_scenarios([rec("de", e, R, trial=t) for e in (E1, E2) for t in (0, 1)])
    agg = aggregate_entry(entry, baseline_reproduces() + errors)
    assert agg.variant("de").overall.k == 0
    assert agg.variant("de").related.k == 0
    assert verdict(agg, "dead end 1").advice == FAILS_OTHERWISE


def test_a_claim_outside_its_condition_is_not_judged() -> None:
    """attributeerror-tensor-no-grad workaround 4 applies "only when torch.compile() is used
    and the gradient issue is at a graph boundary": judged outside it, it read 0/39."""
    entry = make_entry(wa_rate=0.65)
    cond = "Only applicable when torch.compile() is used"
    outside = dataclasses.replace(entry.variants[1], meaning=ClaimMeaning(condition=cond))
    inside = dataclasses.replace(outside, meaning=ClaimMeaning(condition=cond, within="compiled"))
    records = baseline_reproduces() + in_scenarios(
        [rec("wa", e, OTHER, trial=t) for e in (E1, E2) for t in (0, 1)]
    )
    for variant, want in ((outside, NOT_MEASURABLE), (inside, "contradicted")):
        e = Entry(**{**entry.__dict__, "variants": (entry.variants[0], variant)})
        v = verdict(aggregate_entry(e, records), "workaround 1")
        assert v.verdict == want
        assert cond in v.claimed
    e = Entry(**{**entry.__dict__, "variants": (entry.variants[0], outside)})
    assert "outside its condition" in verdict(aggregate_entry(e, records), "workaround 1").why


def test_a_promise_the_runs_cannot_judge_is_not_measurable() -> None:
    """A check judged as a fix (anomaly detection "as a fix"): declared unmeasured, never
    decided by whether the error goes away."""
    entry = make_entry(wa_rate=0.9)
    wa = dataclasses.replace(
        entry.variants[1], meaning=ClaimMeaning(kind="diagnostic", unmeasured="a check")
    )
    e = Entry(**{**entry.__dict__, "variants": (entry.variants[0], wa)})
    records = baseline_reproduces() + [rec("wa", e_, OTHER) for e_ in (E1, E2)]
    v = verdict(aggregate_entry(e, records), "workaround 1")
    assert v.verdict == NOT_MEASURABLE and "a check" in v.why


def derived_entry() -> Entry:
    entry = make_entry(wa_rate=0.9)
    wa = dataclasses.replace(entry.variants[1], requires=("optimum-onnx",))
    return Entry(**{**entry.__dict__, "variants": (entry.variants[0], wa)})


def test_a_package_that_does_not_import_is_the_environments_failure() -> None:
    """huggingface/onnx-export-error workaround 1 read "figure overstated 24/33": the 9
    failures were optimum-onnx's ImportError in the releases the resolver paired with torch
    2.1-2.3."""
    text = "optimum-cli export onnx exited 1: ImportError: cannot import name 'main_export'"
    failed = rec("wa", E1, OTHER, message=text)
    records = baseline_reproduces() + [rec("wa", E2, OK), failed]
    agg = aggregate_entry(derived_entry(), records)
    wa = agg.variant("wa")
    assert (wa.overall.k, wa.overall.n) == (1, 1)
    [nc] = wa.not_counted
    assert nc.outcome == "unsupported" and "cannot import name 'main_export'" in nc.reason
    # the same failure in a variant without requirements (the cell's own environment) stays
    # the advice's failure: the entry's own packages are the cell's
    agg = aggregate_entry(make_entry(wa_rate=0.9), records)
    assert agg.variant("wa").overall.n == 2


def test_the_documented_error_is_never_read_as_the_environments() -> None:
    entry = derived_entry()
    entry = Entry(
        **{**entry.__dict__, "signature": dataclasses.replace(entry.signature, type="ImportError")}
    )
    r = rec("wa", E1, OTHER)
    r = Record(
        **{**r.__dict__, "exception": ExceptionInfo("ImportError", "Attempting to unscale x", "f")}
    )
    agg = aggregate_entry(entry, [*baseline_reproduces(), r])
    assert agg.variant("wa").not_counted == ()


def test_environment_failure_names_the_import() -> None:
    assert environment_failure("ModuleNotFoundError", "No module named 'onnx'\nmore") == (
        "the environment: ModuleNotFoundError: No module named 'onnx'"
    )
    assert "Failed to import transformers.models.gpt2" in (
        environment_failure("RuntimeError", "Failed to import transformers.models.gpt2 because")
        or ""
    )
    assert environment_failure("RuntimeError", "CUDA out of memory") is None


def test_explain_says_a_dead_end_failing_otherwise_is_to_avoid() -> None:
    """explain (and the page's answer.js, which mirrors it) never says "does not fail as
    documented" of a dead end that fails harder: it says to avoid it, and why not."""
    from harness.catalogue.explain import advise

    records = baseline_reproduces() + in_scenarios(
        [
            rec("de", e, OTHER, trial=t, message="AssertionError at step")
            for e in (E1, E2)
            for t in (0, 1)
        ]
    )
    agg = aggregate_entry(with_dead_end(), records)
    v = agg.variant("de")
    assert v.by_env and all(len(row) == 6 for row in v.by_env)  # the ok count per environment
    advice, words = advise(v, v)
    assert advice == NOT_AS_DOCUMENTED
    # its counts are scenarios, as the report's
    assert words.startswith("fails, not as documented: avoid it: failed in 6/6 scenarios here")


def test_a_cuda_only_message_is_decided_by_cuda_runs_alone() -> None:
    """cusolver-internal-error's message read "contradicted 0/108" from a CPU twin's
    LinAlgError: a message only a CUDA run can raise (signature.device: cuda) waits for
    one, and CPU runs neither show it nor speak against it."""
    entry = make_entry()
    cuda_only = Entry(
        **{**entry.__dict__, "signature": dataclasses.replace(entry.signature, device="cuda")}
    )
    cpu_twin = across(
        [rec("base", e, OTHER, trial=t, message="singular") for e in (E1, E2) for t in (0, 1)]
    )
    before = verdict(aggregate_entry(entry, cpu_twin), "documented message")
    assert before.verdict == "contradicted"  # the reading this rule replaces
    v = verdict(aggregate_entry(cuda_only, cpu_twin), "documented message")
    assert v.verdict == NOT_MEASURABLE and "waiting for a CUDA run" in v.why
    assert v.measured == (
        "no cuda run (6 scenarios on other devices, stand-ins that cannot show it)"
    )
    on_cuda = cpu_twin + [rec("base", E1, R, device="cuda"), rec("base", E2, R, device="cuda")]
    v = verdict(aggregate_entry(cuda_only, on_cuda), "documented message")
    assert v.verdict == CONFIRMED and v.n == 2  # the two CUDA scenarios, not the eight
