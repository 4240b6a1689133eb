"""compat.json and its parts (harness/report/render/jsonout.py): the index of the parts of
16 entries, an entry a line, read back whole by ``read_compat``, which refuses what is not
laid out as its schema says, naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.report.render import jsonout
from harness.report.render.jsonout import compat_index, part_name, read_compat

# an entry's aggregate as the renderer writes it: a dict with its id (text that JSON escapes:
# newlines, U+2028, quotes), on one line
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
entries = st.lists(
    st.fixed_dictionaries({"title": texts, "runs": st.integers(0, 10**6)}),
    max_size=40,
)


def _write(folder: Path, n_records: int, docs: list[dict]) -> None:
    ids = [d["id"] for d in docs]
    (folder / "aggregates").mkdir(parents=True, exist_ok=True)
    (folder / "compat.json").write_bytes(compat_index(n_records, ids))
    for first in range(0, len(docs), jsonout.PART_ENTRIES):
        lines = [
            json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n"
            for d in docs[first : first + jsonout.PART_ENTRIES]
        ]
        (folder / part_name(first)).write_text("".join(lines), encoding="utf-8")


@settings(max_examples=60, deadline=None)
@given(raw=entries, n_records=st.integers(0, 10**7), per=st.integers(1, 5))
def test_the_parts_read_back_are_the_whole_document(tmp_path_factory, raw, n_records, per):
    folder = tmp_path_factory.mktemp("results")
    docs = [{"id": f"pytorch/e{i:03d}\u2028\n", **d} for i, d in enumerate(raw)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jsonout, "PART_ENTRIES", per)
        _write(folder, n_records, docs)
        index = json.loads((folder / "compat.json").read_bytes())
        assert [p["file"] for p in index["parts"]] == [
            f"aggregates/{k:04d}.jsonl" for k in range((len(docs) + per - 1) // per)
        ]
        assert read_compat(folder) == {"schema": 2, "records": n_records, "entries": docs}


def test_schema_1_is_read_as_it_is(tmp_path: Path) -> None:
    doc = {"schema": 1, "records": 3, "entries": [{"id": "pytorch/a"}]}
    (tmp_path / "compat.json").write_text(json.dumps(doc))
    assert read_compat(tmp_path) == doc


def _two_parts(tmp_path: Path) -> Path:
    docs = [{"id": f"pytorch/e{i:02d}"} for i in range(20)]  # 16 + 4
    _write(tmp_path, 7, docs)
    return tmp_path


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        # the index
        (lambda r: (r / "compat.json").write_text("{"), "compat.json: not JSON"),
        (lambda r: (r / "compat.json").write_text('{"schema":3,"records":1}'), "schema 3"),
        (lambda r: (r / "compat.json").write_text('{"schema":2,"records":"7"}'), "not a compat"),
        (lambda r: (r / "compat.json").write_text('{"schema":1,"records":7}'), "schema 1 without"),
        (
            lambda r: (r / "compat.json").write_text(
                '{"schema":2,"records":7,"parts":[{"file":"../../etc/passwd","ids":[]}]}'
            ),
            "part 1 is not a file under aggregates/",
        ),
        (
            lambda r: (r / "compat.json").write_text(
                '{"schema":2,"records":7,"parts":[{"file":"aggregates/0000.jsonl","ids":[1]}]}'
            ),
            "part 1 is not a file under aggregates/",
        ),
        # a part
        (
            lambda r: (r / "aggregates/0001.jsonl").write_text('{"id":"pytorch/e16"}\n'),
            "0001.jsonl: holds 1 lines",
        ),
        (
            lambda r: (r / "aggregates/0001.jsonl").write_bytes(
                (r / "aggregates/0001.jsonl").read_bytes()[:-1]
            ),
            "(with a last newline: False)",
        ),
        (
            lambda r: (r / "aggregates/0001.jsonl").write_bytes(
                (r / "aggregates/0001.jsonl").read_bytes().replace(b"e18", b"e99")
            ),
            "0001.jsonl:3: not the aggregate of pytorch/e18",
        ),
        (
            lambda r: (r / "aggregates/0000.jsonl").write_bytes(
                (r / "aggregates/0000.jsonl").read_bytes().replace(b'"}\n', b'"\n', 1)
            ),
            "0000.jsonl:1: not JSON",
        ),
    ],
)
def test_a_document_not_laid_out_as_its_schema_says_is_refused_naming_where(
    tmp_path: Path, damage, said: str
) -> None:
    root = _two_parts(tmp_path)
    assert len(read_compat(root)["entries"]) == 20
    damage(root)
    with pytest.raises(ValueError, match=None) as caught:
        read_compat(root)
    assert said in str(caught.value)


def test_a_missing_part_is_an_os_error(tmp_path: Path) -> None:
    root = _two_parts(tmp_path)
    (root / "aggregates/0001.jsonl").unlink()
    with pytest.raises(FileNotFoundError):
        read_compat(root)


# what the report's JSON holds: text (any character but a lone surrogate), counts, flags,
# nulls, rates rounded to six places, in lists and dicts keyed by text
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(0, 1).map(lambda x: round(x, 6))
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=30,
)


def _floats(value) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [x for v in value for x in _floats(v)] if isinstance(value, list) else []


@settings(max_examples=400, deadline=None)
@given(value=_values)
def test_compact_json_is_the_standard_librarys_text_but_for_small_floats(value) -> None:
    """orjson writes what json.dumps(ensure_ascii=False, separators=(",", ":")) writes,
    character for character, wherever no float lies below 1e-4 in size (those it writes
    out, 0.00005 for 5e-05); the value read back is the same either way."""
    text = jsonout.compact_json(value)
    standard = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert json.loads(text) == json.loads(standard) == value
    if all(x == 0 or 1e-4 <= abs(x) < 1e16 for x in _floats(value)):
        assert text == standard


def test_compact_json_refuses_what_it_cannot_write_as_the_report_means_it() -> None:
    for bad in ({1: "a key that is not text"}, 2**64, "\ud800"):
        with pytest.raises(TypeError):
            jsonout.compact_json(bad)
