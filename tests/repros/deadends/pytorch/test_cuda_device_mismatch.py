"""deadends/pytorch/cuda-device-mismatch/pt2-linux: dead end 2 (.cuda() with no index, "wrong
GPU in multi-GPU setup") has no wrong GPU to take below two CUDA devices: it is unsupported
there, with the reason, never an ok that would read "the dead end works"."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/pytorch/cuda-device-mismatch/pt2-linux"


@pytest.mark.torch
@pytest.mark.parametrize("devices", [0, 1])
def test_dead_end_2_is_unsupported_below_two_cuda_devices(monkeypatch, devices: int) -> None:
    import torch

    repro = load(ENTRY)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    with pytest.raises(
        repro.Unsupported, match=f"needs two CUDA devices; this machine has {devices}"
    ):
        repro.VARIANTS["deadend2-cuda-without-index"]("cuda", "fp32")


@pytest.mark.torch
def test_dead_end_2_is_unsupported_on_this_torchs_own_count() -> None:
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("two CUDA devices here: the dead end runs")
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs two CUDA devices"):
        repro.VARIANTS["deadend2-cuda-without-index"]("cuda", "fp32")
