"""harness/inenv/child.py's classify(): which exception is the reproducer's "unsupported"."""

from __future__ import annotations

from harness.inenv.child import classify

SIGNATURE = {"type": "RuntimeError", "message": "documented"}


def _exc(module: str, base: type[BaseException] = Exception) -> BaseException:
    cls = type("Unsupported", (base,), {"__module__": module})
    return cls("Data-dependent branching")


def test_the_reproducers_unsupported_is_unsupported() -> None:
    for module in ("reprokit", "repro_under_test", "__main__"):
        result = classify(_exc(module), {}, SIGNATURE)
        assert result["outcome"] == "unsupported", module
        assert result["reason"] == "Data-dependent branching"


def test_torchs_own_unsupported_is_a_measured_error() -> None:
    # torch._dynamo.exc.Unsupported: torch.compile could not trace the model
    for module in ("torch._dynamo.exc", "lightning.fabric.x", "pytorch_lightning.y"):
        result = classify(_exc(module, RuntimeError), {}, SIGNATURE)
        assert result["outcome"] == "other_error", module
        assert result["exception"]["type"] == module + ".Unsupported"


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no str")

    def __repr__(self) -> str:
        raise ValueError("no repr")


def test_an_exception_whose_str_and_repr_raise_is_other_error_with_its_type() -> None:
    """classify() raised with the exception (issue 25, item 10): the job was crashed."""
    try:
        raise Unprintable()
    except Unprintable as exc:
        result = classify(exc, {}, SIGNATURE)
    assert result["outcome"] == "other_error"
    assert result["exception"]["type"] == "tests.inenv.test_child.Unprintable"
    assert "unprintable message" in result["exception"]["message"]
    assert "test_child.py" in result["exception"]["frame"]
    # an Unsupported whose message cannot be read is still unsupported, with a reason
    cls = type("Unsupported", (Unprintable,), {"__module__": "reprokit"})
    assert classify(cls(), {}, SIGNATURE)["outcome"] == "unsupported"


def test_the_cuda_start_is_timed_when_the_variant_first_starts_cuda() -> None:
    """The child starts nothing: it wraps torch.cuda._lazy_init, which every path to a CUDA
    context calls, and times its first call (here a CPU build's, which refuses)."""
    import pytest

    torch = pytest.importorskip("torch")
    from harness.inenv.child import _time_cuda_start

    original = torch.cuda._lazy_init
    took = _time_cuda_start()
    assert took == [] and torch.cuda._lazy_init is not original  # nothing started yet
    try:
        torch.cuda.init()
    except (AssertionError, RuntimeError):  # "Torch not compiled with CUDA enabled"
        if torch.version.cuda is not None:
            raise
    assert len(took) == 1 and 0 <= took[0] < 60
    assert torch.cuda._lazy_init is original  # put back after the first call
