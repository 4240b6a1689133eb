"""harness/report/findings.py: the README's findings, written by `report` from the records
between markers, so that no figure there goes stale by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import findings
from harness.report.outputs import render_all
from harness.report.render.jsonout import read_compat
from harness.report.writeback import WritebackError
from tests.report.test_render import entry, records

README = """\
# project

Some prose a person wrote.

<!-- findings:begin -->
10,137 runs, written by hand and long stale.
<!-- findings:end -->

More prose.
"""


def test_the_block_is_written_from_the_records_and_stays_put(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    e = entry(tmp_path)
    first = render_all(records(), [e], tmp_path / "results", readme=readme)
    text = readme.read_text(encoding="utf-8")
    assert readme in first.documents_updated
    block = text.split(findings.BEGIN)[1].split(findings.END)[0]
    assert "10,137" not in block
    assert "13 runs" in block  # the records' count, none on CUDA
    assert (
        "| [pytorch/hostile](results/compat/pytorch__hostile.md) (single entry) | 1 | 1 |" in block
    )
    assert text.startswith("# project\n\nSome prose a person wrote.\n\n" + findings.BEGIN)
    assert text.endswith(findings.END + "\n\nMore prose.\n")
    # the same records: nothing to write, nothing stale
    again = render_all(records(), [e], tmp_path / "results", readme=readme, check=True)
    assert readme not in again.stale_documents and again.up_to_date
    # a figure edited by hand is stale until the report writes it back
    readme.write_text(text.replace("13 runs", "14 runs"), encoding="utf-8")
    stale = render_all(records(), [e], tmp_path / "results", readme=readme, check=True)
    assert readme in stale.stale_documents and not stale.up_to_date


def test_a_readme_without_markers_is_left_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no findings here\n", encoding="utf-8")
    summary = render_all(records(), [entry(tmp_path)], tmp_path / "results", readme=readme)
    assert readme.read_text(encoding="utf-8") == "# no findings here\n"
    assert readme not in summary.stale_documents


def test_unbalanced_markers_are_named() -> None:
    with pytest.raises(WritebackError, match="README.md:4: .*findings:end"):
        findings.fill_findings(
            "a\n" + findings.BEGIN + "\nb\n" + findings.BEGIN + "\n", "x", "README.md"
        )
    assert findings.fill_findings("plain\n", "x", "README.md") is None


def test_the_block_names_grades_advice_and_figures(tmp_path: Path) -> None:
    render_all(records(), [entry(tmp_path)], tmp_path / "results")
    compat = read_compat(tmp_path / "results")
    block = findings.render_findings(compat, ())
    # one row per entry outside the knowledge-base domains: its claims and its message
    [row] = [ln for ln in block.splitlines() if "pytorch/hostile" in ln]
    assert row.startswith(
        "| [pytorch/hostile](results/compat/pytorch__hostile.md) (single entry) | 1 | 1 | 0 |"
    )
    cells = row.split(" | ")
    assert cells[5] == "2"  # contradicted: the fix rate and workaround 1, 0/4 each
    assert cells[10] == "1" and cells[11] == "0 |"  # the message shown (verbatim), not invented
    assert "| Source | Entries | Measured |" in block
