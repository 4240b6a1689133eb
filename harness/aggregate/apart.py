"""Runs that measured the harness rather than the variant, set apart: listed as not counted,
with why (cells.py's ``apart`` table; smells.py reads them the same way).

Torch's fork guard: a job forked from the environment's warm worker (isolation ``fork``)
after CUDA was initialised there raises "Cannot re-initialize CUDA in forked subprocess" at
the variant's first CUDA call, whatever the variant does. The variant itself forked nothing;
in a fresh interpreter (isolation ``process``), or in a user's script, that call answers as
it does in every other release ("Found no NVIDIA driver" on a machine without a GPU). Where
the entry documents the fork guard's error itself (multiprocessing-cuda-error), its runs are
what it measures, and stay counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.outcomes import SHOWS, Outcome

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = ["FORK_REFUSAL", "FORK_WHY", "documents_fork_refusal", "refused_in_the_harness_fork"]

FORK_REFUSAL = "Cannot re-initialize CUDA in forked subprocess"
FORK_WHY = (
    "the harness's fork: torch refused CUDA in the job's process, forked from the "
    "environment's warm worker after CUDA was initialised there (isolation fork); not the "
    "variant's doing"
)


def documents_fork_refusal(entry: Entry) -> bool:
    """Whether the entry's documented error is torch's fork guard itself."""
    return entry.grade(Outcome.OTHER_ERROR.value, "RuntimeError", FORK_REFUSAL) in SHOWS


def refused_in_the_harness_fork(entry: Entry, isolation: str, exc_message: str) -> str | None:
    """Why a run is set apart as the harness fork's, or None (the reference rule; cells.py
    says it in SQL)."""
    if isolation == "fork" and FORK_REFUSAL in exc_message and not documents_fork_refusal(entry):
        return FORK_WHY
    return None
