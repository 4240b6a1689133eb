"""deadends/huggingface/generate-oom/hf-transformers-linux: generation's postconditions shown
able to fail, on the test interpreter's real torch and transformers, on the CPU (the cap
that makes the card needs CUDA; generation itself runs on any device)."""

from __future__ import annotations

import pytest
import torch

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/huggingface/generate-oom/hf-transformers-linux"
SMALL = {"batch": 2, "layers": 1, "width": 32, "heads": 2}
pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def entry():
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    return load(ENTRY)


def cut_short(model, ids, mask):
    """A stopping criterion that ends generation after its first token (max_time)."""
    model.generation_config.max_time = 1e-9


@pytest.mark.torch
def test_every_token_generated_and_streamed() -> None:
    m = entry()
    streamer = m.Counted()
    checks = m.generate("cpu", 8, streamer=streamer, **SMALL)
    assert failed(checks) == set()
    assert streamer.steps == 9 and streamer.ended


@pytest.mark.torch
def test_a_run_cut_short_fails_generated_all_tokens_and_streamed_every_token() -> None:
    m = entry()
    checks = m.generate("cpu", 32, streamer=m.Counted(), before=cut_short, **SMALL)
    assert failed(checks) == {"generated_all_tokens", "streamed_every_token"}


@pytest.mark.torch
def test_ran_in_half_names_the_dtype() -> None:
    m = entry()
    checks = m.generate("cpu", 4, dtype=torch.bfloat16, **SMALL)
    assert failed(checks) == set() and "bfloat16" in checks["ran_in_half"]["detail"]


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    m = entry()
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for name, function in m.VARIANTS.items():
        precision = {"workaround1-float16": "fp16", "workaround1-bfloat16": "bf16"}.get(
            name, "fp32"
        )
        with pytest.raises(m.Unsupported, match="CUDA"):
            function("cuda", precision)
