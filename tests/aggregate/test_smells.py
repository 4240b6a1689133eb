"""Smells on hand-built records whose answers are known (no processes, no files)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.aggregate.smells import environment_cause, find_smells, stale_explanations
from harness.outcomes import Outcome
from harness.spec.entries import ClaimMeaning, Entry, FailsAs, Signature, Variant
from harness.store.records import ExceptionInfo, Record

R, OK, OTHER, WRONG = Outcome.REPRODUCED, Outcome.OK, Outcome.OTHER_ERROR, Outcome.WRONG_RESULT
UNS = Outcome.UNSUPPORTED
E1, E2 = "py3.10-torch1.12.1-lightning2.1.4", "py3.11-torch2.5.1-lightning2.4.0"
KIND = {"base": "baseline", "base2": "baseline", "wa": "workaround", "wa2": "workaround"}
KIND |= {"de": "dead_end", "ctl": "control"}
MSG = "Attempting to unscale FP16 gradients."
HERE = Path("/nonexistent/document.md")


def entry(*variants: Variant, smells: dict | None = None) -> Entry:
    return Entry(
        id="pytorch/demo",
        dir=HERE.parent,
        title="Demo",
        signature=Signature("ValueError", "Attempting to unscale"),
        claims=None,  # type: ignore[arg-type]
        variants=variants
        or (
            Variant("base", "baseline", "the error"),
            Variant("wa", "workaround", "a fix"),
            Variant("de", "dead_end", "no fix", fails_as=FailsAs("wrong_result", ("trained",))),
            Variant("ctl", "control", "sanity"),
        ),
        source=HERE,
        document=HERE,
        repro=HERE,
        smells=smells or {},
    )


def rec(
    variant: str,
    env: str,
    outcome: Outcome,
    *,
    checks: dict | None = None,
    message: str | None = None,
    exc_type: str = "ValueError",
    frame: str = "repro.py:1 in run",
    trial: int = 0,
    precision: str = "fp32",
) -> Record:
    exc = None
    if outcome in (R, OTHER):
        exc = ExceptionInfo(exc_type, message or (MSG if outcome is R else "other"), frame)
    if checks is None:
        checks = {} if exc else {"trained": {"ok": outcome is not WRONG, "detail": variant}}
    return Record(
        entry="pytorch/demo",
        variant=variant,
        kind=KIND[variant],
        cell=f"{env}-cpu-{precision}",
        env=env,
        device="cpu",
        precision=precision,
        trial=trial,
        outcome=outcome,
        exception=exc,
        checks=checks,
    )


def kinds(smells) -> list[tuple[str, str | None, str]]:
    return [(s.kind, s.variant, s.subject) for s in smells]


def ran(variant: str, outcome: Outcome, **kw) -> list[Record]:
    return [rec(variant, env, outcome, trial=t, **kw) for env in (E1, E2) for t in (0, 1)]


def test_a_clean_entry_has_no_smell() -> None:
    records = ran("base", R) + ran("wa", OK) + ran("de", WRONG) + ran("ctl", OK)
    assert find_smells(entry(), records) == []


def test_a_postcondition_that_never_fails_is_asked_about() -> None:
    both = {"trained": {"ok": True, "detail": "x"}, "finite": {"ok": True, "detail": "y"}}
    failing = {"trained": {"ok": False, "detail": "z"}, "finite": {"ok": True, "detail": "y"}}
    records = ran("base", R) + ran("wa", OK, checks=both) + ran("de", WRONG, checks=failing)
    control = {"trained": {"ok": True, "detail": "c"}, "finite": {"ok": True, "detail": "y"}}
    records += ran("ctl", OK, checks={**control, "_warnings": ["a list, not a check"]})
    [smell] = find_smells(entry(), records)
    assert (smell.kind, smell.variant, smell.subject) == ("never-fails", None, "finite")
    assert "12 runs" in smell.detail and "wa, de, ctl" in smell.detail
    assert smell.where == "postcondition finite"


def test_a_variant_that_does_what_the_control_does_is_asked_about() -> None:
    # the same outcome with the same details: the workaround runs the control's code
    records = ran("base", R) + ran("de", WRONG) + ran("ctl", OK)
    records += [dataclasses.replace(r, variant="wa", kind="workaround") for r in ran("ctl", OK)]
    assert kinds(find_smells(entry(), records)) == [("same-as-control", "wa", "ctl")]
    # another detail (another computation that also works) is another case
    records = ran("base", R) + ran("de", WRONG) + ran("ctl", OK) + ran("wa", OK)
    assert find_smells(entry(), records) == []


def test_a_variant_equal_to_an_earlier_one_is_asked_about_but_two_baselines_are_not() -> None:
    e = entry(
        Variant("base", "baseline", "one way"),
        Variant("base2", "baseline", "another way"),
        Variant("de", "dead_end", "re-raises", fails_as=FailsAs("wrong_result", ("trained",))),
        Variant("ctl", "control", "sanity"),
    )
    records = ran("base", R) + ran("base2", R) + ran("de", R) + ran("ctl", OK)
    assert kinds(find_smells(e, records))[1:] == [("same-as-variant", "de", "base, base2")]


def test_two_variants_that_each_equal_the_control_are_no_pair_of_their_own() -> None:
    # two fixes that each end as the control does agree by construction: each is asked
    # about against the control, never the pair again
    e = entry(
        Variant("base", "baseline", "the error"),
        Variant("wa", "workaround", "one fix"),
        Variant("wa2", "workaround", "another fix"),
        Variant("ctl", "control", "sanity"),
    )
    like = [dataclasses.replace(r, variant="wa", kind="workaround") for r in ran("ctl", OK)]
    like2 = [dataclasses.replace(r, variant="wa2", kind="workaround") for r in ran("ctl", OK)]
    smells = kinds(find_smells(e, ran("base", R) + like + like2 + ran("ctl", OK)))
    pairs = [s for s in smells if s[0].startswith("same-as")]
    assert pairs == [("same-as-control", "wa", "ctl"), ("same-as-control", "wa2", "ctl")]
    # equal to each other but not to the control: the pair is still asked about
    other = {"trained": {"ok": True, "detail": "another run"}}
    twin = ran("wa", OK, checks=other) + [
        dataclasses.replace(r, variant="wa2") for r in ran("wa", OK, checks=other)
    ]
    smells = kinds(find_smells(e, ran("base", R) + twin + ran("ctl", OK)))
    assert [s for s in smells if s[0].startswith("same-as")] == [("same-as-variant", "wa2", "wa")]


def test_equal_only_where_both_were_unsupported_is_not_equal() -> None:
    records = ran("base", R) + ran("de", WRONG) + ran("ctl", OK) + ran("wa", OK)
    uns = [rec("wa2", E1, UNS), rec("ctl", E1, UNS)]
    e = entry(*entry().variants, Variant("wa2", "workaround", "needs cuda"))
    assert find_smells(e, records + uns) == []


def test_a_dead_end_without_a_declared_failure_is_asked_about() -> None:
    e = entry(Variant("base", "baseline", "b"), Variant("de", "dead_end", "d"))
    assert kinds(find_smells(e, [])) == [("no-declared-failure", "de", "")]
    unwritten = entry(
        Variant("base", "baseline", "b"), Variant("de", "dead_end", "d", written=False)
    )
    assert find_smells(unwritten, []) == []


def test_a_dead_end_documented_to_fail_otherwise_than_by_an_error_is_not_asked_for_one() -> None:
    # dtype-mismatch dead end 2 (precision), cudnn-rnn-backward-error dead end 1 (slower): a
    # signature would be a substitute error, which confirms nothing of those kinds
    for kind in ("slower", "precision", "more-memory", "security", "brittle", "wrong-result"):
        meaning = ClaimMeaning(kind=kind, unmeasured="no run reads it")
        e = entry(Variant("base", "baseline", "b"), Variant("de", "dead_end", "d", meaning=meaning))
        assert find_smells(e, []) == [], kind
    raises = ClaimMeaning(kind="raises")
    e = entry(Variant("base", "baseline", "b"), Variant("de", "dead_end", "d", meaning=raises))
    assert kinds(find_smells(e, [])) == [("no-declared-failure", "de", "")]


def test_a_workaround_counted_where_only_another_baseline_reproduced() -> None:
    e = entry(
        Variant("base", "baseline", "the cat case"),
        Variant("base2", "baseline", "the cnn case"),
        Variant("wa", "workaround", "fix for the cnn case"),
        Variant("ctl", "control", "sanity"),
    )
    records = ran("base", R) + ran("wa", OK, checks={"trained": {"ok": True, "detail": "w"}})
    records += [rec("base2", E1, R), rec("base2", E2, OTHER)] + ran("ctl", OK)
    records.append(rec("ctl", E1, WRONG, trial=2))  # "trained" can fail
    [smell] = find_smells(e, records)
    assert (smell.kind, smell.variant, smell.subject) == ("judged-elsewhere", "wa", "base2")
    assert "1 cells" in smell.detail and E2 in smell.detail
    # naming the baseline it answers settles it (the aggregate then judges it there only)
    answered = dataclasses.replace(e.variants[2], baselines=("base2",))
    e2 = dataclasses.replace(e, variants=(*e.variants[:2], answered, e.variants[3]))
    assert find_smells(e2, records) == []


def test_an_error_of_the_environment_counted_as_applicable() -> None:
    records = ran("base", R) + ran("wa", OK) + ran("de", WRONG) + ran("ctl", OK)
    records[4] = rec(
        "wa",
        E1,
        OTHER,
        exc_type="RuntimeError",
        message="Python 3.11+ not yet supported for torch.compile",
        frame="/e/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py:377 in check",
    )
    [smell] = find_smells(entry(), records)
    assert (smell.kind, smell.variant) == ("environment-error", "wa")
    assert "Python 3.11+ not yet supported" in smell.subject


def test_environment_cause_reads_missing_modules_pythons_and_foreign_frames() -> None:
    def cause(message: str, frame: str = "repro.py:3 in run", tb: str = "") -> str | None:
        return environment_cause(ExceptionInfo("E", message, frame, tb))

    assert "setuptools" in str(cause("backend='inductor' raised:\nNo module named 'setuptools'"))
    assert cause("No module named 'torch.amp'") is None  # torch's own: an API of a version
    assert cause("No module named 'lightning.fabric'") is None
    assert "numpy" in str(cause("boom", "/v/lib/python3.9/site-packages/numpy/core/x.py:3 in f"))
    assert cause("boom", "/v/lib/python3.9/site-packages/torch/nn/x.py:3 in f") is None
    assert cause("boom", "/usr/lib/python3.11/multiprocessing/reduction.py:60 in dump") is None
    assert cause("same-size tensors expected") is None
    assert environment_cause(None) is None


def test_explanations_are_read_from_the_entry_and_stale_ones_named() -> None:
    wa = Variant("wa", "workaround", "a fix", smells={"same-as-control": "reads the same norms"})
    ctl = Variant("ctl", "control", "sanity", smells={"same-as-variant": "never shown"})
    e = entry(Variant("base", "baseline", "b"), wa, ctl, smells={"never-fails": {"gone": "why"}})
    records = ran("base", R) + ran("ctl", OK)
    records += [dataclasses.replace(r, variant="wa", kind="workaround") for r in ran("ctl", OK)]
    smells = find_smells(e, records)
    assert [(s.kind, s.explained) for s in smells] == [
        ("never-fails", None),
        ("same-as-control", "reads the same norms"),
    ]
    assert stale_explanations(e, smells) == ["never-fails gone", "ctl: same-as-variant"]


def test_a_rewritten_variants_older_records_are_not_read() -> None:
    old = [dataclasses.replace(r, started_at="2026-11-30T00:00:00+00:00") for r in ran("ctl", OK)]
    copy = [dataclasses.replace(r, variant="wa", kind="workaround") for r in old]
    records = ran("base", R) + ran("de", WRONG) + old + copy
    assert kinds(find_smells(entry(), records)) == [("same-as-control", "wa", "ctl")]
    e = entry()
    wa = dataclasses.replace(e.variants[1], rewritten="2026-12-01")
    e = dataclasses.replace(e, variants=(e.variants[0], wa, *e.variants[2:]))
    assert find_smells(e, records) == []
