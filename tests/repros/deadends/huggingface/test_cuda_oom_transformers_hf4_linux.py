"""deadends/huggingface/cuda-oom-transformers/hf4-linux: the training step's postconditions
shown able to fail, on the test interpreter's real torch and transformers, on the CPU (the
cap that makes the card needs CUDA; the step itself runs on any device)."""

from __future__ import annotations

import pytest
import torch

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/huggingface/cuda-oom-transformers/hf4-linux"
SMALL = {"batch": 2, "seq": 16, "layers": 1, "width": 32, "heads": 2}
pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def entry():
    pytest.importorskip("transformers", reason="needs transformers in the test interpreter")
    return load(ENTRY)


@pytest.mark.torch
def test_the_fp32_step_trains() -> None:
    m = entry()
    # the batch here is not the reproducer's: only samples_per_step says so
    assert failed(m.train_step("cpu", **SMALL)) == {"samples_per_step"}
    checks = m.train_step("cpu", checkpointing=True, **SMALL)
    assert failed(checks) == {"samples_per_step"} and checks["checkpointing_on"]["ok"]


@pytest.mark.torch
def test_float16_weights_fail_params_finite_and_bfloat16_fail_params_trained() -> None:
    m = entry()
    # Adam's eps (1e-8) is 0 in float16: a weight with no gradient becomes 0/0
    half = m.train_step("cpu", dtype=torch.float16, **SMALL)
    assert {"params_finite", "params_trained"} <= failed(half)
    assert half["ran_in_half"]["ok"]
    # an update of lr=1e-3 to a LayerNorm weight of 1.0 is below bfloat16's step there
    bf16 = m.train_step("cpu", dtype=torch.bfloat16, **SMALL)
    assert "params_trained" in failed(bf16) and "params_finite" not in failed(bf16)
    assert "transformer.h.0.ln_1.weight" in bf16["params_trained"]["detail"]


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    m = entry()
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for name, function in m.VARIANTS.items():
        precision = {"workaround1-half": "fp16", "workaround1-bfloat16": "bf16"}.get(name, "fp32")
        with pytest.raises(m.Unsupported, match="CUDA"):
            function("cuda", precision)
