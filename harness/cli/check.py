"""`python -m harness check [ENTRY...]`: validate entries without building anything."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["CheckCommand"]


class CheckCommand(Command):
    name = "check"
    help = "validate entries (variants both ways, signatures, claims); builds nothing"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "entries", nargs="*", metavar="ENTRY", help="entry id globs (default: all)"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.check import check_entries

        results = check_entries(repo / "repros", args.entries)
        if not results:
            raise InputError(
                f"no entry under {repo / 'repros'} matches {' '.join(args.entries) or '*'}"
            )
        for r in results:
            name = r.entry.id if r.entry else r.dir.relative_to(repo / "repros").as_posix()
            if r.ok:
                assert r.entry is not None
                n = len(r.entry.variants)
                written = sum(v.written for v in r.entry.variants)
                console.print(f"ok     {name}: {written}/{n} variants written")
            else:
                console.print(f"[bold red]FAILED[/] {name}")
            for e in r.errors:
                console.print(f"  error: {e}", markup=False)
            for t in r.todos:
                console.print(f"  to do: {t}", markup=False)
        failed = [r for r in results if not r.ok]
        console.print(f"{len(results)} entries checked, {len(failed)} with errors")
        return 2 if failed else 0
