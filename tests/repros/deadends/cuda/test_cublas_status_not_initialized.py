"""deadends/cuda/cublas-status-not-initialized/cuda12-linux: every variant imports and stops at
its precondition on this CPU-only torch (before filling any device), and its postcondition
fails on a product that differs from the host's (shown with host operands)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/cuda/cublas-status-not-initialized/cuda12-linux"


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    repro = load(ENTRY)
    assert len(repro.VARIANTS) == 6
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="CUDA device"):
            variant("cuda", "fp32")
        with pytest.raises(repro.Unsupported, match="fp32 only"):
            variant("cuda", "fp16")


@pytest.mark.torch
def test_product_matches_host_fails_on_another_product() -> None:
    import torch

    repro = load(ENTRY)
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    out = torch.empty(4, 2)
    assert repro.product(a, b, a, b, out, "")["product_matches_host"]["ok"]
    assert not repro.product(a, b, a + 1, b, out, "")["product_matches_host"]["ok"]


@pytest.mark.torch
def test_only_out_of_memory_errors_end_the_fill() -> None:
    repro = load(ENTRY)
    assert repro._out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB"))
    assert not repro._out_of_memory(RuntimeError("CUDA error: an illegal memory access"))
