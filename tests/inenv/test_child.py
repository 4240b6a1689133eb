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
