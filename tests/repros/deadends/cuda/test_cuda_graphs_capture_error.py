"""deadends/cuda/cuda-graphs-capture-error/cuda12-a100: every variant imports and stops at its
precondition on this CPU-only torch (Unsupported, before any CUDA call), and its postcondition
fails on outputs that differ from the eager ones. The GPU box measures the rest."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/cuda/cuda-graphs-capture-error/cuda12-a100"


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    repro = load(ENTRY)
    assert len(repro.VARIANTS) == 6
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="CUDA"):
            variant("cuda", "fp32")
        with pytest.raises(repro.Unsupported, match="fp32 only"):
            variant("cuda", "bf16")


@pytest.mark.torch
def test_output_matches_eager_fails_on_another_output() -> None:
    import torch

    repro = load(ENTRY)
    want = [torch.ones(2, 4), torch.zeros(2, 4)]
    assert repro.matches_eager([w.clone() for w in want], want)["ok"]
    assert not repro.matches_eager([torch.ones(2, 4), torch.ones(2, 4)], want)["ok"]
    assert not repro.matches_eager(want[:1], want)["ok"]
    assert not repro.matches_eager([], [])["ok"]


@pytest.mark.torch
def test_normalised_reads_the_largest_value() -> None:
    import torch

    repro = load(ENTRY)
    assert torch.equal(repro.normalised(torch.tensor([-4.0, 2.0])), torch.tensor([-1.0, 0.5]))
