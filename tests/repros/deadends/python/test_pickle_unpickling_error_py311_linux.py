"""deadends/python/pickle-unpickling-error/py311-linux: its postcondition shown able to fail,
on the test interpreter's real torch."""

from __future__ import annotations

import pytest

from tests.inenv.test_postconditions import failed, load

ENTRY = "deadends/python/pickle-unpickling-error/py311-linux"


@pytest.mark.torch
def test_tensors_restored_fails_on_other_values() -> None:
    m = load(ENTRY)
    import torch

    # a reader that returns the saved names with other values, then one that drops a tensor
    def shifted(path):
        return {k: v + 1 for k, v in torch.load(path).items()}

    def partial(path):
        got = torch.load(path)
        got.pop(sorted(got)[0])
        return got

    for read in (shifted, partial):
        assert failed(m.loaded(read, write=torch.save, name="model.pt")) == {"tensors_restored"}
    assert failed(m.loaded(torch.load, write=torch.save, name="model.pt")) == set()


@pytest.mark.torch
def test_the_file_starts_with_the_documented_key() -> None:
    m = load(ENTRY)
    import pickle

    with pytest.raises(pickle.UnpicklingError, match=r"invalid load key, '\\x00'"):
        m.baseline_pickle_load("cpu", "fp32")
