"""`python -m harness envs {build,prune}`: a profile's environments built (and nothing run),
or the ones matrix.yaml no longer names removed."""

from __future__ import annotations

import argparse
import fnmatch
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from harness.cli.command import Command
from harness.config import Config
from harness.errors import InputError

if TYPE_CHECKING:
    from harness.spec.matrix import Matrix

__all__ = ["EnvsCommand"]


class EnvsCommand(Command):
    name = "envs"
    help = "target environments"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="envs_command", required=True)
        build = sub.add_parser(
            "build", help="build (or reuse) a profile's environments; run nothing"
        )
        build.add_argument(
            "--profile", default=None, help="matrix.yaml profile (default: its default)"
        )
        build.add_argument(
            "--env", action="append", default=[], metavar="GLOB", help="environment id filter"
        )
        build.add_argument("--matrix", default="matrix.yaml")
        build.add_argument(
            "--envs-dir", default=None, help="where environments live (default: .envs)"
        )
        prune = sub.add_parser(
            "prune",
            help="remove the environments matrix.yaml no longer names (any profile); shows what "
            "each held on its own (files hardlinked from uv's cache stay in the cache)",
        )
        prune.add_argument(
            "--dry-run", action="store_true", help="list what would go; remove nothing"
        )
        prune.add_argument("--matrix", default="matrix.yaml")
        prune.add_argument(
            "--envs-dir", default=None, help="where environments live (default: .envs)"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        if args.envs_command == "prune":
            return _prune(args, repo, console)
        return _build(args, repo, console)


def _prune(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.envs.backends import prune_environments
    from harness.spec.matrix import load_matrix

    cfg = Config(repo=repo, matrix_file=args.matrix)
    cfg.envs_root = args.envs_dir
    matrix = load_matrix(cfg.matrix_path)
    keep = {e.id for row in matrix.rows for e in row.environments()}
    keep |= _derived_in_use(matrix, cfg.repros_dir)
    removed = prune_environments(cfg.envs_dir, keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for p in removed:
        console.print(f"{verb} {p.path} ({p.bytes / 2**20:.0f} MiB of its own)")
    total = sum(p.bytes for p in removed)
    console.print(
        f"{len(removed)} environment(s) that {args.matrix} no longer names: {verb}, "
        f"{total / 2**30:.2f} GiB of their own; the others are kept in {cfg.envs_dir}. "
        "`uv cache prune` frees cache entries that no environment links to any more"
    )
    return 0


def _derived_in_use(matrix: Matrix, repros: Path) -> set[str]:
    """The derived environments (a variant's ``requires:``) some profile's plan runs in:
    matrix.yaml does not name them, the entries do; prune keeps them."""
    from harness.execute.plan import make_plan
    from harness.spec.entries import load_entries

    entries = load_entries(repros)
    used: set[str] = set()
    for name in matrix.profiles:
        plan = make_plan(matrix.expand(name), entries)
        used |= {job.env.id for job in plan.jobs if job.env.requires}
    return used


def _build(args: argparse.Namespace, repo: Path, console: Console) -> int:
    from harness.envs.backends import (
        STANDIN_VAR,
        EnvFailed,
        ExistingBackend,
        MatrixBackend,
        UvBackend,
    )
    from harness.spec.matrix import load_matrix

    cfg = Config(repo=repo, profile=args.profile, matrix_file=args.matrix)
    cfg.envs_root = args.envs_dir
    expansion = load_matrix(cfg.matrix_path).expand(cfg.profile)
    envs = [
        e
        for e in expansion.environments
        if not args.env or any(fnmatch.fnmatchcase(e.id, g) for g in args.env)
    ]
    if not envs:
        raise InputError(
            f"--env {' '.join(args.env)} matches no environment of profile {expansion.profile!r}"
        )
    standin = os.environ.get(STANDIN_VAR)
    backend = MatrixBackend(UvBackend(cfg.envs_dir, standin=standin), ExistingBackend(standin))
    failed = 0
    for env in envs:
        try:
            built = backend.ensure(env)
        except EnvFailed as exc:
            failed += 1
            first = str(exc).splitlines()[0] if str(exc) else ""
            console.print(f"failed {env.id}: {first}", markup=False)
            continue
        how = "reused" if built.reused else "built"
        console.print(
            f"{how:<7}{env.id} in {built.seconds:.1f} s: torch {built.probe.get('torch')}, "
            f"lightning {built.probe.get('lightning', built.probe.get('pytorch_lightning'))}",
            markup=False,
        )
    console.print(
        f"{len(envs) - failed} of {len(envs)} environments of profile {expansion.profile!r} "
        f"ready in {cfg.envs_dir}"
    )
    return 1 if failed else 0
