"""harness/outcomes.py: a recorded exception read against a signature by name, and the grade
of a message that holds only the first sentence of a longer documented message."""

from __future__ import annotations

import pytest

from harness.outcomes import Grade, grade, signature_named, whole_message

SEED = "RuntimeError: GradScaler unscale_() encountered None gradient. Ensure loss.backward() and optimizer.step() are called correctly."
FIRST = r"GradScaler unscale_\(\) encountered None gradient"


@pytest.mark.parametrize(
    ("exc_type", "sig_type", "named"),
    [
        ("RuntimeError", "RuntimeError", True),
        ("torch.onnx.errors.UnsupportedOperatorError", "UnsupportedOperatorError", True),
        ("ValueError", "RuntimeError", False),
        # Exception names every recorded type, as the child's match on the class's bases does
        ("torch.jit.frontend.UnsupportedNodeError", "Exception", True),
        ("RuntimeError", "BaseException", True),
    ],
)
def test_a_recorded_exception_is_read_against_a_signature_by_name(
    exc_type: str, sig_type: str, named: bool
) -> None:
    assert signature_named(exc_type, "boom here", sig_type, "boom") is named
    assert not signature_named(exc_type, "other words", sig_type, "boom")


def test_whole_message_drops_the_type_and_is_empty_where_the_signature_reads_it_all() -> None:
    whole = whole_message(SEED, "RuntimeError", FIRST)
    assert whole.startswith("GradScaler") and "Ensure" in whole
    assert whole_message("RuntimeError: boom", "RuntimeError", "boom") == ""
    assert whole_message("", "RuntimeError", FIRST) == ""


@pytest.mark.parametrize(
    ("outcome", "message", "expected"),
    [
        # torch says the whole documented message: verbatim
        ("reproduced", SEED.split(": ", 1)[1], Grade.VERBATIM),
        ("other_error", SEED.split(": ", 1)[1], Grade.VERBATIM),
        # the first sentence alone, the rest in torch's own words: reworded, not verbatim
        (
            "reproduced",
            "GradScaler unscale_() encountered None gradient. See the docs.",
            Grade.REWORDED,
        ),
        ("other_error", "GradScaler unscale_() encountered None gradient", Grade.REWORDED),
        # the whole message with what torch formats in: variable-parts
        (
            "reproduced",
            "GradScaler unscale_() encountered None gradient ('fc.weight'). Ensure "
            "loss.backward() and optimizer.step() are called correctly.",
            Grade.VARIABLE_PARTS,
        ),
        # a record that kept no message stays as the child classified it
        ("reproduced", "", Grade.VERBATIM),
    ],
)
def test_verbatim_only_where_torch_says_the_whole_documented_message(
    outcome: str, message: str, expected: Grade
) -> None:
    whole = whole_message(SEED, "RuntimeError", FIRST)
    assert grade(outcome, "RuntimeError", message, "RuntimeError", FIRST, whole=whole) is expected
    # without the whole message the first sentence is all the signature asks for
    assert grade(outcome, "RuntimeError", message, "RuntimeError", FIRST) is Grade.VERBATIM


def test_a_placeholder_the_document_kept_from_the_source_is_a_variable_part():
    documented = (
        "NotImplementedError: Support for `training_epoch_end` has been removed in v2.0.0. "
        "`{type(model).__name__}` implements this method."
    )
    whole = whole_message(documented, "NotImplementedError", "Support for `training_epoch_end`")
    said = (
        "Support for `training_epoch_end` has been removed in v2.0.0. `OldHook` implements "
        "this method."
    )
    graded = grade(
        "reproduced", "NotImplementedError", said, "NotImplementedError", "Support for", whole=whole
    )
    assert graded is Grade.VARIABLE_PARTS
    # the first sentence alone, the rest in other words: reworded
    other = "Support for `training_epoch_end` has been removed in v2.0.0. Use another hook."
    assert (
        grade(
            "reproduced",
            "NotImplementedError",
            other,
            "NotImplementedError",
            "Support for",
            whole=whole,
        )
        is Grade.REWORDED
    )
