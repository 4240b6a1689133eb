"""`python -m harness try SCRIPT`: a script, unmodified, across releases."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.options import builds_count, machine_name, ranged
from harness.config import Config

__all__ = ["TryCommand"]


class TryCommand(Command):
    name = "try"
    help = "run a script unmodified across releases: a table of outcomes, --bisect the changes"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("script", metavar="SCRIPT", help="a Python script, run as-is")
        parser.add_argument(
            "--profile", default=None, help="whose rows to run (default: matrix.yaml's default)"
        )
        parser.add_argument(
            "--torch", metavar="A..B", default=None, help="the matrix's torch rows in A..B"
        )
        parser.add_argument(
            "--lightning", metavar="A..B", default=None, help="the matrix's lightning in A..B"
        )
        parser.add_argument(
            "--env", action="append", default=[], metavar="GLOB", help="environment id filter"
        )
        parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
        parser.add_argument(
            "--with",
            dest="requires",
            action="append",
            default=[],
            metavar="REQ",
            help="a requirement added to every environment, as entry.yaml's requires: "
            "derives one (e.g. 'pydantic<2'); not torch or lightning",
        )
        parser.add_argument(
            "--expect",
            metavar="REGEX",
            default=None,
            help='the error of interest, searched in "Type: message" (a bounded search)',
        )
        parser.add_argument(
            "--bisect",
            action="store_true",
            help="between neighbouring rows whose outcomes differ, the release where it changes",
        )
        parser.add_argument(
            "--max-builds",
            type=builds_count,
            default=None,
            metavar="N",
            help="build at most N environments (the rest are said and left unmeasured)",
        )
        parser.add_argument(
            "--store", default=None, help="where its runs are kept (default: results/try/)"
        )
        parser.add_argument(
            "--rerun", action="store_true", help="run again what the store already holds"
        )
        parser.add_argument(
            "--save-as",
            default=None,
            metavar="ID",
            help="scaffold repros/ID/ from the script (its baseline) and what it measured",
        )
        parser.add_argument("--envs-dir", default=None, help="where environments live")
        parser.add_argument("--matrix", default="matrix.yaml")
        parser.add_argument(
            "--timeout", type=ranged("timeout_s", float), default=None, help="seconds per run"
        )
        parser.add_argument("--memory-limit-mb", type=ranged("memory_limit_mb", int), default=None)
        parser.add_argument(
            "--machine", type=machine_name, default=None, help="the machine its records name"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.trybisect import bisect_rows
        from harness.catalogue.trysave import save_as
        from harness.catalogue.tryscript import TryRequest, measure, summary

        request = TryRequest(
            script=args.script,
            profile=args.profile,
            torch=args.torch,
            lightning=args.lightning,
            envs=tuple(args.env),
            device=args.device,
            expect=args.expect,
            bisect=args.bisect,
            store=args.store,
            rerun=args.rerun,
            max_builds=args.max_builds,
            save_as=args.save_as,
            requires=tuple(args.requires),
        )
        cfg = Config(repo=repo, matrix_file=args.matrix)
        cfg.machine = args.machine
        cfg.envs_root = args.envs_dir
        cfg.timeout_s = args.timeout
        cfg.memory_limit_mb = args.memory_limit_mb
        trial = measure(request, cfg, console)
        if request.bisect:
            bisect_rows(trial)
        if request.save_as:
            save_as(trial)
        trial.say(summary(trial))
        return 0
