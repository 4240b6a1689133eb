"""`python -m harness list`: a profile's cells, what rules exclude, and the jobs; runs nothing.
(The module is not called list.py: importing it would bind ``list`` in harness.cli.)"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.selection import add_selection, run_pipeline, selection_config

__all__ = ["ListCommand"]


class ListCommand(Command):
    name = "list"
    help = "show cells, exclusions and jobs of a profile"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_selection(parser)

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        return run_pipeline(selection_config(args, repo, list_only=True), console)
