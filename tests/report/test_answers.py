"""The answers file the page's box reads: inert in a <script>, each environment and reason
once, coded rows that decode to the aggregates' cells and rates; the per-environment rates
add up to the rates of any set of environments (what explain aggregates from the records)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.aggregate import aggregate, aggregate_table
from harness.catalogue.explain import _subset
from harness.report.render import STATUSES
from harness.report.render.answers import (
    _DIGITS,
    _coded,
    answers_bytes,
    answers_file,
    answers_index,
    answers_layout,
    answers_part_name,
    answers_pieces,
    answers_spliced,
    answers_tables,
    answers_text,
    entry_answers,
    js_pattern,
    named_heads,
)
from tests.catalogue.test_explain import (
    CLIPPING,
    GRAD_SCALE,
    Committed,
    committed,  # noqa: F401  (a fixture)
)
from tests.report.test_render import ENVS, HOSTILE, entry, records


def decode(coded: dict, row: int) -> dict[int, list[int]]:
    """As static/answer.js decodes a row: environment index -> value."""
    width = 1 if len(coded["values"]) <= len(_DIGITS) else 2
    text, out = coded["rows"][row], {}
    for e in range(len(text) // width):
        code = text[e * width : (e + 1) * width]
        if code[0] == ".":
            continue
        i = (
            _DIGITS.index(code)
            if width == 1
            else _DIGITS.index(code[0]) * 62 + _DIGITS.index(code[1])
        )
        out[e] = coded["values"][i]
    return out


def _call(text: str, function: str) -> dict:
    prefix = f"{function}("
    assert text.startswith(prefix) and text.endswith(");\n")
    body = text[len(prefix) : -3]
    assert not set("<>&") & set(body)  # inert inside <script>, whatever the texts hold
    return json.loads(body)


def the_file(tmp_path) -> dict:
    """answers.js, each entry given its variants from its part (as the page's script does),
    and the part's reasons as ``reasons``."""
    e = entry(tmp_path)
    e = dataclasses.replace(
        e, variants=tuple(dataclasses.replace(v, description=HOSTILE) for v in e.variants)
    )
    recs = records() + [dataclasses.replace(r, entry="pytorch/other") for r in records()]
    aggs = aggregate(recs, [e]).entries
    known = {e.id: e}
    files = answers_file([entry_answers(a, known.get(a.id)) for a in aggs])
    assert [name for name, _ in files] == ["answers.js", "answers/0000.js"]
    data = _call(files[0][1], "harnessAnswers")
    part = _call(files[1][1], "harnessVariants")
    assert all("variants" not in e for e in data["entries"])  # in the part, not answers.js
    # an entry's text names no part: the box names it from the entry's place
    assert data["part_entries"] == 16 and all("part" not in e for e in data["entries"])
    variants = dict(part["entries"])
    for x in data["entries"]:
        assert x["names"] == [v["name"] for v in variants[x["id"]]]
        x["variants"] = variants[x["id"]]
        x["seen"] = [[v, *data["messages"][k], runs, envs] for v, k, runs, envs in x["seen"]]
    data["reasons"] = part["reasons"]
    return data


def test_the_file_is_inert_and_names_each_environment_and_reason_once(tmp_path):
    data = the_file(tmp_path)
    assert data["schema"] == 3 and data["statuses"] == list(STATUSES)
    hostile, other = data["entries"]
    assert [d["id"] for d in data["entries"]] == ["pytorch/hostile", "pytorch/other"]
    # both entries ran in the same two environments: listed once, named by index
    assert hostile["envs"] == other["envs"] == [0, 1]
    assert [env[0] for env in data["envs"]] == ENVS
    assert data["envs"][1][1:3] == ["2.5.1", "2.1.4"]  # the installed releases, public
    assert hostile["signature"] == ["RuntimeError", "<script>", "RuntimeError: <script>"]
    assert hostile["lightning"] is True and other["lightning"] is True  # not known: as explain
    seen = {(m[1], m[2]) for m in hostile["seen"]}
    assert ("RuntimeError", HOSTILE) in seen
    wa = next(v for v in hostile["variants"] if v["name"] == "wa")
    assert wa["description"] == " ".join(HOSTILE.split()) and wa["ref"] == "workaround 1"
    # the reason a run was not counted, once for both entries' "wa" (in their part)
    assert data["reasons"] == ["no CUDA | here"]
    assert wa["not_counted"] == [["skipped", 0, 1, [0]]]


def test_the_variants_are_in_parts_of_16_entries(tmp_path):
    """answers.js holds what an error is matched against; each entry's variants (most of
    the bytes) are in its part, which the box loads for the entries it answers with."""
    [a] = aggregate(records(), [entry(tmp_path)]).entries
    line = entry_answers(a, None)
    parts = []
    for i in range(40):  # 40 entries of the same shape
        one = json.loads(line)
        one["id"] = f"pytorch/e{i:02d}"
        parts.append(json.dumps(one))
    files = dict(answers_file(parts))
    assert sorted(files) == ["answers.js", "answers/0000.js", "answers/0001.js", "answers/0002.js"]
    index = _call(files["answers.js"], "harnessAnswers")
    assert index["part_entries"] == 16 and all("part" not in e for e in index["entries"])
    assert answers_part_name(15) == "answers/0000.js" and answers_part_name(16) == "answers/0001.js"
    held = [
        [i for i, _ in _call(files[f"answers/{k:04d}.js"], "harnessVariants")["entries"]]
        for k in range(3)
    ]
    assert held == [[f"pytorch/e{i:02d}" for i in range(a, min(a + 16, 40))] for a in (0, 16, 32)]
    assert "variants" not in files["answers.js"]


def test_coded_rows_decode_to_the_cells_and_rates(tmp_path):
    data = the_file(tmp_path)
    hostile = data["entries"][0]
    assert hostile["slices"] == ["cpu-fp16", "cuda-bf16"]
    base, wa = hostile["variants"][0], hostile["variants"][1]
    reproduced, other_error, skipped = (
        STATUSES.index(s) for s in ("reproduced", "other_error", "skipped")
    )
    assert decode(base["cells"], 0) == {0: [reproduced, 2], 1: [reproduced, 2]}
    assert decode(base["cells"], 1) == {}  # not run on cuda/bf16
    assert decode(wa["cells"], 1) == {0: [skipped, 1]}
    assert decode(wa["cells"], 0) == {0: [other_error, 2], 1: [other_error, 2]}
    # per environment: k, n of the metric, k, n anywhere, in scenarios (the cells above
    # count trials: two each); the baseline reproduced in both
    # (k, n, k anywhere, n anywhere, ok of n): a baseline reproduced, none ok
    assert decode(base["rates"], 0) == {0: [1, 1, 1, 1, 0], 1: [1, 1, 1, 1, 0]}
    assert decode(wa["rates"], 0) == {0: [0, 1, 0, 1, 0], 1: [0, 1, 0, 1, 0]}


def test_more_than_62_values_take_two_characters_each():
    rows = [[(i,) for i in range(70)] + [None]]
    coded = _coded(rows)
    assert len(coded["rows"][0]) == 71 * 2 and coded["rows"][0].endswith("..")
    assert decode(coded, 0) == {i: [i] for i in range(70)}


def test_js_pattern():
    assert js_pattern(r"\Aunscale_\(\) (?P<n>\d+) (?P=n)\Z") == r"^unscale_\(\) (?<n>\d+) \k<n>$"
    assert js_pattern("plain text") == "plain text"


@pytest.mark.parametrize("entry_id", [CLIPPING, GRAD_SCALE])
def test_the_rates_of_a_set_of_environments_are_the_sums_of_theirs(
    committed: Committed,  # noqa: F811
    entry_id: str,
) -> None:
    """What the box adds up (VariantAggregate.by_env) is what explain aggregates from the
    records of those environments, for the seed entries' every variant."""
    [whole] = [a for a in committed.aggs if a.id == entry_id]
    envs = [e.id for e in whole.envs]
    for chosen in (envs[:1], envs[20:23], envs[-2:], envs[::7]):
        [here] = aggregate_table(
            _subset(committed.table, chosen, entry_id), committed.entries, ids=[entry_id]
        )
        for v in whole.variants:
            rows = [r for r in v.by_env if r[0] in chosen]
            sums = tuple(sum(r[i] for r in rows) for i in range(1, 6))
            try:
                h = here.variant(v.name)
            except KeyError:  # no record of it in these environments
                assert sums == (0, 0, 0, 0, 0)
                continue
            want = (h.overall.k, h.overall.n, h.anywhere.k, h.anywhere.n, h.ok.k)
            assert sums == want, (chosen, v.name)


def test_a_pattern_that_may_backtrack_catastrophically_never_reaches_the_page(tmp_path):
    """The page's script cannot interrupt a RegExp: it gets only patterns the loader's check
    passes. One from records alone (no entry folder, so never loaded) is left out as "", and
    the box matches that entry by its runs' messages; answer.js skips an empty pattern."""
    a = aggregate(records(), [entry(tmp_path)]).entries[0]
    risky = dataclasses.replace(a, signature_message="boom: (a+)+$")
    part = json.loads(entry_answers(risky, None))
    assert part["signature"][:2] == ["RuntimeError", ""]
    safe = json.loads(entry_answers(dataclasses.replace(a, signature_message="boom: a+$"), None))
    assert safe["signature"][1] == "boom: a+$"


# -- answers.js in pieces, and a report's splice of the entries that changed ---------------

_ENVS = [["e1", "2.1", "2.1", "3.11"], ["e<2>", "2.2", "", "3.12"], ["e3&", "1.13", "1.9", "3.10"]]
_MESSAGES = [("RuntimeError", "boom é"), ("ValueError", "</script>\u2028x"), ("E", "c")]


@st.composite
def _head(draw: st.DrawFn, i: int) -> dict:
    seen = draw(st.lists(st.sampled_from(_MESSAGES), max_size=4))
    return {
        "id": f"pytorch/e{i}",
        "title": draw(st.sampled_from(["t", "<b>&amp;</b>", "\u2029"])),
        "seen": [[f"v{k}", t, m, draw(st.integers(0, 9)), [0]] for k, (t, m) in enumerate(seen)],
        "envs": draw(st.lists(st.sampled_from(_ENVS), max_size=3, unique_by=tuple)),
        "names": ["v0"],
    }


@st.composite
def _a_report_and_the_next(draw: st.DrawFn) -> tuple[list[dict], dict[int, dict]]:
    n = draw(st.integers(1, 6))
    old = [draw(_head(i)) for i in range(n)]
    changed = draw(st.sets(st.integers(0, n - 1)))
    new = {}
    for i in changed:
        if draw(st.booleans()):  # only its counts, texts and order: the same names
            new[i] = {
                **old[i],
                "title": "new",
                "seen": [[*s[:3], 7, [0]] for s in reversed(old[i]["seen"])],
            }
        else:
            new[i] = draw(_head(i))
    return old, new


@settings(max_examples=300, deadline=None)
@given(_a_report_and_the_next())
def test_answers_js_spliced_is_what_numbering_every_entry_again_gives(case):
    """The pieces joined are answers_text's bytes and cut apart again; where the splice
    keeps the other entries' texts, the file is byte for byte the one numbered anew; and an
    entry whose names stay the same in the same order is always spliced."""
    old, new = case
    index = answers_index(old)
    tables, texts = answers_layout(index)
    data = answers_bytes(tables, texts)
    assert data == answers_text(index).encode("utf-8")
    assert answers_pieces(data, [len(t.text) for t in texts]) == (tables, [t.text for t in texts])
    assert answers_pieces(data, [len(t.text) + 1 for t in texts]) is None
    parsed = answers_tables(tables)
    assert parsed == (index["envs"], index["messages"])
    assert named_heads(parsed, [t.text for t in texts]) == old
    spliced = answers_spliced(parsed, texts, new)
    heads = [new.get(i, h) for i, h in enumerate(old)]
    if all(new[i]["title"] == "new" for i in new):
        assert spliced is not None
    if spliced is not None:
        assert answers_bytes(tables, spliced) == answers_text(answers_index(heads)).encode()
        assert [t for i, t in enumerate(spliced) if i not in new] == [
            t for i, t in enumerate(texts) if i not in new
        ]
        assert spliced == answers_layout(answers_index(heads))[1]


@st.composite
def _a_report_and_an_entry_added(draw: st.DrawFn) -> tuple[list[dict], int, dict]:
    n = draw(st.integers(1, 6))
    old = [draw(_head(i)) for i in range(n)]
    place = draw(st.integers(0, n))
    if place and draw(st.booleans()):  # names only what the entries before it name
        before = old[:place]
        seen = [s for h in before for s in h["seen"]][:3]
        envs = list({tuple(e): e for h in before for e in h["envs"]}.values())[:2]
        added = {**draw(_head(place)), "seen": seen, "envs": envs}
    else:
        added = draw(_head(place))
    return old, place, {**added, "id": f"pytorch/added{place}"}


@settings(max_examples=300, deadline=None)
@given(_a_report_and_an_entry_added())
def test_an_entry_added_is_spliced_where_the_numbering_stands(case):
    """An entry the last answers.js did not hold (no old text) put among the others: where
    the splice keeps the others' texts, the file is byte for byte the one numbered anew;
    an entry that names only what the entries before it name is always spliced."""
    old, place, added = case
    tables, texts = answers_layout(answers_index(old))
    parsed = answers_tables(tables)
    assert parsed is not None
    olds = [*texts[:place], None, *texts[place:]]
    spliced = answers_spliced(parsed, olds, {place: added})
    heads = [*old[:place], added, *old[place:]]
    before = old[:place]
    if {(s[1], s[2]) for s in added["seen"]} <= {
        (s[1], s[2]) for h in before for s in h["seen"]
    } and {tuple(e) for e in added["envs"]} <= {tuple(e) for h in before for e in h["envs"]}:
        assert spliced is not None
    if spliced is not None:
        assert answers_bytes(tables, spliced) == answers_text(answers_index(heads)).encode()
        assert spliced[:place] + spliced[place + 1 :] == list(texts)
