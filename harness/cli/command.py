"""What every command is: a name, a help line, its arguments and a run that returns the exit
code. Problems in what the user wrote are raised as HarnessError, never printed here."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import ClassVar

from rich.console import Console

__all__ = ["Command"]


class Command:
    """One subcommand (asv's ``commands/`` shape): ``harness.cli.COMMANDS`` lists them."""

    name: ClassVar[str]
    help: ClassVar[str]

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add this command's options and positionals to its subparser."""

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        raise NotImplementedError
