"""Reading a reproducer's source (harness/spec/declared.py): what VARIANTS maps each name to,
and parse_source surviving CPython 3.11's shared AST depth count (python/cpython#106905)."""

from __future__ import annotations

import ast

import pytest

from harness.spec import declared
from harness.spec.declared import parse_source

MISMATCH = "AST constructor recursion depth mismatch (before=165, after=35)"


def failing(times: int, message: str):
    real = ast.parse
    calls = []

    def parse(*args, **kwargs):
        calls.append(args)
        if len(calls) <= times:
            raise SystemError(message)
        return real(*args, **kwargs)

    return parse, calls


def test_a_depth_mismatch_is_parsed_again(monkeypatch) -> None:
    parse, calls = failing(2, MISMATCH)
    monkeypatch.setattr(declared.ast, "parse", parse)
    tree = parse_source("VARIANTS = {'a': 'b'}\n", "repro.py")
    assert isinstance(tree.body[0], ast.Assign) and len(calls) == 3


def test_a_mismatch_that_stays_and_other_system_errors_are_raised(monkeypatch) -> None:
    parse, _ = failing(3, MISMATCH)
    monkeypatch.setattr(declared.ast, "parse", parse)
    with pytest.raises(SystemError, match="mismatch"):
        parse_source("x = 1\n", "repro.py")
    parse, calls = failing(1, "something else")
    monkeypatch.setattr(declared.ast, "parse", parse)
    with pytest.raises(SystemError, match="something else"):
        parse_source("x = 1\n", "repro.py")
    assert len(calls) == 1


def test_options_reach_the_parser() -> None:
    with pytest.raises(SyntaxError):  # the walrus operator is Python 3.8
        parse_source("(y := 1)\n", "repro.py", feature_version=(3, 7))


def test_variants_map_names_to_functions_or_to_none_while_not_written(tmp_path) -> None:
    from harness.spec.declared import read_declared

    path = tmp_path / "repro.py"
    path.write_text(
        "def base(device, precision):\n"
        '    return {"moved": {"ok": True, "detail": ""}}\n'
        "\n"
        "\n"
        "VARIANTS = {\n"
        '    "baseline": base,\n'
        '    "control": None,\n'
        "}\n"
    )
    declared = read_declared(path)
    assert declared.variants == {"baseline": 6, "control": 7} and declared.variants_line == 5
    assert declared.functions == {"baseline": "base"}
    assert declared.not_written == {"control": 7}
    assert declared.can_report("moved") and not declared.can_report("base")


def test_a_repro_is_read_each_time_and_worked_out_once_per_text(tmp_path) -> None:
    repro = tmp_path / "repro.py"
    repro.write_text("def a(device, precision):\n    return {}\n\n\nVARIANTS = {'a': a}\n")
    first = declared.read_declared(repro)
    assert declared.read_declared(repro) is first  # the same text: worked out once
    repro.write_text(
        "def a(device, precision):\n    return {}\n\n\ndef b(device, precision):\n    return {}\n\n\nVARIANTS = {'a': a, 'b': b}\n"
    )
    assert set(declared.read_declared(repro).variants) == {"a", "b"}  # an edit is seen
    repro.write_text("VARIANTS = [\n")
    with pytest.raises(declared.DeclaredError):
        declared.read_declared(repro)
