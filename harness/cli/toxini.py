"""`python -m harness tox-ini`: tox.ini written from matrix.yaml, or checked against it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command

__all__ = ["ToxIniCommand"]


class ToxIniCommand(Command):
    name = "tox-ini"
    help = "write tox.ini from matrix.yaml (one tox env per environment)"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="write nothing; fail if tox.ini differs"
        )
        parser.add_argument(
            "--matrix", default="matrix.yaml", help="matrix file, relative to the repo"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.ci.toxini import TOX_INI, check_tox_ini, render_tox_ini
        from harness.envs.backends import STANDIN_VAR
        from harness.spec.matrix import load_matrix

        matrix = load_matrix(repo / args.matrix)
        standin = os.environ.get(STANDIN_VAR)
        if not args.check:
            (repo / TOX_INI).write_text(render_tox_ini(matrix, standin), encoding="utf-8")
            console.print(f"wrote {repo / TOX_INI}")
            return 0
        problem = check_tox_ini(repo, matrix, standin)
        if problem:
            console.print(f"[bold red]stale:[/] {escape(str(problem))}")
            console.print("run `python -m harness tox-ini` and commit the result")
            return 1
        console.print(f"{TOX_INI} is up to date with {args.matrix}")
        return 0
