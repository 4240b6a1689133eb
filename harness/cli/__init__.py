"""The command line: one module per command, the table of commands, and the one error path
(a HarnessError becomes "error: file:line: what is wrong" and exit 2). May import every stage."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from harness.cli.bisect import BisectCommand
from harness.cli.check import CheckCommand
from harness.cli.command import Command
from harness.cli.corrections import CorrectionsCommand
from harness.cli.diff import DiffCommand
from harness.cli.envs import EnvsCommand
from harness.cli.explain import ExplainCommand
from harness.cli.export import ExportCommand
from harness.cli.listing import ListCommand
from harness.cli.merge import MergeCommand
from harness.cli.msgsearch import MsgSearchCommand
from harness.cli.new import NewCommand
from harness.cli.nightly import NightlyCommand
from harness.cli.plan import PlanCommand
from harness.cli.report import ReportCommand
from harness.cli.run import RunCommand
from harness.cli.toxini import ToxIniCommand
from harness.cli.trycmd import TryCommand
from harness.errors import HarnessError, InputError

__all__ = ["COMMANDS", "DESCRIPTION", "build_parser", "main", "print_error"]


def _summary() -> str:
    return "Command line: python -m harness {" + ",".join(c.name for c in COMMANDS) + "} ..."


# the commands, in the order `--help` lists them
COMMANDS: tuple[type[Command], ...] = (
    RunCommand,
    ListCommand,
    PlanCommand,
    ReportCommand,
    DiffCommand,
    NightlyCommand,
    ToxIniCommand,
    MsgSearchCommand,
    MergeCommand,
    NewCommand,
    CheckCommand,
    ExportCommand,
    BisectCommand,
    EnvsCommand,
    ExplainCommand,
    CorrectionsCommand,
    TryCommand,
)

# --help's summary names every command of the table, in its order
DESCRIPTION = _summary()


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="harness", description=DESCRIPTION)
    ap.add_argument("--repo", default=".", help="project root (matrix.yaml, repros/, results/)")
    sub = ap.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.name, help=command.help))
    return ap


def print_error(console: Console, exc: HarnessError) -> int:
    """The one error path: "error: " and the problem, never read as markup; exit 2."""
    console.print(Text.assemble(("error:", "bold red"), " ", str(exc)))
    return 2


def _project_root(args: argparse.Namespace) -> Path:
    """--repo as a folder, after the paths every command trusts are checked."""
    repo = Path(args.repo).resolve()
    if not repo.is_dir():
        raise InputError(
            f"--repo {args.repo}: no such folder; name the project root (the folder with "
            "matrix.yaml, repros/ and results/)"
        )
    envs_dir = getattr(args, "envs_dir", None)
    if envs_dir and Path(envs_dir).exists() and not Path(envs_dir).is_dir():
        raise InputError(f"--envs-dir {envs_dir} is a file; name a folder")
    return repo


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # soft_wrap: a message is never broken into lines (a file:line stays greppable in CI logs);
    # highlight off: no colour guessed into paths and numbers, so no print() repeats it
    console = Console(stderr=False, highlight=False, soft_wrap=True)
    by_name = {command.name: command for command in COMMANDS}
    try:
        return by_name[args.command].run(args, _project_root(args), console)
    except HarnessError as exc:
        return print_error(console, exc)
