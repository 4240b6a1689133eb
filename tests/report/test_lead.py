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
