"""The closed set of outcome kinds of one run, and how they count."""

from __future__ import annotations

import enum
import re

__all__ = ["Outcome", "NOT_COUNTED", "signature_named"]


class Outcome(str, enum.Enum):
    REPRODUCED = "reproduced"  # the entry's documented signature was raised
    # the variant's own expected error (its ``signature`` in entry.yaml: an error the
    # document lists as related, or the failure a dead end is expected to end in) was
    # raised; kept apart from ``reproduced``, never counted as the documented error
    RELATED = "related"
    OK = "ok"  # ran to the end and every postcondition held
    OTHER_ERROR = "other_error"  # a different exception (type, message, frame kept)
    WRONG_RESULT = "wrong_result"  # ran, but a postcondition failed
    UNSUPPORTED = "unsupported"  # the API/capability the variant needs is missing here
    SKIPPED = "skipped"  # a cell axis not available here (e.g. no CUDA)
    CRASHED = "crashed"  # signal, non-zero exit without a Python exception, or out of memory
    TIMEOUT = "timeout"  # ran past the wall-clock limit; its process group was killed
    ENV_FAILED = "env_failed"  # the environment could not be built or does not import

    def __str__(self) -> str:
        return self.value


# Never a success nor a failure: they say the cell could not be measured, and why.
NOT_COUNTED = frozenset({Outcome.UNSUPPORTED, Outcome.SKIPPED, Outcome.ENV_FAILED})


def signature_named(exc_type: str, exc_message: str, sig_type: str, sig_message: str) -> bool:
    """Whether a recorded exception (its qualified type name and message) matches a
    signature, judged on the host from names alone. The child matches on the live class
    (harness/inenv/child.py, ``signature_matches``), bases included; the host sees only the
    recorded name, so a base-class match cannot be told here. Used only to re-read
    records written before "related" existed (schema 2)."""
    named = exc_type == sig_type or exc_type.rsplit(".", 1)[-1] == sig_type.rsplit(".", 1)[-1]
    return named and re.search(sig_message, exc_message, re.DOTALL) is not None
