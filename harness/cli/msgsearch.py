"""`python -m harness msgsearch [ENTRY...]`: search every built environment for every
documented message's fixed parts and store the answers in results/msgsearch.json."""

from __future__ import annotations

import argparse
import fnmatch
import os
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["MsgSearchCommand"]


class MsgSearchCommand(Command):
    name = "msgsearch"
    help = (
        "does each documented message exist in the installed torch/lightning? "
        "(sources and compiled libraries; results/msgsearch.json)"
    )

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "entry", nargs="*", metavar="ENTRY", help="entry id globs (default: all)"
        )
        parser.add_argument(
            "--env", action="append", default=[], metavar="GLOB", help="environment id filter"
        )
        parser.add_argument(
            "--envs-dir",
            default=None,
            help="where environments live (default: HARNESS_ENVS_DIR or .envs)",
        )
        parser.add_argument(
            "--profile",
            default=None,
            help="only the environments of this matrix.yaml profile (default: every one built)",
        )
        parser.add_argument("--matrix", default="matrix.yaml", help="with --profile")
        parser.add_argument(
            "--out", default="results/msgsearch.json", help="result file, relative to the repo"
        )
        parser.add_argument(
            "--cache",
            default="results/.cache/msgsearch.sqlite",
            help="the files' text kept between runs, keyed by file identity (relative to the "
            "repo; default: %(default)s)",
        )
        parser.add_argument(
            "--no-cache", action="store_true", help="read every file, keep nothing between runs"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.msgsearch import (
            TextStore,
            documented_messages,
            load_results,
            merge_results,
            search_env,
            write_results,
        )

        messages = documented_messages(repo / "repros")
        if args.entry:
            messages = tuple(
                m for m in messages if any(fnmatch.fnmatchcase(m.entry, g) for g in args.entry)
            )
            if not messages:
                raise InputError(f"no documented message matches {list(args.entry)}")
        envs = _built_envs(
            Path(args.envs_dir or os.environ.get("HARNESS_ENVS_DIR") or repo / ".envs"),
            args.env,
            _profile_envs(repo, args.matrix, args.profile) if args.profile else None,
        )
        parts = sorted({p for m in messages for p in m.parts})
        cache: dict[tuple[int, int], set[bytes]] = {}
        store = None if args.no_cache else TextStore(repo / args.cache)
        searches = []
        began = time.monotonic()
        try:
            for env in envs:
                started = time.monotonic()
                s = search_env(env, parts, cache, store)
                searches.append(s)
                console.print(
                    f"{env.name}: {s.files} files, {s.bytes / 1e9:.2f} GB, {s.read} read "
                    f"({s.read_bytes / 1e9:.2f} GB), "
                    f"{sum(v is not None for v in s.hits.values())}/{len(parts)} fixed parts "
                    f"found ({time.monotonic() - started:.1f} s)"
                )
        finally:
            if store is not None:
                store.close()
        console.print(
            f"{len(messages)} messages ({len(parts)} fixed parts) in {len(envs)} environments: "
            f"{sum(s.read for s in searches)} files read "
            f"({sum(s.read_bytes for s in searches) / 1e9:.2f} GB) "
            f"in {time.monotonic() - began:.1f} s"
        )
        path = repo / args.out
        try:
            results = merge_results(load_results(path), messages, searches)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        write_results(path, results)
        width = max(len(m.entry) for m in messages)
        for m in messages:
            answers = [results["entries"][m.entry]["envs"][s.env]["found"] for s in searches]
            summary = ", ".join(
                f"{a} in {answers.count(a)}" for a in ("all", "some", "none") if a in answers
            )
            console.print(f"{m.entry.ljust(width)}  {summary}")
        console.print(f"wrote {path}")
        return 0


def _profile_envs(repo: Path, matrix: str, profile: str) -> set[str]:
    """The environment ids of a matrix.yaml profile."""
    from harness.config import Config
    from harness.spec.matrix import load_matrix

    cfg = Config(repo=repo, profile=profile, matrix_file=matrix)
    return {e.id for e in load_matrix(cfg.matrix_path).expand(cfg.profile).environments}


def _built_envs(root: Path, globs: Sequence[str], only: set[str] | None = None) -> list[Path]:
    """The environments under ``root`` that have a site-packages and match ``globs``
    (and, given ``only``, are named there)."""
    from harness.catalogue.msgsearch import site_packages

    envs = sorted(
        p
        for p in (root.iterdir() if root.is_dir() else ())
        if p.is_dir()
        and (only is None or p.name in only)
        and site_packages(p) is not None
        and (not globs or any(fnmatch.fnmatchcase(p.name, g) for g in globs))
    )
    if not envs:
        raise InputError(
            f"no environment under {root}"
            + (f" matches {list(globs)}" if globs else "")
            + (" of the profile" if only is not None else "")
        )
    if only is not None and len(envs) < len(only) and not globs:
        missing = sorted(only - {p.name for p in envs})
        raise InputError(
            f"{len(missing)} environment(s) of the profile not built under {root}: "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
    return envs
