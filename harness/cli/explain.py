"""`python -m harness explain [FILE | -]`: which entries a pasted traceback or message is, and
for the versions installed what each workaround and dead end did in the runs (the work is in
harness/catalogue/explain.py and explain_terminal.py, imported when the command runs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["ExplainCommand", "add_arguments"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="the traceback or error message (default: read from stdin)",
    )
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="read torch's and lightning's versions from this interpreter (default: this "
        "one if it has torch, else the python3/python on PATH that has it)",
    )
    p.add_argument("--torch", default=None, metavar="V", help="torch release, e.g. 2.5.1")
    p.add_argument(
        "--lightning", default=None, metavar="V", help="lightning release or series: 2.5.6, 2.5.x"
    )
    p.add_argument("--json", action="store_true", help="print the answer as JSON, for tools")


class ExplainCommand(Command):
    name = "explain"
    help = "which entries an error is, and what works for your versions"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        # imported here: the CLI starts without DuckDB (run --python in a bare GPU stack)
        from harness.catalogue.explain import explain
        from harness.catalogue.explain_terminal import _harness_command, find_versions, render
        from harness.spec.entries import load_entries
        from harness.store.columnar import load_latest
        from harness.store.jsonl import Store
        from harness.store.snapshot import cache_dir

        try:
            versions, how = find_versions(args)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        try:
            if args.file == "-":
                if sys.stdin.isatty():
                    Console(stderr=True).print("paste the traceback or message, then Ctrl-D")
                text = sys.stdin.read()
            else:
                text = Path(args.file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"{args.file}: cannot read: {exc}") from None
        if not text.strip():
            raise InputError("no error text given (a file, or stdin)")
        entries = load_entries(repo / "repros")
        records = repo / "results" / "records"
        table = load_latest(Store(records), cache_dir(records))
        for warning in table.warnings:
            console.print(f"[yellow]warning:[/] {escape(str(warning))}")
        x = explain(text, versions, entries, table, harness=_harness_command(repo))
        if args.json:
            sys.stdout.write(json.dumps({**x.to_dict(), "versions_from": how}, indent=1) + "\n")
        else:
            render(x, how, console)
        return 0 if x.answers and not x.guessed else 1
