"""`python -m harness check [ENTRY...]`: validate entries without building anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from harness.cli.command import Command
from harness.errors import InputError

if TYPE_CHECKING:
    from harness.spec.entries import Entry

__all__ = ["CheckCommand"]


class CheckCommand(Command):
    name = "check"
    help = "validate entries (variants both ways, signatures, claims); builds nothing"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "entries", nargs="*", metavar="ENTRY", help="entry id globs (default: all)"
        )
        parser.add_argument(
            "--smells",
            action="store_true",
            help="also list what the stored records say of each reproducer (a postcondition "
            "that never fails, a variant that does what the control does, ...); exit 1 while "
            "one is neither fixed nor explained in entry.yaml (smells:)",
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
        if failed:
            return 2
        if args.smells:
            return _smells([r.entry for r in results if r.entry is not None], repo, console)
        return 0


def _smells(entries: list[Entry], repo: Path, console: Console) -> int:
    """The smells of ``entries`` in the stored records; 1 while one is unexplained."""
    from harness.catalogue.check import smell_reports
    from harness.config import Config
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store
    from harness.store.snapshot import cache_dir

    records_dir = Config(repo=repo).records_dir
    loaded = load_latest(Store(records_dir), cache_dir(records_dir), update=False)
    reports = smell_reports(entries, loaded.records())
    for report in reports:
        n, open_ = len(report.smells), len(report.unexplained)
        state = (
            "clean"
            if not n
            else f"{_count_smells(n)}, {open_} unexplained"
            if open_
            else f"{_count_smells(n)}, explained"
        )
        console.print(f"smells {report.entry.id}: {state}", markup=False)
        for s in report.smells:
            if s.explained is None:
                console.print(f"  smell: {s.where}: {s.kind}: {s.detail}", markup=False)
            else:
                console.print(f"  explained: {s.where}: {s.kind}: {s.explained}", markup=False)
        for stale in report.stale:
            console.print(
                f"  to do: entry.yaml explains {stale}, which the records no longer show",
                markup=False,
            )
    total = sum(len(r.smells) for r in reports)
    unexplained = sum(len(r.unexplained) for r in reports)
    console.print(
        f"{_count_smells(total)} in {sum(1 for r in reports if r.smells)} of {len(reports)} entries, "
        f"{unexplained} unexplained (fix the reproducer, or say why in entry.yaml smells:)"
    )
    return 1 if unexplained else 0


def _count_smells(n: int) -> str:
    return f"{n} smell" if n == 1 else f"{n} smells"
