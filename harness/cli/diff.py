"""`python -m harness diff OLD NEW`: the cells whose outcome changed between two stores."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command
from harness.cli.options import ranged

__all__ = ["DiffCommand"]


class DiffCommand(Command):
    name = "diff"
    help = "cells whose outcome changed between two record stores, machines or git revisions"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        side = "record folder or file, or a git revision (REV, REV:path)"
        parser.add_argument("old", help=side)
        parser.add_argument("new", help=side)
        parser.add_argument(
            "--machine", default=None, help="one machine's records (name or id), both sides"
        )
        parser.add_argument("--old-machine", default=None, help="one machine's records in OLD")
        parser.add_argument("--new-machine", default=None, help="one machine's records in NEW")
        parser.add_argument(
            "--limit",
            type=ranged("lines", int),
            default=50,
            help="lines per category (default 50)",
        )
        parser.add_argument(
            "--exit-code", action="store_true", help="exit 1 when some cell changed (like git diff)"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.aggregate.diff import diff_records
        from harness.ci.diff import format_diff, load_side
        from harness.spec.entries import load_entries

        entries = load_entries(repo / "repros")
        old = load_side(args.old, repo, args.old_machine or args.machine, entries)
        new = load_side(args.new, repo, args.new_machine or args.machine, entries)
        for w in (*old.warnings, *new.warnings):
            console.print(f"[yellow]warning:[/] {escape(w)}")
        result = diff_records(old, new)
        for line in format_diff(result, limit=max(1, args.limit)):
            console.print(line, markup=False)
        return 1 if args.exit_code and (result.changes or result.only_new) else 0
