"""YAML composed by libyaml where it may (harness/spec/yaml_nodes.py): the same node tree,
or the same problem at the same line, as PyYAML's own parser gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import yaml_nodes
from harness.spec.yaml_nodes import (
    MAX_ALIASES,
    MAX_DEPTH,
    YamlProblem,
    compose_plain,
    compose_python,
    read_yaml_text,
)
from tests.paths import REPO as ROOT
from tests.store.test_fuzz import YAML_TEXT

needs_libyaml = pytest.mark.skipif(
    not hasattr(yaml, "CSafeLoader"), reason="PyYAML was built without libyaml"
)


def _tree(node: yaml.Node | None) -> object:
    """Everything a reader of the tree may look at: kinds, tags, values, styles, lines and
    columns (an alias's node as often as it is named)."""
    if node is None:
        return None
    mark = (node.start_mark.line, node.start_mark.column)
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.style, mark)
    if isinstance(node, yaml.SequenceNode):
        return ("seq", node.tag, mark, [_tree(n) for n in node.value])
    return ("map", node.tag, mark, [(_tree(k), _tree(v)) for k, v in node.value])


def _outcome(compose: object, text: str) -> object:
    try:
        return ("tree", _tree(compose(text)))  # type: ignore[operator]
    except YamlProblem as exc:
        return ("problem", exc.line, exc.message)


def _project_yaml() -> list[Path]:
    found = [ROOT / "matrix.yaml"]
    for folder in ("repros", "tests", "results", ".github"):
        found += sorted((ROOT / folder).rglob("*.yaml")) + sorted((ROOT / folder).rglob("*.yml"))
    return [p for p in found if p.is_file() and ".cache" not in p.parts]


@needs_libyaml
def test_every_yaml_file_of_the_project_composes_alike_and_by_libyaml() -> None:
    files = _project_yaml()
    assert len(files) > 70  # the entries, the matrix, the fixtures, the workflows
    by_libyaml = 0
    for path in files:
        try:
            text = read_yaml_text(path)
        except YamlProblem:
            continue  # a fixture that is not UTF-8 or too big: neither parser sees it
        assert _outcome(compose_plain, text) == _outcome(compose_python, text), path
        by_libyaml += yaml_nodes._compose_c(text) is not yaml_nodes._UNDECIDED
    # the speed is real: the project's files are composed by libyaml, not handed back
    assert by_libyaml >= len(files) * 0.9


# YAML as files are written: block and flow collections, scalars of every style (quoted
# with escapes and folds, block with indicators, plain over lines), tags, anchors, comments,
# directives, documents, line breaks of every kind; pieces out of place too
_SCALARS = st.sampled_from(
    [
        *("a", "b c", "1", "1.10", "-1", "0o17", "0x1f", "1e3", ".inf", "~", "null", "true"),
        *("No", "yes", "2024-01-02", "2001-12-14t21:59:43.10-05:00", "x:y", "a #b", "é"),
        *("'q''x'", '"d\\tq\\u00e9\\x41\\N\\_"', '"a\\\n  b"', "'a\n\n  b'"),
        *("|\n  l1\n   l2\n\n", "|-\n  x\n", ">+\n  a\n  b\n\n\n", "|2\n   x\n"),
        *(">\n\n  a\n\n  b\n", "plain\n  cont", "'a' # c", "a\r\nb", "\r", "\u2028", "\x85"),
        *("!", "&", "@x", "'", '"', "? x", "-", "- -", "<<: *a", "\u00a0x"),
    ]
)
_KEYS = st.sampled_from(
    ["a", "b", "key", "1", "'q k'", '"d k"', "? x", "[1, 2]", "{a: 1}", "-a", "a b", "<<", "~"]
)
_BREAKS = st.sampled_from(
    ["", " ", "  ", "\n", "\r\n", " # c\n", "\n---\n", "\n...\n", "%YAML 1.1\n---\n"]
    + ["%TAG !e! tag:e,2000:\n---\n"]
)
_FLOW_ITEMS = ["1", "a", "'b'", "{c: d}", "[]", "e: f", "", " ", "*a", "&a x", "\n  g"]
_FLOW_PAIRS = ["a: 1", "b", "'c': [d]", "? e", "f:", ": g", "*a : 1", "h: &a 2", "\n i: j"]


@st.composite
def _node(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 5 if depth < 3 else 0))
    indent = "  " * depth
    if kind == 0:
        return draw(_SCALARS)
    if kind in (1, 2):
        lines = []
        for _ in range(draw(st.integers(0, 3))):
            space = draw(st.sampled_from([" ", "", "   "]))
            lead = f"{draw(_KEYS)}:" if kind == 1 else "-"
            lines.append(f"{indent}{lead}{space}{draw(_node(depth + 1))}{draw(_BREAKS)}\n")
        return "\n" + "".join(lines)
    if kind in (3, 4):
        items = draw(
            st.lists(st.sampled_from(_FLOW_ITEMS if kind == 3 else _FLOW_PAIRS), max_size=4)
        )
        close = "]" if kind == 3 else "}"
        return "[{"[kind - 3] + ", ".join(items) + draw(st.sampled_from([close, "," + close, ""]))
    props = ["&a ", "*a", "!!str ", "!!int ", "!e!x ", "&b [*b]", "&a {x: *a}"]
    return draw(st.sampled_from(props)) + draw(_SCALARS)


_WRITTEN = st.builds(
    lambda head, body, tail: head + body + tail,
    _BREAKS,
    _node(),
    st.one_of(st.just(""), _BREAKS, st.text(max_size=3)),
)


@needs_libyaml
@settings(max_examples=400)
@given(st.one_of(YAML_TEXT, _WRITTEN))
def test_generated_yaml_composes_alike_or_fails_alike(text: str) -> None:
    assert _outcome(compose_plain, text) == _outcome(compose_python, text)


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "a: \x85b\n",  # a character PyYAML's reader refuses (libyaml takes it)
        "[" * MAX_DEPTH + "]" * MAX_DEPTH,  # at the depth's limit (PyYAML takes it)
        "- " * (MAX_DEPTH - 1) + "x\n",
        "a: &a 1\nb: [" + ", ".join(["*a"] * MAX_ALIASES) + "]\n",  # at the aliases' limit
        "a: [1,\n",  # not YAML: PyYAML words the problem
        "a: 1\n---\nb: 2\n",  # two documents
    ],
)
def test_what_libyaml_does_not_decide_pyyaml_does(text: str) -> None:
    assert yaml_nodes._compose_c(text) is yaml_nodes._UNDECIDED
    assert _outcome(compose_plain, text) == _outcome(compose_python, text)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1, f"more than {MAX_DEPTH} levels"),
        ("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n", 2, "aliases"),
        ("a: 1\nb: [2,\n", 3, "expected the node content"),
    ],
)
def test_the_limits_and_problems_are_pyyamls(text: str, line: int, words: str) -> None:
    with pytest.raises(YamlProblem) as raised:
        compose_plain(text)
    assert raised.value.line == line and words in raised.value.message


@needs_libyaml
def test_a_plain_scalar_has_pyyamls_style() -> None:
    # libyaml writes a plain scalar's style as "": the triage reads `style is None` as plain
    root = yaml_nodes._compose_c("a: ~\nb: '~'\n")
    assert isinstance(root, yaml.MappingNode)
    assert [v.style for _, v in root.value] == [None, "'"]
