"""deadends/cuda/version-mismatch/cuda11.8-torch2.0: each postcondition shown able to fail on
the real torch of the test interpreter."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import load

ENTRY = "deadends/cuda/version-mismatch/cuda11.8-torch2.0"


@pytest.mark.torch
def test_build_cuda_matches_toolkit_fails_for_another_cuda() -> None:
    m = load(ENTRY)
    assert m.build_matches(cuda="11.7")["ok"] is False
    assert m.build_matches(cuda="11.8")["ok"] is True


@pytest.mark.torch
def test_computes_fails_on_a_wrong_product() -> None:
    m = load(ENTRY)
    assert m.computes()["ok"] is True
    assert m.computes(expected=41.0)["ok"] is False


@pytest.mark.torch
def test_other_releases_are_unsupported() -> None:
    m = load(ENTRY)
    import torch

    if torch.__version__.startswith(m.LINE + "."):
        pytest.skip("the test interpreter has the record's torch line")
    with pytest.raises(m.Unsupported, match="the record is about torch"):
        m.baseline_pypi_default_build("cpu", "fp32")
