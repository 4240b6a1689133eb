"""Each entry's bottom line: plain sentences made from its verdicts, read on the committed
records (the two seeds, a lightning entry whose error follows a lightning release, a CUDA
entry no GPU ran, a dead end that depends on the release) and on every entry for the words
a reader does not use."""

from __future__ import annotations

import re

import pytest

from harness.aggregate import EntryAggregate, aggregate_table
from harness.aggregate.bottomline import bottom_line, plain, where_it_occurs
from harness.spec.entries import Entry, load_entries
from harness.store.columnar import load_latest
from harness.store.jsonl import Store
from tests.paths import REPO, committed_records

GRAD_SCALE = "pytorch/grad-scale-unscale-error"
CLIPPING = "lightning/gradient-clipping-optimizer-handles-unscaling"
EPOCH_END = "lightning/training-epoch-end-removed"
CHECKPOINT = "deadends/pytorch/checkpoint-loading-error/pt2-linux"
CUDA_ONLY = "deadends/cuda/illegal-memory-access/cuda12-a100"
# the harness's own words, which a reader of the bottom line should never need
HARNESS_WORDS = re.compile(
    r"\b(?:verdicts?|scenarios?|baselines?|variants?|grades?|contradicted|inconclusive|"
    r"env_failed|not measurable)\b",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def aggs() -> dict[str, EntryAggregate]:
    entries = load_entries(REPO / "repros")
    table = load_latest(Store(committed_records()))
    return {a.id: a for a in aggregate_table(table, entries)}


@pytest.fixture(scope="module")
def known() -> dict[str, Entry]:
    return {e.id: e for e in load_entries(REPO / "repros")}


def test_the_aggregate_carries_its_bottom_line(aggs, known):
    for eid in (GRAD_SCALE, CLIPPING, CHECKPOINT):
        assert aggs[eid].bottom_line == bottom_line(known[eid], aggs[eid])
        assert 3 <= len(aggs[eid].bottom_line) <= 6


def test_the_gradscaler_seed_says_torch_has_no_such_error_and_what_happens(aggs):
    first, devices, works, avoid, *rest = aggs[GRAD_SCALE].bottom_line
    assert first.startswith("No run raised the documented message “RuntimeError: GradScaler")
    assert "GradScaler.unscale_() skips None gradients without a word" in first
    assert "“AssertionError: No inf checks were recorded for this optimizer.”" in first
    assert devices == "Measured on CPU, not on CUDA (no GPU machine ran it)."
    assert works.startswith("What works: Workaround 1, sensible reading")
    assert "Workaround 1 exactly as written" in avoid and "(it worked in none of the 57" in avoid
    assert rest == [
        "Not measured: dead end 1, which needs the error to occur first and it never did."
    ]


def test_the_lightning_seed_says_the_message_is_real_and_what_works(aggs):
    first, where, works, avoid = aggs[CLIPPING].bottom_line
    assert first.startswith(
        "The error is real: the code the document describes raised word for word"
    )
    assert "in 24 of the 50 setups tried" in first
    assert where.startswith("It occurs on every torch release tried (2.4.1–2.15.0, 12 releases)")
    assert "not on CUDA (no GPU machine ran it)" in where
    assert works.startswith("What works: Solution 1")
    assert avoid.startswith("Avoid: Solution 1 applied to the Trainer path")


def test_an_error_that_follows_a_lightning_release_names_it(aggs):
    where = where_it_occurs(aggs[EPOCH_END])
    # torch 1.10.2 paired only with lightning 1.x: the change is lightning's, not torch's
    assert "on lightning 2.0.9.post0–2.6.6 and not on 1.8.6–1.9.5" in where
    assert "it appears between lightning 1.9.5 and 2.0.9.post0" in where


def test_a_dead_end_that_depends_on_the_release_says_both_sides(aggs):
    avoid = next(s for s in aggs[CHECKPOINT].bottom_line if s.startswith("Avoid:"))
    assert "fails as documented in torch 2.6.0–2.15.0" in avoid
    assert "does not fail as documented in 1.10.2–2.5.1" in avoid


def test_an_error_no_gpu_ran_says_why_it_was_not_measured(aggs):
    first, *rest = aggs[CUDA_ONLY].bottom_line
    assert "was not measured: it needs a CUDA GPU, and no GPU machine has run it yet" in first
    assert any("which need the error to occur first and it never did" in s for s in rest)
    assert not any(s.startswith("What works") for s in rest)


def test_no_bottom_line_uses_the_harness_vocabulary(aggs):
    said = [(a.id, s) for a in aggs.values() for s in a.bottom_line]
    assert len({eid for eid, _ in said}) == len(aggs)
    offending = [(eid, s) for eid, s in said if HARNESS_WORDS.search(s)]
    assert not offending, offending[:3]


def test_plain_cuts_at_a_word():
    assert plain("a  b\n c") == "a b c"
    cut = plain("word " * 40, limit=22)
    assert cut == "word word word word…"


def test_fixes_measured_only_on_a_stand_in_say_so(aggs):
    """A CPU twin never speaks for a CUDA claim: what worked where only a stand-in for the
    CUDA error ran is said to be the stand-in's."""
    lines = aggs["deadends/cuda/device-side-assert/cuda12-a100"].bottom_line
    works = next(s for s in lines if s.startswith("What works"))
    assert works.startswith("What works, on the stand-in runs only (the error itself was never")
    # an entry whose error itself was raised says nothing of stand-ins
    assert not any("stand-in" in s for s in aggs[CHECKPOINT].bottom_line)
