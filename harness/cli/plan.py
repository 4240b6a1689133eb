"""`python -m harness plan`: a profile split into CI jobs by stored durations; with
``--budget``, the plan of one short window (the GPU box): phases, order, estimated minutes."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.options import machine_name, ranged
from harness.cli.run import add_budget, budget_config
from harness.cli.selection import add_selection, run_pipeline, selection_config
from harness.errors import InputError

__all__ = ["PlanCommand"]


class PlanCommand(Command):
    name = "plan"
    help = (
        "split a profile into CI jobs balanced by stored durations (--github: the job "
        "matrix); --budget: one window's plan, in order of value"
    )

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
        parser.add_argument(
            "--new-releases",
            action="store_true",
            help="ask the package index (through uv) for torch and lightning releases newer "
            "than matrix.yaml's and show the rows its rules would add; changes nothing",
        )
        parser.add_argument(
            "--write",
            action="store_true",
            help="--new-releases: add those rows to matrix.yaml (what the nightly does)",
        )
        add_budget(parser, order=False)
        parser.add_argument(
            "-j",
            "--jobs",
            type=ranged("jobs", int),
            default=None,
            help="--budget: parallel children (default: CPUs)",
        )
        parser.add_argument(
            "--machine",
            type=machine_name,
            default=None,
            help="--budget: whose stored records are done (with --resume)",
        )
        parser.add_argument(
            "--resume",
            action="store_true",
            help="--budget: leave out the jobs the machine's records hold",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.ci.fanout import PLAN_STEPS
        from harness.execute.steps import BUDGET_PLAN_STEPS

        if args.new_releases:
            return _new_releases(args, repo, console)
        if args.write:
            raise InputError("--write adds the rows --new-releases finds: give both")
        cfg = selection_config(args, repo, list_only=False)
        if args.budget is not None:
            budget_config(cfg, args)
            cfg.machine, cfg.resume = args.machine, args.resume
            if args.jobs is not None:
                cfg.jobs = args.jobs
            return run_pipeline(cfg, console, BUDGET_PLAN_STEPS)
        cfg.fan_out_shards = args.shards
        cfg.machine_prefix = args.machine_prefix
        cfg.github = args.github
        return run_pipeline(cfg, console, PLAN_STEPS)


def _new_releases(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.ci.releases import UvIndex, add_rows, describe_new_releases, find_new_releases
    from harness.spec.matrix import load_matrix

    path = repo / args.matrix
    matrix = load_matrix(path)
    found = find_new_releases(matrix, UvIndex())
    for line in describe_new_releases(found):
        console.print(line, markup=False, highlight=False)
    if args.write:
        added = add_rows(path, matrix, found.rows)
        said = ", ".join(f"torch {t}" for t in added) or "nothing"
        console.print(f"added to {path.name}: {said}", markup=False, highlight=False)
    return 0
