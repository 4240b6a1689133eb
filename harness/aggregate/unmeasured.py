"""The document's claims no variant measures: each still gets its verdict row, "not
measured: why", with the reason its triage row gives (Entry.unmeasured). Every claim of a
document has a row; one with neither a variant nor a reason fails ``check``
(harness/catalogue/check.py, ``vanished_claim_problems``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.aggregate.model import METRIC, NOT_MEASURABLE, Verdict

if TYPE_CHECKING:
    from harness.spec.entries import Entry
    from harness.spec.triage import UnmeasuredClaim

__all__ = ["NOT_MEASURED", "is_unmeasured", "unmeasured_claims", "unmeasured_verdicts"]

NOT_MEASURED = "not measured: "  # how the row's why begins, before the triage's reason


def unmeasured_claims(entry: Entry) -> tuple[UnmeasuredClaim, ...]:
    """The claims the entry's triage says no run measures and no variant claims. A claim a
    variant measures in part keeps that variant's row: the triage's note says what is left."""
    claimed = {v.claim_ref for v in entry.variants if v.claim_ref}
    return tuple(u for u in entry.unmeasured if u.ref not in claimed)


def _metric(ref: str) -> str:
    return METRIC["dead_end" if ref.startswith("dead end") else "workaround"]


def unmeasured_verdicts(entry: Entry | None) -> tuple[Verdict, ...]:
    """One row per claim no variant measures: not measurable, and why."""
    if entry is None:
        return ()
    return tuple(
        Verdict(
            claim=f"{u.ref}: {_metric(u.ref)}",
            subject="",
            claimed="–",
            measured="–",
            verdict=NOT_MEASURABLE,
            why=NOT_MEASURED + u.why,
            advice=NOT_MEASURABLE,
            figure=NOT_MEASURABLE,
            words=NOT_MEASURABLE,
        )
        for u in unmeasured_claims(entry)
    )


def is_unmeasured(subject: str, why: str) -> bool:
    """Whether a verdict row (its subject and why, as a Verdict or compat.json holds them)
    is one of these: a claim no variant measures."""
    return not subject and why.startswith(NOT_MEASURED)
