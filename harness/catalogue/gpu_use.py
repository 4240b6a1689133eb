"""What a CUDA variant does to the card, read statically: `check` refuses a variant that fills
or measures the card and shares it.

A variant that fills the card or sizes its work from the free memory, caps the process to a
share of it, measures memory, or times kernels measures something the other CUDA jobs on the
device change (their memory, their kernels): it must run alone on it, ``gpu: exclusive`` in
entry.yaml (harness/execute/scheduler.py). The calls it reaches (its function and what that
calls in repro.py and reprokit.py, followed as `export` follows them) are matched by name:
reprokit's ``on_capped_card`` and torch's memory and timing calls below. A cap alone
(``set_per_process_memory_fraction``) binds only its own process and is not among them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from harness.catalogue.export import reached
from harness.spec.entries import Entry, Variant

__all__ = ["CARD_CALLS", "CardUse", "card_uses", "gpu_use_problems"]

# a call reached -> what it does to the card; a tuple of names: all of them reached
CARD_CALLS: dict[tuple[str, ...], str] = {
    (
        "on_capped_card",
    ): "sizes a card from an uncapped step's peak memory and caps the process to it",
    ("mem_get_info",): "reads the device's free memory",
    ("max_memory_allocated",): "measures the peak memory",
    ("max_memory_reserved",): "measures the peak memory",
    ("memory_reserved",): "measures the allocator's memory",
    ("reset_peak_memory_stats",): "measures the peak memory",
    ("elapsed_time",): "times kernels (CUDA events)",
    ("perf_counter", "synchronize"): "times kernels (the device synchronised around a clock)",
}


@dataclass(frozen=True)
class CardUse:
    """One thing the variant's code does to the card, and the line of repro.py or reprokit.py
    where it is called."""

    what: str
    calls: tuple[str, ...]
    where: str  # path:line


def _names(statements: list[ast.stmt]) -> dict[str, int]:
    """Every name and attribute the statements refer to -> the first line it is on."""
    found: dict[str, int] = {}
    for statement in statements:
        for node in ast.walk(statement):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else None
            )
            if name is not None and name not in found:
                found[name] = getattr(node, "lineno", statement.lineno)
    return found


def card_uses(entry: Entry, variant: Variant, kit_path: Path) -> list[CardUse]:
    """What ``variant`` does to the card, from the calls its code reaches (none for a
    variant that never runs on cuda or is not written)."""
    if "cuda" not in variant.devices or not variant.written:
        return []
    in_repro, in_kit = reached(entry, variant.name, kit_path)
    repro_names, kit_names = _names(in_repro), _names(in_kit)
    uses: list[CardUse] = []
    for calls, what in CARD_CALLS.items():
        if any(u.what == what for u in uses):
            continue
        if all(c in repro_names or c in kit_names for c in calls):
            first = calls[0]
            where = (
                f"{entry.repro}:{repro_names[first]}"
                if first in repro_names
                else f"{kit_path}:{kit_names[first]}"
            )
            uses.append(CardUse(what, calls, where))
    return uses


def gpu_use_problems(entry: Entry, yaml_path: Path, kit_path: Path) -> list[str]:
    """A CUDA variant that fills or measures the card and shares it (no ``gpu: exclusive``)."""
    problems = []
    for v in entry.variants:
        if v.gpu == "exclusive":
            continue
        uses = card_uses(entry, v, kit_path)
        if uses:
            said = "; ".join(f"{u.what} ({' and '.join(u.calls)}, {u.where})" for u in uses)
            problems.append(
                f"{yaml_path}:{v.line}: variant {v.name!r} runs on cuda and {said}, but shares "
                "the GPU with the other CUDA jobs: their memory and kernels change what it "
                "measures. Declare gpu: exclusive (on the variant, or the entry)"
            )
    return problems
