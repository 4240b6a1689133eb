"""The closed set of outcome kinds of one run, and how they count."""

from __future__ import annotations

import enum

__all__ = ["Outcome", "NOT_COUNTED"]


class Outcome(str, enum.Enum):
    REPRODUCED = "reproduced"  # the documented signature was raised
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
