"""`python -m harness run`: build or reuse the environments and run the matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.options import machine_name, ranged
from harness.cli.selection import add_selection, run_pipeline, selection_config
from harness.config import Config
from harness.errors import InputError

__all__ = ["RunCommand", "add_budget", "budget_config"]


class RunCommand(Command):
    name = "run"
    help = "build/reuse environments and run the matrix"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_selection(parser)
        parser.add_argument(
            "--resume", action="store_true", help="skip jobs whose records are stored"
        )
        parser.add_argument(
            "--list", action="store_true", help="show cells, exclusions and jobs; run nothing"
        )
        parser.add_argument(
            "-j",
            "--jobs",
            type=ranged("jobs", int),
            default=None,
            help="parallel children (default: CPUs)",
        )
        parser.add_argument(
            "--timeout",
            type=ranged("timeout_s", float),
            default=None,
            help="seconds per run (default: matrix.yaml)",
        )
        parser.add_argument(
            "--memory-limit-mb",
            type=ranged("memory_limit_mb", int),
            default=None,
            help="per child (default: matrix.yaml)",
        )
        parser.add_argument(
            "--machine",
            type=machine_name,
            default=None,
            help="record file name (default: host name and machine id, e.g. vm-0090f397)",
        )
        parser.add_argument(
            "--envs-dir", default=None, help="where environments live (default: .envs)"
        )
        parser.add_argument("--no-report", action="store_true", help="store records only")
        parser.add_argument(
            "--keep-going",
            action="store_true",
            help="on a full disk, record env_failed (with the reason) for what cannot run and "
            "go on with the rest, instead of stopping; --resume retries env_failed jobs",
        )
        parser.add_argument(
            "--isolation",
            choices=("fork", "process"),
            default=None,
            help="fork: a warm worker per environment imports torch once and forks a child "
            "per job; process: a fresh interpreter per job (default: fork where available)",
        )

        add_budget(parser)
        parser.add_argument(
            "--settle",
            type=ranged("budget_s", float),
            default=None,
            metavar="SECONDS",
            help="after the plan's jobs, extra trials for flaky cells and for claims whose "
            "interval straddles the decision, until decided or SECONDS (and --budget) end",
        )
        parser.add_argument(
            "--settle-only",
            action="store_true",
            help="with --settle: run none of the plan's jobs, only the extra trials the "
            "stored records (every machine's) leave open, e.g. after a merge",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        cfg = selection_config(args, repo, list_only=args.list)
        cfg.resume = args.resume
        cfg.no_report = args.no_report
        cfg.machine = args.machine
        cfg.envs_root = args.envs_dir
        cfg.timeout_s = args.timeout
        cfg.memory_limit_mb = args.memory_limit_mb
        cfg.isolation = args.isolation
        cfg.keep_going = args.keep_going
        if args.jobs is not None:
            cfg.jobs = args.jobs
        budget_config(cfg, args)
        cfg.settle_s = args.settle
        if args.settle_only and args.settle is None:
            raise InputError("--settle-only needs --settle SECONDS")
        cfg.settle_only = args.settle_only
        return run_pipeline(cfg, console)


def add_budget(parser: argparse.ArgumentParser, order: bool = True) -> None:
    """The options of a short window (harness/execute/budget.py), shared with plan."""
    from harness.config import CUDA_START_S

    if order:
        parser.add_argument(
            "--order",
            choices=("plan", "value"),
            default="plan",
            help="plan: environment, cell, entry, variant, trial; value: each entry's "
            "baselines (one trial), then one trial of every other variant, then the other "
            "trials (implied by --budget)",
        )
    parser.add_argument(
        "--budget",
        type=ranged("budget_s", float),
        default=None,
        metavar="SECONDS",
        help="run (plan: show) only the jobs, in --order value, that the stored CPU "
        "durations say fit SECONDS on -j slots; the rest is the next call's (--resume)",
    )
    parser.add_argument(
        "--cuda-start-s",
        type=ranged("cuda_start_s", float),
        default=None,
        metavar="SECONDS",
        help=f"the estimated CUDA context start of each child on a cuda cell (default "
        f"{CUDA_START_S:g})",
    )


def budget_config(cfg: Config, args: argparse.Namespace) -> None:
    cfg.order = getattr(args, "order", "value")
    cfg.budget_s = args.budget
    cfg.cuda_start_s = args.cuda_start_s
