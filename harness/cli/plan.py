"""`python -m harness plan`: a profile split into CI jobs by stored durations."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.options import ranged
from harness.cli.selection import add_selection, run_pipeline, selection_config

__all__ = ["PlanCommand"]


class PlanCommand(Command):
    name = "plan"
    help = "split a profile into CI jobs balanced by stored durations (--github: the job matrix)"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_selection(parser, shard=False)
        parser.add_argument(
            "--github", action="store_true", help="print the GitHub Actions matrix (one JSON line)"
        )
        parser.add_argument(
            "--shards",
            type=ranged("shards", int),
            default=4,
            help="CI jobs to split into (default 4)",
        )
        parser.add_argument(
            "--machine-prefix",
            default=None,
            help="machine names are PREFIX-1..N (default: ci-<profile>)",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.ci.fanout import PLAN_STEPS

        cfg = selection_config(args, repo, list_only=False)
        cfg.fan_out_shards = args.shards
        cfg.machine_prefix = args.machine_prefix
        cfg.github = args.github
        return run_pipeline(cfg, console, PLAN_STEPS)
