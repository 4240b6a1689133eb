"""`python -m harness report`: tables, HTML, JSON and write-back from the stored records."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.config import Config

__all__ = ["ReportCommand"]


class ReportCommand(Command):
    name = "report"
    help = "render tables, HTML, JSON and write-back from stored records"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="write nothing; fail if outputs are stale"
        )
        parser.add_argument(
            "--no-cache",
            action="store_true",
            help="read every record file in full and render every entry (results/.cache is "
            "neither read nor written)",
        )
        parser.add_argument(
            "--since",
            metavar="REV",
            default=None,
            help="index.html opens with the cells changed since git revision REV's records",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.report.pipeline import render_reports

        return render_reports(
            Config(repo=repo), console, check=args.check, since=args.since, cache=not args.no_cache
        )
