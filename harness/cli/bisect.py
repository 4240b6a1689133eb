"""`python -m harness bisect ENTRY ...`: the release where one cell's outcome changes."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.cli.options import builds_count, ranged
from harness.config import Config
from harness.domain import version_option

__all__ = ["BisectCommand"]


class BisectCommand(Command):
    name = "bisect"
    help = "the release where one cell's outcome changes (binary search, real runs)"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("entry", metavar="ENTRY")
        parser.add_argument("--variant", required=True)
        parser.add_argument("--device", required=True, choices=["cpu", "cuda"])
        parser.add_argument("--precision", required=True, choices=["fp32", "fp16", "bf16"])
        axis = parser.add_mutually_exclusive_group(required=True)
        axis.add_argument(
            "--torch", metavar="A..B", type=version_option, help="bisect torch releases from A to B"
        )
        axis.add_argument(
            "--lightning", metavar="A..B", type=version_option, help="bisect lightning releases"
        )
        parser.add_argument(
            "--python", default=None, help="interpreter (default: the matrix's pairing)"
        )
        parser.add_argument(
            "--with-lightning",
            default=None,
            type=version_option,
            help="hold lightning at this release",
        )
        parser.add_argument(
            "--with-torch", default=None, type=version_option, help="hold torch at this release"
        )
        parser.add_argument(
            "--machine", default=None, help="record file name (default: host name and machine id)"
        )
        parser.add_argument("--envs-dir", default=None, help="where environments live")
        parser.add_argument("--matrix", default="matrix.yaml")
        parser.add_argument(
            "--timeout", type=ranged("timeout_s", float), default=None, help="seconds per run"
        )
        parser.add_argument(
            "--max-builds",
            type=builds_count,
            default=None,
            metavar="N",
            help="build at most N environments; versions beyond are left unmeasured and said",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.bisect import BisectRequest, run_bisect

        request = BisectRequest(
            entry=args.entry,
            variant=args.variant,
            device=args.device,
            precision=args.precision,
            axis="torch" if args.torch else "lightning",
            range=args.torch or args.lightning,
            python=args.python,
            with_lightning=args.with_lightning,
            with_torch=args.with_torch,
            max_builds=args.max_builds,
        )
        cfg = Config(repo=repo, matrix_file=args.matrix)
        cfg.machine = args.machine
        cfg.envs_root = args.envs_dir
        cfg.timeout_s = args.timeout
        return run_bisect(request, cfg, console)
