"""`python -m harness merge SOURCE...`: other machines' record files into results/records/."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command
from harness.errors import HarnessError, InputError

__all__ = ["MergeCommand"]


class MergeCommand(Command):
    name = "merge"
    help = "add other machines' record files to results/records/"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("sources", nargs="+", help="record files (.jsonl) or folders of them")

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.store.jsonl import Store, StoreError

        missing = [s for s in args.sources if not Path(s).exists()]
        if missing:  # (one line names them all)
            raise InputError(f"merge: {', '.join(missing)}: no such file or folder")
        store = Store(repo / "results" / "records")
        try:
            result = store.merge(args.sources)
        except StoreError as exc:  # a read-only or full store: named, as run names it
            raise HarnessError(
                None,
                None,
                f"{exc} (merge again once it can be written: what is stored is skipped)",
            ) from exc
        for w in (*result.warnings, *store.quarantine(result.refused)):
            console.print(f"[yellow]warning:[/] {escape(w)}")
        console.print(
            f"merged: {result.added} records added, {result.duplicates} already present, "
            f"{result.conflicts} conflicting"
        )
        if result.refused:
            raise InputError(
                f"{len(result.refused)} line(s) refused, copied with the reason to "
                f"{store.quarantine_dir}; fix them at the source and merge again"
            )
        if result.conflicts:
            console.print(
                f"[bold red]error:[/] {result.conflicts} record(s) conflict with stored records "
                "of the same run (named above) and were kept out"
            )
            return 1
        return 0
