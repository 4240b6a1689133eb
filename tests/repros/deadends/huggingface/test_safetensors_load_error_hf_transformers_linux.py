"""deadends/huggingface/safetensors-load-error/hf-transformers-linux: its postcondition shown
able to fail, on the test interpreter's real torch and transformers."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/huggingface/safetensors-load-error/hf-transformers-linux"


@pytest.mark.torch
def test_weights_restored_fails_on_another_model() -> None:
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    m = load(ENTRY)
    import torch

    # the cache replaced by another initialisation of the same architecture: it loads, wrong
    def other_model(hub, cache):
        config_class, model_class = m.transformers_gpt2()
        torch.manual_seed(1)
        model_class(config_class.from_pretrained(hub)).save_pretrained(cache)

    assert failed(m.saved("fp32", fix=other_model)) == {"weights_restored"}
    assert failed(m.saved("fp32")) == set()
