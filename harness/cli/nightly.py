"""`python -m harness nightly`: the night's snapshot (results/nightly/<night>.json), its job
summary, and one GitHub issue per regressed entry."""

from __future__ import annotations

import argparse
import datetime
import json
import re
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["NightlyCommand"]

SNAPSHOTS = "results/nightly"


def _night(text: str) -> str:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise argparse.ArgumentTypeError(f"a night is a date, YYYY-MM-DD: {text!r}")
    try:  # a date that exists (2026-13-45 does not), and not after tomorrow (UTC)
        day = datetime.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is no date: {exc}") from None
    if day > _latest_night():
        raise argparse.ArgumentTypeError(f"{text!r} is in the future")
    return text


def _latest_night() -> datetime.date:
    """The latest night a record may start on: tomorrow, UTC (a clock a little ahead)."""
    return datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=1)


class NightlyCommand(Command):
    name = "nightly"
    help = (
        "write the night's snapshot (results/nightly/<night>.json): records counted, changed "
        "cells (regressions first), new releases, changed claims, cell states"
    )

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--night",
            type=_night,
            default=None,
            help="the night (UTC date the records started; default: the newest in the store)",
        )
        parser.add_argument(
            "--summary",
            default=None,
            metavar="FILE",
            help="append the summary as Markdown to FILE (e.g. $GITHUB_STEP_SUMMARY)",
        )
        parser.add_argument(
            "--issues",
            choices=("off", "dry-run", "gh"),
            default="off",
            help="one GitHub issue per regressed entry, through gh (dry-run: say, run nothing)",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.aggregate.diff import as_reported
        from harness.atomic import write_atomically
        from harness.ci.nightly import (
            claim_verdicts,
            dumps,
            make_snapshot,
            night_of,
            states_script,
            summary_markdown,
        )
        from harness.ci.regression_issues import report_regressions
        from harness.report.render.jsonout import COMPAT_FILE, read_compat
        from harness.spec.entries import load_entries, rewritten_since
        from harness.store.jsonl import Store

        loaded = Store(repo / "results" / "records").load()
        entries = load_entries(repo / "repros")
        records = as_reported(loaded.records, entries)
        if not records:
            raise InputError("results/records holds no records: no night to snapshot")
        # a record dated in the future (a wrong clock, a forged merge) never moves the night
        latest = _latest_night().isoformat()
        future = sorted({night_of(r) for r in records if night_of(r) > latest})
        if future:
            console.print(
                f"warning: {sum(night_of(r) > latest for r in records)} records start after "
                f"{latest} ({', '.join(future[:3])}): a wrong clock; not the night snapshotted",
                markup=False,
                highlight=False,
            )
        dated = [night_of(r) for r in records if night_of(r) <= latest]
        if not dated and not args.night:
            raise InputError(f"results/records holds no record dated up to {latest}")
        night = args.night or max(dated)
        claims = {}
        if (repo / "results" / COMPAT_FILE).is_file():
            try:
                claims = claim_verdicts(read_compat(repo / "results"))
            except ValueError as exc:  # "file:line: problem"
                raise InputError(f"{exc}; run `python -m harness report` again") from None
        folder = repo / SNAPSHOTS
        earlier = sorted(p for p in folder.glob("*.json") if p.stem < night)
        previous = json.loads(earlier[-1].read_text()) if earlier else None
        settled = [
            json.loads(p.read_text())
            for p in sorted((repo / "results" / "settled").glob(f"{night}-*.json"))
        ]
        snapshot = make_snapshot(
            records, night, claims, previous, settled, rewritten_since(entries)
        )
        target = folder / f"{night}.json"
        summary = summary_markdown(snapshot)
        if args.summary:  # first: a summary that cannot be written leaves the snapshot as it was
            try:
                with open(args.summary, "a", encoding="utf-8") as f:
                    f.write(summary)
            except OSError as exc:
                raise InputError(
                    f"--summary {args.summary}: cannot write: {exc.strerror or exc}; "
                    "no snapshot was written"
                ) from None
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(target, dumps(snapshot).encode("utf-8"))
        states = states_script([r for r in records if night_of(r) <= night], night)
        write_atomically(folder / "states.js", states.encode("utf-8"))
        console.print(summary, markup=False, highlight=False)
        console.print(f"wrote {target.relative_to(repo)}", markup=False, highlight=False)
        if args.issues != "off":

            def say(line: str) -> None:
                console.print(line, markup=False, highlight=False)

            report_regressions(snapshot, dry_run=args.issues == "dry-run", say=say)
        return 0
