"""deadends/cuda/nvrtc-compilation-error: its one postcondition (the launched kernel's
output) made to fail on real tensors, and every variant (all CUDA-only) reaching its
precondition on a machine without CUDA, so the GPU window is not spent on a typo."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/nvrtc-compilation-error/*"


@pytest.mark.torch
def test_kernel_output_fails_when_out_is_not_a_plus_one() -> None:
    m = load(ENTRY)
    import torch

    a = torch.arange(m.N, dtype=torch.float32)
    assert failed(m.output_check(a, a + 1)) == set()
    assert failed(m.output_check(a, a.clone())) == {"kernel_output"}  # the kernel never ran
    wrong = a + 1
    wrong[-1] = 0.0
    assert failed(m.output_check(a, wrong)) == {"kernel_output"}


@pytest.mark.torch
def test_every_variant_reaches_its_precondition_without_cuda() -> None:
    m = load(ENTRY)
    import torch

    if torch.cuda.is_available():
        pytest.skip("the precondition under test is the absence of CUDA")
    for fn in m.VARIANTS.values():
        with pytest.raises(m.Unsupported, match="no CUDA device"):
            fn("cuda", "fp32")
        with pytest.raises(m.Unsupported, match="fp32 only"):
            fn("cuda", "bf16")


@pytest.mark.torch
def test_the_sources_differ_only_where_meant() -> None:
    m = load(ENTRY)
    assert m.ADD_ONE_BROKEN != m.ADD_ONE and "one;" in m.ADD_ONE_BROKEN
    assert m.JIT_ADD_ONE_BROKEN.replace("one;", "T(1);") == m.JIT_ADD_ONE
