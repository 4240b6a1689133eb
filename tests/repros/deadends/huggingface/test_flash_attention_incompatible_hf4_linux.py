"""deadends/huggingface/flash-attention-incompatible/hf4-linux: its postconditions shown able
to fail, on the test interpreter's real torch and transformers."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/huggingface/flash-attention-incompatible/hf4-linux"


@pytest.mark.torch
def test_logits_match_eager_fails_on_other_weights() -> None:
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    m = load(ENTRY)

    def perturb(model):
        model.lm_head.weight.data.add_(1.0)

    assert failed(m.compared("fp32", "sdpa", force=perturb)) == {"logits_match_eager"}
    assert failed(m.compared("fp32", "sdpa")) == set()


@pytest.mark.torch
def test_attention_as_asked_fails_when_another_is_used() -> None:
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    m = load(ENTRY)

    def to_eager(model):
        model.config._attn_implementation_internal = "eager"

    assert failed(m.compared("fp32", "sdpa", force=to_eager)) == {"attention_as_asked"}
