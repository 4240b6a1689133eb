"""The options run, list and plan share (profile, filters, shard, matrix, interpreter,
trials), the Config they make, and the run of the step chain they end in."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from harness.cli.options import ranged
from harness.config import Config
from harness.errors import InputError

if TYPE_CHECKING:
    from harness.execute.steps import Step

__all__ = ["add_selection", "run_pipeline", "selection_config"]


def add_selection(p: argparse.ArgumentParser, shard: bool = True) -> None:
    p.add_argument("--profile", help="matrix.yaml profile (default: the file's default_profile)")
    p.add_argument("--entry", action="append", default=[], metavar="GLOB", help="entry id filter")
    p.add_argument(
        "--variant", action="append", default=[], metavar="GLOB", help="variant name filter"
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="GLOB",
        help="environment id filter, e.g. 'py3.10-torch1.12*'",
    )
    p.add_argument("--cell", action="append", default=[], metavar="GLOB", help="cell id filter")
    if shard:
        p.add_argument(
            "--shard",
            default="1/1",
            help="run shard K of N (whole environments, balanced by job count)",
        )
    p.add_argument("--matrix", default="matrix.yaml", help="matrix file, relative to the repo")
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="run in this existing interpreter (its torch and lightning; nothing installed) "
        "instead of the matrix's environments; the profile's devices and precisions apply",
    )
    p.add_argument(
        "--trials",
        type=ranged("trials", int),
        default=None,
        help="trials per cell (default: the profile's); with --resume, adds the missing ones",
    )


def selection_config(args: argparse.Namespace, repo: Path, list_only: bool) -> Config:
    """The Config of add_selection's options (plan has no --shard: all of it, 1/1)."""
    from harness.execute.plan import parse_shard

    try:
        shard = parse_shard(getattr(args, "shard", "1/1"))
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    return Config(
        repo=repo,
        profile=args.profile,
        entries=tuple(args.entry),
        variants=tuple(args.variant),
        envs=tuple(args.env),
        cells=tuple(args.cell),
        shard=shard,
        matrix_file=args.matrix,
        trials=args.trials,
        python=args.python,
        list_only=list_only,
    )


def run_pipeline(cfg: Config, console: Console, steps: tuple[Step, ...] | None = None) -> int:
    """The step chain (default: the run's, harness/execute/steps.py); Ctrl-C exits 130."""
    from harness.execute.steps import STEPS, RunState, run_steps

    try:
        return run_steps(RunState(config=cfg, console=console), steps or STEPS)
    except KeyboardInterrupt:
        console.print("[bold yellow]interrupted[/]")
        return 130
