"""entry.yaml's ``smells`` (why a smell the records show is not a defect), ``baselines``
(the baselines whose reproducing cells judge a workaround) and ``needs`` (what a variant
needs beyond its cell): loaded, and refused with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec.entries import EntryError, load_entry
from tests.spec.test_entries import F, make

TEXT = """\
id: demo/err
signature: {type: RuntimeError, message: "boom"}
smells:
  never-fails:
    finite: "fails in tests/x.py, where the loss is inf"
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - {name: other, kind: baseline, description: "raises too"}
  - name: fix
    kind: workaround
    description: "works"
    baselines: [other]
    needs: [torch.compile]
    rewritten: "2026-12-01"
    smells: {same-as-control: "the control is the fixed model itself"}
  - {name: control, kind: control, description: "works"}
"""
REPRO = F + 'VARIANTS = {"baseline": f, "other": f, "fix": f, "control": f}\n'


def test_smells_and_baselines_load(tmp_path: Path) -> None:
    e = load_entry(make(tmp_path, TEXT, repro=REPRO), tmp_path)
    assert e.smells == {"never-fails": {"finite": "fails in tests/x.py, where the loss is inf"}}
    fix = e.variant("fix")
    assert fix.baselines == ("other",) and fix.needs == ("torch.compile",)
    assert fix.rewritten == "2026-12-01" and e.variant("control").rewritten is None
    assert fix.smells == {"same-as-control": "the control is the fixed model itself"}
    assert e.variant("control").smells == {} and e.variant("control").baselines == ()


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("baselines: [other]", "baselines: [nobody]", 9, "'nobody', not a baseline"),
        ("baselines: [other]", "baselines: other", 12, "non-empty list"),
        ("baselines: [other]", "baselines: [other, other]", 12, "twice"),
        (
            '{name: control, kind: control, description: "works"}',
            '{name: control, kind: control, description: "works", baselines: [other]}',
            16,
            "a control is judged in every cell",
        ),
        (
            "needs: [torch.compile]",
            "needs: [flash-attention]",
            13,
            "unknown need 'flash-attention'",
        ),
        ("needs: [torch.compile]", "needs: []", 13, "non-empty list"),
        ('rewritten: "2026-12-01"', "rewritten: yesterday", 14, "ISO date"),
        ('rewritten: "2026-12-01"', 'rewritten: "2026-12-01T10:00:00+02:00"', 14, "UTC time"),
        ("same-as-control:", "smelly:", 15, "unknown smell 'smelly' on a variant"),
        ("same-as-control:", "never-fails:", 15, "unknown smell 'never-fails' on a variant"),
        ('"the control is the fixed model itself"', '""', 15, "must be one line"),
        ("  never-fails:\n", "  same-as-control:\n", 4, "at the entry's top level"),
        ('    finite: "fails in tests/x.py, where the loss is inf"\n', "", 4, "{kind: {subject"),
    ],
)
def test_malformed_smells_and_baselines_are_named(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in TEXT
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, TEXT.replace(old, new), repro=REPRO), tmp_path)
    assert info.value.line == line and message in info.value.problem, str(info.value)


def test_retired_variants_load_and_a_declared_name_is_refused(tmp_path: Path) -> None:
    text = TEXT + 'retired:\n  fix-old: "renamed to fix"\n'
    assert load_entry(make(tmp_path, text, repro=REPRO), tmp_path).retired == {
        "fix-old": "renamed to fix"
    }
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text.replace("fix-old:", "fix:"), repro=REPRO), tmp_path)
    assert "still a variant" in info.value.problem
