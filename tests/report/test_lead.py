"""The page and the README lead with the latest night's regressions, read from the newest
snapshot under results/nightly/."""

from __future__ import annotations

import json
from pathlib import Path

from harness.ci.nightly import make_snapshot
from harness.report.lead import html_lead, latest_snapshot, markdown_lead
from tests.ci.test_nightly import NIGHT1, NIGHT2, NIGHT_1, NIGHT_2


def test_the_newest_snapshot_leads_the_page_and_the_readme(tmp_path: Path) -> None:
    assert latest_snapshot(tmp_path) is None
    assert html_lead(None) == "" and markdown_lead(None, "") == ""
    folder = tmp_path / "nightly"
    folder.mkdir()
    first = make_snapshot(NIGHT_1, NIGHT1, {})
    second = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {}, previous=first)
    (folder / f"{NIGHT1}.json").write_text(json.dumps(first))
    (folder / f"{NIGHT2}.json").write_text(json.dumps(second))
    (folder / "states.js").write_text("harnessStates({});\n")  # not a snapshot
    assert latest_snapshot(tmp_path) == second

    page = html_lead(second)
    assert page.startswith('<section id="nightly"><h2>Latest night, 2026-12-02: 1 regression(s)')
    assert "e/x :: control @ py3.11-torch2.14.1-lightning2.6.6-cpu-fp32: ok (2026-12-01)" in page
    assert "1 fixed, 1 flaky" in page and "torch 2.15.0" in page
    crossed = {**second, "changes": {**second["changes"], "new_failures": [
        {**c, "same_revision": False} for c in second["changes"]["new_failures"]
    ]}}  # fmt: skip
    assert ": 1 regression(s) (1 across another harness revision)</h2>" in html_lead(crossed)

    readme = markdown_lead(second, "results/nightly/2026-12-02.json")
    assert readme.startswith(
        "**Latest night, 2026-12-02** ([snapshot](results/nightly/2026-12-02.json)): "
        "1 regression(s)"
    )
    assert (
        ": `e/x :: control @ py3.11-torch2.14.1-lightning2.6.6-cpu-fp32: ok (2026-12-01)" in readme
    )
    assert readme.count("\n") == 2  # one paragraph


def test_a_cell_whose_reproducer_changed_is_no_regression_in_the_lead() -> None:
    rewritten = {("e/x", "control"): f"{NIGHT2}T00:00:00Z"}
    snap = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {}, rewritten=rewritten)
    page = html_lead(snap)
    assert "Latest night, 2026-12-02: 0 regression(s)</h2>" in page
    assert "1 where the reproducer changed;" in page
    assert "<li>" not in page  # nothing listed as a regression
    readme = markdown_lead(snap, "results/nightly/2026-12-02.json")
    assert "0 regression(s). 1 fixed" in readme and "1 where the reproducer changed" in readme
    # a snapshot written before the category existed still reads
    old = {
        **snap,
        "changes": {k: v for k, v in snap["changes"].items() if k != "reproducer_changed"},
    }
    assert "where the reproducer changed" not in html_lead(old)


def test_a_schema_1_snapshot_reads_with_the_rewritten_variants_changes_apart(
    tmp_path: Path,
) -> None:
    # written before the snapshot kept which code ran: the change of a variant rewritten
    # after the previous night and by this one moves apart; one rewritten earlier stays
    snap = make_snapshot([*NIGHT_1, *NIGHT_2], NIGHT2, {})
    old = {
        **snap,
        "schema": 1,
        "changes": {k: v for k, v in snap["changes"].items() if k != "reproducer_changed"},
    }
    (tmp_path / "nightly").mkdir()
    (tmp_path / "nightly" / f"{NIGHT2}.json").write_text(json.dumps(old))
    read = latest_snapshot(tmp_path, {("e/x", "control"): f"{NIGHT2}T02:50:56Z"})
    assert read is not None and read["changes"]["new_failures"] == []
    assert [c["variant"] for c in read["changes"]["reproducer_changed"]] == ["control"]
    before = latest_snapshot(tmp_path, {("e/x", "control"): f"{NIGHT1}T00:00:00Z"})
    assert before is not None
    assert [c["variant"] for c in before["changes"]["new_failures"]] == ["control"]
    assert latest_snapshot(tmp_path) == {
        **old,
        "changes": {**old["changes"], "reproducer_changed": []},
    }
