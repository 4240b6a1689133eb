"""docs/reference/cli.md is what the parser generates (scripts/cli_docs.py rewrites it)."""

from __future__ import annotations

import argparse
import importlib.util

from harness.cli import build_parser
from harness.cli.docs import REFERENCE, reference
from tests.paths import REPO


def test_the_committed_reference_is_what_the_parser_generates() -> None:
    committed = (REPO / REFERENCE).read_text(encoding="utf-8")
    assert committed == reference(), (
        f"{REFERENCE} is stale: run `python scripts/cli_docs.py` and commit it"
    )


def test_every_option_and_command_is_in_the_reference() -> None:
    text = reference()

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    assert f"## {prefix} {name}\n" in text
                    walk(sub, f"{prefix} {name}")
            for option in action.option_strings:
                assert option in text, option

    walk(build_parser(), "harness")


def test_an_option_added_to_the_parser_changes_the_reference() -> None:
    parser = build_parser()
    before = reference(parser)
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["list"].add_argument("--colour", default="auto", help="when to colour")
    after = reference(parser)
    assert after != before
    assert "| `--colour COLOUR` | `auto` | when to colour |" in after


def test_the_script_checks_the_committed_file() -> None:
    spec = importlib.util.spec_from_file_location("cli_docs", REPO / "scripts" / "cli_docs.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0
