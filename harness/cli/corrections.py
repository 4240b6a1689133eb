"""`python -m harness corrections`: the kept knowledge-base records' corrections as separate
proposals by kind, with a summary, outcome lines and what the knowledge base's own code must
confirm (harness/catalogue/kbcorrections.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

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
        from harness.atomic import write_atomically
        from harness.catalogue.kbcorrections import plan_corrections, read_kept, stale
        from harness.catalogue.kbrecord import _safe_url
        from harness.config import Config
        from harness.spec.entries import load_entries
        from harness.spec.triage import find_triages
        from harness.store.columnar import load_latest
        from harness.store.jsonl import Store
        from harness.store.snapshot import cache_dir

        if args.pages_url is not None and not _safe_url(args.pages_url):
            raise InputError(f"--pages-url {args.pages_url!r}: a public http(s) URL")
        from harness.paths import check_output_folder, under

        cfg = Config(repo=repo)
        out_dir = Path(args.output) if args.output else repo / DEFAULT_DIR
        if not args.check:
            # never through a link, never over a file, never into the project's records or
            # entries (results/corrections itself is this command's own folder)
            check_output_folder(out_dir, repo, allowed=(str(DEFAULT_DIR),))
        entries = load_entries(cfg.repros_dir)
        triages = find_triages(cfg.repros_dir)
        known = {t.path.parent.name for t in triages}
        if args.domain is not None and args.domain not in known:
            raise InputError(
                f"--domain {args.domain!r}: the domains are {', '.join(sorted(known))}"
            )
        for e in entries:  # every kept record read and checked before anything is written
            if e.origin.get("record"):
                read_kept(e)
        store = Store(cfg.records_dir)
        table = load_latest(store, cache_dir(cfg.records_dir), update=not args.check)
        from harness.catalogue.msgsearch import load_results

        searched = load_results(cfg.repo / "results" / "msgsearch.json")["entries"]
        planned = plan_corrections(
            table,
            entries,
            triages,
            domain=args.domain,
            pages_url=args.pages_url,
            msgsearch=searched,
        )
        changed, alone = planned.counts()
        for d in planned.domains:
            console.print(
                f"{d.name}: {len(d.corrected)} records with a proposal, {len(d.alone)} left alone"
            )
        console.print(
            "fields changed: "
            + (
                ", ".join(f"{k} {n}" for k, n in sorted(changed.items(), key=lambda kv: -kv[1]))
                or "none"
            )
        )
        console.print(f"outcome lines: {planned.lines}")
        console.print(
            "left alone: "
            + (
                ", ".join(f"{k} {n}" for k, n in sorted(alone.items(), key=lambda kv: -kv[1]))
                or "none"
            )
        )
        differ, extra = stale(planned, out_dir)
        if args.domain is not None:
            extra = []  # the other domains' files are not this run's to judge
        if args.check:
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
        for rel in extra:
            console.print(f"[yellow]no longer written (remove it):[/] {escape(str(out_dir / rel))}")
        console.print(f"{len(differ)} of {len(planned.files)} files written under {out_dir}")
        return 0
