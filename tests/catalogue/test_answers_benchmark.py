"""The benchmark of answers (benchmarks/bench_answers.py over benchmarks/answers/cases.yaml):
its cases agree with the catalogue (every entry id an entry, every fix a variant of it,
every source an https thread), a malformed case is refused by file, line and field, each
grading rule decides as written, and explain's answers on the committed records keep the
share right at or above the floor measured when the benchmark was written."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.spec.entries import load_entries
from tests.paths import REPO, committed_records


def _bench() -> ModuleType:
    name = "bench_answers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "bench_answers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


bench = _bench()


# -- the data file -------------------------------------------------------------------------


def test_the_cases_agree_with_the_catalogue() -> None:
    cases = bench.load_cases()
    assert bench.check_against(cases, load_entries(REPO / "repros")) == []
    assert len(cases) >= 25
    by = {c: [x for x in cases if x.category == c] for c in bench.CATEGORIES}
    # the mix: errors of catalogued entries, near misses, errors of no entry
    assert len(by["catalogued"]) >= 15 and len(by["near_miss"]) >= 8 and len(by["none"]) >= 7
    assert all(c.source.startswith("https://github.com/") for c in cases)
    # Lightning stacks and CUDA errors are among the catalogued pastes
    ids = {e for c in by["catalogued"] for e in c.entries}
    assert any(e.startswith("lightning/") for e in ids)
    assert any(e.startswith("deadends/cuda/") for e in ids)


def test_the_catalogue_check_names_what_is_wrong(tmp_path: Path) -> None:
    [case] = bench.load_cases(_write(tmp_path, _case()))
    entries = load_entries(REPO / "repros")
    assert bench.check_against([case], entries) == []
    bad = _case(entry="deadends/pytorch/no-such-entry/x", fix="workaround1-unsqueeze")
    problems = bench.check_against(bench.load_cases(_write(tmp_path, bad)), entries)
    assert any("'deadends/pytorch/no-such-entry/x' is no entry" in p for p in problems)
    wrong_fix = _case(fix="workaround9-nothing", must_not="[workaround8-nothing]")
    problems = bench.check_against(bench.load_cases(_write(tmp_path, wrong_fix)), entries)
    assert any("expected.fix: 'workaround9-nothing'" in p for p in problems), problems
    assert any("expected.must_not: 'workaround8-nothing'" in p for p in problems), problems


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"source": "http://github.com/x/y/issues/1"}, ":2: source: an https URL"),
        ({"category": "other"}, ":2: category: one of catalogued, near_miss, none"),
        ({"entry": "null"}, ":2: expected.entry: a catalogued case names its entry"),
        ({"as_": "maybe"}, ":2: expected.as: one of documented, related"),
        ({"extra": "x"}, ":2: unknown field(s) ['x']"),
    ],
)
def test_a_malformed_case_is_refused_by_line_and_field(
    tmp_path: Path, change: dict[str, str], said: str
) -> None:
    path = _write(tmp_path, _case(**change))
    with pytest.raises(bench.CasesError) as exc:
        bench.load_cases(path)
    assert f"{path}{said}" in str(exc.value)
    # the command says it and stops before reading any record
    assert bench.main(["--cases", str(path)]) == 2


def _case(
    source: str = "https://github.com/pytorch/pytorch/issues/1",
    category: str = "catalogued",
    entry: str = "deadends/pytorch/broadcast-shape-mismatch/pt2-linux",
    as_: str = "documented",
    fix: str = "workaround1-unsqueeze",
    must_not: str = "[deadend2-expand-both]",
    extra: str = "",
) -> str:
    return (
        "cases:\n"
        "  - id: one\n"
        f"    category: {category}\n"
        f"    source: {source}\n"
        + (f"    {extra}: 1\n" if extra else "")
        + "    paste: 'RuntimeError: The size of tensor a (3) must match the size of tensor b (2)'\n"
        "    error: RuntimeError\n"
        "    versions: {torch: null, lightning: null, cuda: null}\n"
        "    expected:\n"
        f"      entry: {entry}\n"
        f"      as: {as_}\n"
        f"      fix: {fix}\n"
        f"      must_not: {must_not}\n"
        "      why: a test\n"
    )


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# -- the rules ---------------------------------------------------------------------------


def _answer(
    entry: str, how: str = "documented", variants: tuple[tuple[str, str, str], ...] = ()
) -> dict[str, Any]:
    return {
        "entry": entry,
        "match": {"how": how, "variant": "baseline-x" if how != "documented" else ""},
        "variants": [{"name": n, "kind": k, "advice": a} for n, k, a in variants],
    }


def _x(*answers: dict[str, Any], guessed: bool = False, raised: str = "RuntimeError") -> dict:
    return {"raised": [{"type": raised, "message": "m"}], "guessed": guessed, "answers": answers}


def _judge(x: dict[str, Any], text: str = "", **expected: Any) -> Any:
    fields = {
        "id": "c",
        "category": "catalogued",
        "source": "https://github.com/a/b/issues/1",
        "paste": "RuntimeError: m",
        "error": "RuntimeError",
        "torch": "",
        "lightning": "",
        "cuda": "",
        "entries": ("E",),
        "as_": "documented",
        "fixes": ("w1",),
        "must_not": ("d1",),
        "why": "",
        "line": 1,
    }
    fields.update(expected)
    return bench.judge(bench.Case(**fields), x, text)


WORKS = ("w1", "workaround", "confirmed")


def test_right_names_the_entry_owns_the_paste_and_presents_the_fix() -> None:
    assert _judge(_x(_answer("E", variants=(WORKS,)))).grade == bench.RIGHT
    # an error of no entry: guesses only, or nothing at all
    none = {"category": "none", "entries": (), "fixes": (), "must_not": ()}
    assert _judge(_x(_answer("F", "guess"), guessed=True), **none).grade == bench.RIGHT
    assert _judge(_x(), **none).grade == bench.RIGHT
    # a variant's own error, answered as that variant's (the headline disowns it rightly)
    assert _judge(_x(_answer("E", "related", (WORKS,))), as_="related").grade == bench.RIGHT


def test_partly_right_is_the_right_entry_said_wrong() -> None:
    disowned = _judge(_x(_answer("E", "seen", (WORKS,))))
    assert disowned.grade == bench.PARTLY and "headline disowns" in disowned.reasons[0]
    not_measured = _judge(_x(_answer("E", variants=(("w1", "workaround", "not measurable"),))))
    assert not_measured.grade == bench.PARTLY
    assert "expected fix not presented as working" in not_measured.reasons[0]
    guessed = _judge(_x(_answer("E", "guess"), _answer("F", "guess"), guessed=True))
    assert guessed.grade == bench.PARTLY and "only the first guess" in guessed.reasons[0]
    # a warning taken for the error: the answer is to another exception
    misread = _judge(_x(_answer("E", variants=(WORKS,)), raised="UserWarning"))
    assert misread.grade == bench.PARTLY and "read a UserWarning" in misread.reasons[0]
    # the text read whole (no exception named) is not held against the answer
    assert _judge(_x(_answer("E", variants=(WORKS,)), raised="")).grade == bench.RIGHT
    near = {"category": "near_miss", "entries": (), "fixes": (), "must_not": ()}
    looks_like = _judge(_x(_answer("F", "seen", (("w9", "workaround", "inconclusive"),))), **near)
    assert looks_like.grade == bench.PARTLY


def test_misleading_is_a_wrong_entry_or_a_forbidden_fix_as_working() -> None:
    wrong = _judge(_x(_answer("F", variants=(WORKS,))))
    assert wrong.grade == bench.MISLEADING and "names F" in wrong.reasons[0]
    forbidden = _judge(_x(_answer("E", variants=(WORKS, ("d1", "dead_end", "contradicted")))))
    assert forbidden.grade == bench.MISLEADING and "d1 (E) presented as working" in str(
        forbidden.reasons
    )
    said = _judge(_x(_answer("E", variants=(WORKS,))), "… avoid it …", must_not=("avoid it",))
    assert said.grade == bench.MISLEADING
    missed = _judge(_x(_answer("F", "guess"), guessed=True))
    assert missed.grade == bench.MISLEADING and "no entry knows" in missed.reasons[0]
    near = {"category": "near_miss", "entries": (), "fixes": (), "must_not": ()}
    # a near miss answered with another error's fixes as working, or owned by its headline
    assert _judge(_x(_answer("F", "seen", (WORKS,))), **near).grade == bench.MISLEADING
    assert _judge(_x(_answer("F")), **near).grade == bench.MISLEADING


# -- explain's answers on the committed records ----------------------------------------------


@pytest.fixture(scope="module")
def judged() -> list[Any]:
    catalogue = bench.load_catalogue(REPO, records=committed_records())
    return bench.run(bench.load_cases(), catalogue)


def test_the_share_right_holds_its_floor(judged: list[Any]) -> None:
    share = bench.share_right(judged)
    table = bench.summary(judged)
    assert table["total"]["cases"] == len(judged)
    assert sum(table["total"][g] for g in bench.GRADES) == len(judged)
    assert share >= bench.FLOOR_RIGHT, (share, [j.to_dict() for j in judged])


def test_an_answer_that_disowns_the_paste_offers_none_of_its_fixes():
    """explain's kind says what the paste is: the documented error or a baseline's situation
    own it (its fixes are offered); a step's related error or a near miss disown it (the
    entry's fixes are titled as for the entry's own error)."""
    for kind in ("documented", "situation"):
        owned = {**_answer("E", variants=(WORKS,)), "kind": kind}
        assert bench.headline_owns(owned) and bench.offered(owned, owned["variants"][0])
    for kind in ("related", "near"):
        disowned = {**_answer("E", variants=(WORKS,)), "kind": kind}
        assert not bench.headline_owns(disowned)
        assert not bench.offered(disowned, disowned["variants"][0])
        judged = _judge(_x(disowned), category="near_miss", entries=(), fixes=(), must_not=("w1",))
        assert judged.grade != bench.MISLEADING, judged.reasons
