"""`python -m harness corrections`: the kept knowledge-base records' corrections as separate
proposals by kind, with a summary, outcome lines and what the knowledge base's own code must
confirm (harness/catalogue/kbcorrections.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["CorrectionsCommand"]

DEFAULT_DIR = Path("results") / "corrections"


class CorrectionsCommand(Command):
    name = "corrections"
    help = "write the kept knowledge-base records' corrections as proposals by kind"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-o",
            "--output",
            default=None,
            metavar="DIR",
            help=f"where to write the proposals, each laid out as the knowledge base's repository "
            f"(default: {DEFAULT_DIR})",
        )
        parser.add_argument("--domain", default=None, help="one domain only (pytorch, cuda, ...)")
        parser.add_argument(
            "--pages-url",
            default=os.environ.get("HARNESS_PAGES_URL") or None,
            metavar="URL",
            help="where results/ is published (http or https); each changed condition's sources "
            "then link its compatibility page (default: $HARNESS_PAGES_URL; none: no link)",
        )
        parser.add_argument(
            "--check", action="store_true", help="write nothing; fail if the files are stale"
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.kbcorrections import stale

        out_dir = Path(args.output) if args.output else repo / DEFAULT_DIR
        planned = _plan(args, repo, out_dir)
        _say_counts(planned, console)
        differ, extra = stale(planned, out_dir)
        if args.domain is not None:
            extra = []  # the other domains' files are not this run's to judge
        if args.check:
            return _checked(planned, differ, extra, out_dir, console)
        _write(planned, differ, out_dir)
        for rel in extra:
            console.print(f"[yellow]no longer written (remove it):[/] {escape(str(out_dir / rel))}")
        console.print(f"{len(differ)} of {len(planned.files)} files written under {out_dir}")
        return 0


def _plan(args: argparse.Namespace, repo: Path, out_dir: Path) -> Any:
    """The corrections of the committed records, every input checked first: the pages URL,
    the output folder, the domain asked for, every kept knowledge-base record."""
    from harness.catalogue.kbcorrections import plan_corrections, read_kept
    from harness.catalogue.kbrecord import _safe_url
    from harness.catalogue.msgsearch import load_results
    from harness.config import Config
    from harness.paths import check_output_folder
    from harness.spec.entries import load_entries
    from harness.spec.triage import find_triages
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store
    from harness.store.snapshot import cache_dir

    if args.pages_url is not None and not _safe_url(args.pages_url):
        raise InputError(f"--pages-url {args.pages_url!r}: a public http(s) URL")
    cfg = Config(repo=repo)
    if not args.check:
        # never through a link, never over a file, never into the project's records or
        # entries (results/corrections itself is this command's own folder)
        check_output_folder(out_dir, repo, allowed=(str(DEFAULT_DIR),))
    entries = load_entries(cfg.repros_dir)
    triages = find_triages(cfg.repros_dir)
    known = {t.path.parent.name for t in triages}
    if args.domain is not None and args.domain not in known:
        raise InputError(f"--domain {args.domain!r}: the domains are {', '.join(sorted(known))}")
    for e in entries:  # every kept record read and checked before anything is written
        if e.origin.get("record"):
            read_kept(e)
    table = load_latest(Store(cfg.records_dir), cache_dir(cfg.records_dir), update=not args.check)
    searched = load_results(cfg.repo / "results" / "msgsearch.json")["entries"]
    return plan_corrections(
        table, entries, triages, domain=args.domain, pages_url=args.pages_url, msgsearch=searched
    )


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"


def _say_counts(planned: Any, console: Console) -> None:
    changed, alone = planned.counts()
    for d in planned.domains:
        console.print(
            f"{d.name}: {len(d.corrected)} records with a proposal, {len(d.alone)} left alone"
        )
    console.print(f"fields changed: {_counted(changed)}")
    console.print(f"outcome lines: {planned.lines}")
    console.print(f"left alone: {_counted(alone)}")


def _checked(
    planned: Any, differ: list[str], extra: list[str], out_dir: Path, console: Console
) -> int:
    for rel in differ:
        console.print(f"[red]stale:[/] {escape(rel)}")
    for rel in extra:
        console.print(f"[red]not written by corrections:[/] {escape(rel)}")
    if differ or extra:
        console.print(
            f"{len(differ) + len(extra)} files under {out_dir} differ; run `python -m "
            "harness corrections` and commit them"
        )
        return 1
    console.print(f"{len(planned.files)} files under {out_dir} are up to date")
    return 0


def _write(planned: Any, differ: list[str], out_dir: Path) -> None:
    from harness.atomic import write_atomically
    from harness.paths import under

    for rel in differ:
        path = under(out_dir, rel)  # every part checked: never outside out_dir
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, planned.files[rel])
        except OSError as exc:
            raise InputError(
                f"{path}: cannot write: {exc.strerror or exc}; "
                f"{differ.index(rel)} of {len(differ)} files were written"
            ) from None
