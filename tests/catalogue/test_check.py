"""harness/catalogue/check.py: `check` lists the rewordings it sees in the runs, for an
expert to declare or leave."""

from __future__ import annotations

import json
from pathlib import Path

from harness.catalogue.check import check_entries, check_entry
from tests.spec.test_entries import GOOD, make

EMBEDDING = GOOD.replace(
    'signature: {type: RuntimeError, message: "boom"}',
    'signature: {type: IndexError, message: "index out of range in Embedding"}',
)


def compat(*messages: tuple[str, str, int]) -> dict[str, object]:
    return {
        "id": "demo/err",
        "variants": [
            {
                "name": "baseline",
                "kind": "baseline",
                "messages": [
                    {"type": t, "message": m, "count": c, "outcomes": ["other_error"], "envs": []}
                    for t, m, c in messages
                ],
            },
            {
                "name": "control",
                "kind": "control",
                "messages": [
                    {"type": "IndexError", "message": "index out of range in x", "count": 9}
                ],
            },
        ],
    }


def test_check_lists_the_rewordings_it_sees(tmp_path: Path) -> None:
    d = make(tmp_path, EMBEDDING)
    (d / "document.md").write_text(
        "".join(
            f"<!-- harness:{b}:begin --><!-- harness:{b}:end -->\n"
            for b in ("measured-versions", "measured-rates", "verification")
        )
    )
    seen = compat(
        ("IndexError", "index out of range in self", 171),
        ("ValueError", "index out of range in self", 5),  # another type: not a rewording
        ("IndexError", "list assignment failed", 2),  # no shared word
    )
    result = check_entry(d, tmp_path, compat=seen)
    assert result.ok
    [line] = [t for t in result.todos if "reworded" in t]
    assert "IndexError: index out of range in self" in line
    assert "171 runs of baseline" in line and "shares 'index', 'out', 'range'" in line
    assert "signature.reworded" in line


def test_a_declared_rewording_is_no_candidate_but_one_that_matches_nothing_is_named(
    tmp_path: Path,
) -> None:
    declared = EMBEDDING.replace(
        'message: "index out of range in Embedding"}',
        'message: "index out of range in Embedding", reworded: '
        '{message: "index out of range in self", why: "torch names the argument"}}',
    )
    d = make(tmp_path, declared)
    seen = compat(("IndexError", "index out of range in self", 171))
    assert not [t for t in check_entry(d, tmp_path, compat=seen).todos if "reworded" in t]
    other = compat(("IndexError", "index 7 is out of bounds", 4))
    [line] = [t for t in check_entry(d, tmp_path, compat=other).todos if "reworded" in t]
    assert "matches none of the baseline runs' messages" in line


def test_a_baseline_that_declares_what_torch_says_instead_is_no_candidate(tmp_path: Path) -> None:
    said = EMBEDDING.replace(
        '{name: baseline, kind: baseline, description: "raises"}',
        '{name: baseline, kind: baseline, description: "raises", signature: {type: IndexError, '
        'message: "in self", instead: "torch names the argument: the umbrella text is not its"}}',
    )
    assert said != EMBEDDING
    d = make(tmp_path, said)
    seen = compat(("IndexError", "index out of range in self", 171))
    assert not [t for t in check_entry(d, tmp_path, compat=seen).todos if "reworded" in t]


def test_check_entries_reads_the_results_beside_repros(tmp_path: Path) -> None:
    repros = tmp_path / "repros"
    make(repros, EMBEDDING)
    (tmp_path / "results").mkdir()
    document = {"entries": [compat(("IndexError", "index out of range in self", 3))]}
    (tmp_path / "results" / "compat.json").write_text(json.dumps(document), encoding="utf-8")
    [result] = check_entries(repros)
    assert [t for t in result.todos if "index out of range in self" in t]
