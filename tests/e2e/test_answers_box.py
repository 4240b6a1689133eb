"""A sample of the benchmark of answers (benchmarks/answers/cases.yaml) pasted into the
committed page's box in headless Chromium: the box names the same entry at the top, the same
way, as `explain`, and earns the same grade by the benchmark's rules."""

from __future__ import annotations

import json
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
                "kind": a["kind"],
                "match": {"how": a["how"], "variant": a.get("variant", "")},
                "variants": a.get("variants", []),
            }
            for a in page["answers"]
        ],
    }


def _ids() -> list[str]:
    return [p if isinstance(p, str) else p.values[0] for p in SAMPLE]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The box's answer to each case of the sample, from one Chromium run."""
    if not COMMITTED.exists():
        pytest.skip("results/index.html is not rendered (python -m harness report)")
    cases = {c.id: c for c in bench.load_cases()}
    asked = [[cases[i].paste, cases[i].torch, cases[i].lightning] for i in _ids()]
    script = (
        f"var cases={json.dumps(asked)},out=[];".replace("</", "<\\/")
        + "(function next(i){if(i===cases.length){done(out);return;}"
        "harnessExplain(cases[i][0],cases[i][1],cases[i][2],function(r){out.push(r);next(i+1);});})(0);"
    )
    pages = run_script(tmp_path_factory.mktemp("answers-box"), COMMITTED, script)
    return dict(zip(_ids(), pages, strict=True))


@committed_page
@pytest.mark.parametrize("case_id", SAMPLE)
def test_the_box_answers_as_explain_does(
    case_id: str,
    box: dict[str, dict[str, Any]],
    committed: Committed,  # noqa: F811
) -> None:
    case = next(c for c in bench.load_cases() if c.id == case_id)
    catalogue = bench.Catalogue(committed.entries, committed.table, committed.aggs)
    x, text = bench.answer(case, catalogue)
    mine, theirs = bench.judge(case, x, text), bench.judge(case, _as_explain(box[case_id]))
    assert (theirs.top, theirs.how, theirs.guesses[:1]) == (mine.top, mine.how, mine.guesses[:1])
    assert theirs.grade == mine.grade, (theirs.reasons, mine.reasons)
