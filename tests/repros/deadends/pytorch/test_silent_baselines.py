"""Baselines whose documented situation raises nothing in torch (entry.yaml: a baseline's
``fails_as`` with ``instead``): each such baseline really fails the postconditions it names
(the NaN loss of deadends/pytorch/loss-nan/pt2-linux, the unregistered layer, the doubled
step...), and a workaround that answers that baseline, or else its entry's control, holds
them: the postconditions can fail and can hold."""

from __future__ import annotations

import pytest

from harness.spec.entries import Entry, load_entries
from tests.inenv.test_postconditions import failed, load
from tests.paths import REPO


def silent_baselines() -> list[tuple[Entry, str]]:
    entries = load_entries(REPO / "repros")
    return [
        (e, v.name)
        for e in entries
        for v in e.variants
        if v.kind == "baseline" and v.fails_as is not None
    ]


SILENT = silent_baselines()


def test_the_silent_baselines_are_those_declared() -> None:
    ids = {(e.id, name) for e, name in SILENT}
    assert ("deadends/pytorch/loss-nan/pt2-linux", "baseline-lr-too-high") in ids
    assert ("deadends/pytorch/loss-nan/pt2-linux", "baseline-nan-in-data") in ids
    for e, name in SILENT:
        fails_as = e.variant(name).fails_as
        assert fails_as is not None and fails_as.instead, (e.id, name)


@pytest.mark.torch
@pytest.mark.parametrize(("entry", "baseline"), SILENT, ids=[f"{e.id}::{n}" for e, n in SILENT])
def test_a_silent_baseline_fails_its_postconditions_and_a_fixed_variant_holds_them(
    entry: Entry, baseline: str
) -> None:
    fails_as = entry.variant(baseline).fails_as
    assert fails_as is not None
    named = set(fails_as.postconditions)
    device, precision = "cpu", entry.variant(baseline).precisions[0]
    repro = load(entry.id)
    checks = repro.VARIANTS[baseline](device, precision)
    assert named & failed(checks), checks
    # a workaround that answers this baseline (its fault, fixed), else the control
    others = [
        v.name for v in entry.variants if v.kind == "workaround" and baseline in v.baselines
    ] + [v.name for v in entry.variants if v.kind == "control"]
    # not every workaround works (that is what the runs measure): one variant holding them
    # shows they can hold
    for other in others:
        try:
            held = repro.VARIANTS[other](device, precision)
        except Exception:  # noqa: BLE001 - a workaround that raises holds nothing
            continue
        if named <= set(held) and not named & failed(held):
            return
    pytest.fail(f"no workaround of {baseline} nor control holds {sorted(named)}")
