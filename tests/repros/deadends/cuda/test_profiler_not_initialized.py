"""deadends/cuda/profiler-not-initialized/cuda12-linux: every variant imports and reaches its
precondition without CUDA (the GPU box runs them)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/cuda/profiler-not-initialized/cuda12-linux"


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    m = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("the test interpreter has CUDA")
    for f in m.VARIANTS.values():
        with pytest.raises(m.Unsupported, match="needs a CUDA device"):
            f("cuda", "fp32")
        with pytest.raises(m.Unsupported, match="fp32 only"):
            f("cuda", "fp16")
