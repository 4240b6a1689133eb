"""A sample of the benchmark of answers (benchmarks/answers/cases.yaml) pasted into the
committed page's box in headless Chromium: the box names the same entry at the top, the same
way, as `explain`, and earns the same grade by the benchmark's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.catalogue.test_answers_benchmark import bench
from tests.catalogue.test_explain import (
    Committed,
    committed,  # noqa: F401  (a fixture: the committed records, aggregated once)
)
from tests.e2e.test_html_browser import CHROMIUM, COMMITTED, committed_page, run_script

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
]

# one of each kind of answer: the documented signature, a message the runs raised, a
# variant's own error, a near miss answered with another error's fixes, an error of no
# entry, and a warning line before the traceback
SAMPLE = (
    "inplace-lio",
    "embedding-index-self",
    "weights-only-torch26",
    "broadcast-rgba-normalize",
    "torch-six-removed",
    "target-long-int-after-warning",
)


def _as_explain(page: dict[str, Any]) -> dict[str, Any]:
    """The box's answer in the fields of Explanation.to_dict() the benchmark reads."""
    return {
        "raised": page["raised"],
        "guessed": page["guessed"],
        "answers": [
            {
                "entry": a["entry"],
                "match": {"how": a["how"], "variant": a.get("variant", "")},
                "variants": a.get("variants", []),
            }
            for a in page["answers"]
        ],
    }


@committed_page
def test_the_box_answers_the_sample_as_explain_does(
    tmp_path: Path,
    committed: Committed,  # noqa: F811
) -> None:
    cases = {c.id: c for c in bench.load_cases()}
    sample = [cases[i] for i in SAMPLE]
    asked = [[c.paste, c.torch, c.lightning] for c in sample]
    script = (
        f"var cases={json.dumps(asked)},out=[];".replace("</", "<\\/")
        + "(function next(i){if(i===cases.length){done(out);return;}"
        "harnessExplain(cases[i][0],cases[i][1],cases[i][2],function(r){out.push(r);next(i+1);});})(0);"
    )
    pages = run_script(tmp_path, COMMITTED, script)
    catalogue = bench.Catalogue(committed.entries, committed.table, committed.aggs)
    for case, page in zip(sample, pages, strict=True):
        x, text = bench.answer(case, catalogue)
        mine, box = bench.judge(case, x, text), bench.judge(case, _as_explain(page))
        assert (box.top, box.how, box.guesses[:1]) == (mine.top, mine.how, mine.guesses[:1]), (
            case.id
        )
        assert box.grade == mine.grade, (case.id, box.reasons, mine.reasons)
