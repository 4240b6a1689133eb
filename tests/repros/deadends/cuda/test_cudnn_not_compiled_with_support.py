"""deadends/cuda/cudnn-not-compiled-with-support/cuda12-linux: a CUDA-only entry; its
convolution runs on the CPU here in every layout, each postcondition shown able to fail, and
every variant's precondition exercised (Unsupported without CUDA)."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/cuda/cudnn-not-compiled-with-support/cuda12-linux"

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("layout", ["strided", "channels_last", "contiguous"])
def test_the_convolution_runs_on_the_cpu(layout):
    repro = load(ENTRY)
    x = repro.make_input("cpu", layout)
    assert x.is_contiguous() == (layout == "contiguous")
    assert failed(repro.conv("cpu", "fp32", x)) == set()
    assert failed(repro.conv("cpu", "fp32", x, benchmark=True, make_contiguous=True)) == set()


def test_the_large_batch_is_past_a_grid_dimension():
    repro = load(ENTRY)
    assert repro.BIG_BATCH > 65535
    x = repro.make_input("cpu", "contiguous", batch=4, size=8)
    assert tuple(x.shape) == (4, repro.CHANNELS, 8, 8)


def test_both_postconditions_fail_on_a_nan_input():
    repro = load(ENTRY)
    x = repro.make_input("cpu", "strided") * float("nan")
    assert failed(repro.conv("cpu", "fp32", x)) == {"output_matches_reference", "grads_finite"}


@pytest.mark.parametrize("name", sorted(load(ENTRY).VARIANTS))
def test_every_variant_is_unsupported_on_the_cpu(name):
    repro = load(ENTRY)
    with pytest.raises(repro.Unsupported, match="needs a CUDA device"):
        repro.VARIANTS[name]("cpu", "fp32")
