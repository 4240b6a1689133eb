"""Write-back: only the marked blocks change, every other byte stays, reruns change nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.aggregate import aggregate_entry
from harness.outcomes import Outcome
from harness.report.outputs import render_all
from harness.report.writeback import WritebackError, fill, write_back
from harness.spec.entries import Claims, Entry, Signature, Variant
from harness.store.records import ExceptionInfo, Record

ENV = "py3.10-torch1.12.1-lightning2.1.4"

HUMAN_TOP = (
    "# GradScaler error\r\n\r\nHand-written text with trailing spaces   \r\n"
    "and a table | a | b |\r\nand unicode: café ✓\r\n\r\n"
)
DOC = (
    HUMAN_TOP
    + "## Measured versions\r\n<!-- harness:measured-versions:begin -->\r\nold table\r\n<!-- harness:measured-versions:end -->\r\n"
    + "Between blocks, keep me.\t\r\n"
    + "<!-- harness:measured-rates:begin --><!-- harness:measured-rates:end -->\r\n"
    + "Verification: <!-- harness:verification:begin -->\r\nVerification: ai_generated\r\n<!-- harness:verification:end -->"
    + "\r\nNo newline at the end"
)


def rec(variant: str, kind: str, outcome: Outcome, trial: int = 0, day: int = 2) -> Record:
    exc = (
        ExceptionInfo("RuntimeError", "boom | `x` <b>", "f.py:1 in g")
        if outcome is Outcome.REPRODUCED
        else None
    )
    return Record(
        entry="pytorch/demo",
        variant=variant,
        kind=kind,
        cell=f"{ENV}-cpu-fp16",
        env=ENV,
        device="cpu",
        precision="fp16",
        trial=trial,
        outcome=outcome,
        exception=exc,
        versions={"python": "3.10.14", "torch": "1.12.1+cu102", "lightning": "2.1.4"},
        provenance={"host": "box", "harness_version": "0.1.0", "git_rev": "abc123"},
        started_at=f"2024-05-{day:02d}T10:00:00Z",
    )


RECORDS = [
    rec("base", "baseline", Outcome.REPRODUCED),
    rec("base", "baseline", Outcome.REPRODUCED, 1, day=7),
    rec("wa", "workaround", Outcome.OK),
]


def entry(doc: Path) -> Entry:
    return Entry(
        id="pytorch/demo",
        dir=doc.parent,
        title="Demo",
        signature=Signature("RuntimeError", "boom"),
        claims=Claims(fix_rate=0.9),
        variants=(
            Variant("base", "baseline", "b"),
            Variant("wa", "workaround", "w", claim_ref="workaround 1", claimed_rate=0.9),
        ),
        source=doc,
        document=doc,
        repro=doc,
    )


def outside(text: str) -> str:
    """The text outside the blocks, markers included: each block's inside emptied."""
    return re.sub(r"(:begin -->).*?(<!-- harness:[a-z-]+:end -->)", r"\1\2", text, flags=re.S)


def test_write_back_preserves_every_byte_outside_the_markers(tmp_path):
    doc = tmp_path / "document.md"
    doc.write_bytes(DOC.encode("utf-8"))
    agg = aggregate_entry(entry(doc), RECORDS)
    result = write_back(agg, doc)
    assert result.written
    new = doc.read_bytes().decode("utf-8")
    assert outside(new) == outside(DOC)
    assert outside(DOC).count("-->") == 6 and len(outside(DOC)) > len(HUMAN_TOP) + 200
    assert new.startswith(HUMAN_TOP)
    assert new.endswith("\r\nNo newline at the end")
    assert "old table" not in new
    # the newest record's date, not today's: reruns are stable
    assert (
        "Verification: measured on 3 runs (3 applicable), 2024-05-07, harness 0.1.0 (git abc123)."
        in new
    )
    assert "\r\n| --- |" in new  # the document's line endings are kept
    # one run: 90% lies in the interval, but so does nearly everything else
    assert (
        "| fix rate | – | 90% | 1/1 = 100% (CI 20.7–100%) | **inconclusive (n=1); figure "
        "inconclusive: 1/1 scenarios vs 90% claimed** |" in new
    )


def test_write_back_is_idempotent_and_check_mode_writes_nothing(tmp_path):
    doc = tmp_path / "document.md"
    doc.write_bytes(DOC.encode("utf-8"))
    agg = aggregate_entry(entry(doc), RECORDS)
    stale = write_back(agg, doc, check=True)
    assert stale.changed and not stale.written
    assert doc.read_bytes() == DOC.encode("utf-8")
    write_back(agg, doc)
    once = doc.read_bytes()
    again = write_back(agg, doc)
    assert not again.changed and not again.written
    assert doc.read_bytes() == once
    assert not write_back(agg, doc, check=True).changed


def test_render_all_check_mode_reports_stale_and_writes_nothing(tmp_path):
    doc = tmp_path / "document.md"
    doc.write_bytes(DOC.encode("utf-8"))
    results = tmp_path / "results"
    summary = render_all(RECORDS, [entry(doc)], results, check=True)
    assert summary.stale_documents == (doc,)
    assert not results.exists()
    assert doc.read_bytes() == DOC.encode("utf-8")
    first = render_all(RECORDS, [entry(doc)], results)
    assert first.documents_updated == (doc,) and set(first.written) == set(first.outputs)
    second = render_all(list(reversed(RECORDS)), [entry(doc)], results)
    assert second.written == () and second.documents_updated == ()
    assert render_all(RECORDS, [entry(doc)], results, check=True).up_to_date


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            "a\n<!-- harness:measured-versions:begin -->\nx\n",
            2,
            "has no '<!-- harness:measured-versions:end -->'",
        ),
        ("a\nb\n<!-- harness:measured-rates:end -->\n", 3, "without its begin"),
        (
            "<!-- harness:measured-rates:begin -->\n<!-- harness:verification:begin -->\n",
            2,
            "inside the open block",
        ),
        ("<!-- harness:measured-rate:begin -->\n", 1, "unknown block 'measured-rate'"),
        (
            "<!-- harness:verification:begin --><!-- harness:verification:end -->\n"
            "<!-- harness:verification:begin --><!-- harness:verification:end -->",
            2,
            "appears twice",
        ),
    ],
)
def test_bad_markers_name_file_and_line(text, line, words):
    with pytest.raises(WritebackError) as info:
        fill(text, {"verification": "v"}, "repros/x/document.md")
    assert info.value.line == line
    assert str(info.value).startswith(f"repros/x/document.md:{line}: ")
    assert words in str(info.value)


def test_missing_block_is_named(tmp_path):
    doc = tmp_path / "document.md"
    doc.write_text(
        "<!-- harness:verification:begin --><!-- harness:verification:end -->\n", encoding="utf-8"
    )
    with pytest.raises(
        WritebackError,
        match=r"document\.md: missing block\(s\) '<!-- harness:measured-versions:begin",
    ):
        write_back(aggregate_entry(entry(doc), RECORDS), doc)
    assert doc.read_text(encoding="utf-8").count("harness") == 2  # untouched


def test_the_optional_block_is_filled_where_a_document_carries_it_and_only_there():
    required = "".join(
        f"<!-- harness:{b}:begin -->\nold\n<!-- harness:{b}:end -->\n"
        for b in ("measured-versions", "measured-rates", "verification")
    )
    blocks = {
        "measured-versions": "v",
        "measured-rates": "r",
        "verification": "x",
        "suggested-corrections": "suggested",
    }
    assert "suggested" not in fill(required, blocks)  # not carried: nothing added
    carried = required + (
        "<!-- harness:suggested-corrections:begin -->\nold\n"
        "<!-- harness:suggested-corrections:end -->\n"
    )
    filled = fill(carried, blocks)
    assert "suggested" in filled and "old" not in filled
    # carried but not given (a JSON record's entry): left as it is
    del blocks["suggested-corrections"]
    assert fill(carried, blocks).count("old") == 1


def test_a_markdown_entrys_document_suggests_the_corrections_of_its_own_fields():
    from harness.aggregate import aggregate_table
    from harness.catalogue.corrections import markdown_suggestions
    from harness.spec.entries import load_entries
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store
    from tests.paths import committed_tree

    tree = committed_tree()
    entry = next(
        e for e in load_entries(tree / "repros") if e.id == "pytorch/grad-scale-unscale-error"
    )
    table = load_latest(Store(tree / "results" / "records"), None, update=False)
    (agg,) = aggregate_table(table, [entry], ids=[entry.id])
    block = markdown_suggestions(entry, agg)
    # the document carries the block, filled from the committed records (report --check
    # holds it there): no figure is proposed, the message no release raised is said, and the
    # claims no scenario judges are named with why
    assert block.strip() in entry.document.read_text(encoding="utf-8")
    assert "no figure is proposed" in block and "%" not in block
    assert "no measured release raised the documented message" in block
    assert "- dead_ends[0].condition: no baseline reproduced the error" in block
