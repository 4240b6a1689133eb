"""deadends/cuda/cuda-initialization-error/cuda12-a100: every variant imports and stops at its
precondition on this CPU-only torch; the fork machinery (a child's result and its exception
sent back and raised as it was) and the postcondition are shown on host tensors."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/cuda/cuda-initialization-error/cuda12-a100"


@pytest.mark.torch
def test_every_variant_is_unsupported_without_cuda() -> None:
    repro = load(ENTRY)
    assert len(repro.VARIANTS) == 4
    for variant in repro.VARIANTS.values():
        with pytest.raises(repro.Unsupported, match="no CUDA device"):
            variant("cuda", "fp32")


@pytest.mark.torch
def test_a_forked_child_returns_its_result_and_raises_its_error() -> None:
    import torch

    repro = load(ENTRY)
    host = torch.tensor(repro.VALUES)
    assert repro.in_forked_child(host.tolist) == repro.VALUES
    with pytest.raises(RuntimeError, match="initialization error"):
        repro.in_forked_child(
            lambda: (_ for _ in ()).throw(RuntimeError("CUDA error: initialization error"))
        )
    with pytest.raises(RuntimeError, match="^DocumentedError: x$"):
        repro.raise_as_child_did("DocumentedError", "x")


@pytest.mark.torch
def test_child_read_the_tensor_fails_on_other_values() -> None:
    repro = load(ENTRY)
    assert repro.read_back(list(repro.VALUES), "c")["child_read_the_tensor"]["ok"]
    assert not repro.read_back([0.0] * 4, "c")["child_read_the_tensor"]["ok"]
    assert not repro.read_back(None, "c")["child_read_the_tensor"]["ok"]
