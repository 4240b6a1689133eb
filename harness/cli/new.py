"""`python -m harness new DOCUMENT`: scaffold repros/<id>/ from an error document."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.cli.command import Command
from harness.errors import HarnessError, InputError

__all__ = ["NewCommand", "documenting_the_same"]


def documenting_the_same(scaffold: Any, repros: Path) -> list[str]:
    """The entries whose documented signature matches the new document's message, or whose
    own documented message the new document's signature matches (issue 35: a duplicate
    became a second entry, which explain then listed first, unmeasured)."""
    from harness.spec.entries import load_entries

    message = str(scaffold.origin.get("message") or "")
    found = []
    for e in load_entries(repros):
        theirs = str(e.origin.get("message") or "")
        try:
            ours_in_theirs = bool(theirs) and re.search(scaffold.message, theirs) is not None
            theirs_in_ours = bool(message) and re.search(e.signature.message, message) is not None
        except re.error:
            continue
        if ours_in_theirs or theirs_in_ours:
            found.append(e.id)
    return found


class NewCommand(Command):
    name = "new"
    help = "scaffold repros/<id>/ from an error document (Markdown, scraped page, JSON)"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("document", help="the document file")
        parser.add_argument("--id", default=None, help="entry id (default: from the document)")
        parser.add_argument(
            "--format",
            choices=["markdown", "scraped", "deadends-json"],
            default=None,
            help="default: detected from the first line",
        )
        parser.add_argument(
            "--anyway",
            action="store_true",
            help="write the entry even where one already documents the same error",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.scaffold import parse_document, write_scaffold

        path = Path(args.document)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HarnessError(path, None, f"cannot read: {exc}") from exc
        scaffold = parse_document(text, path, args.format)
        target = args.id or scaffold.entry_id
        same = [] if args.anyway else documenting_the_same(scaffold, repo / "repros")
        same = [eid for eid in same if eid != target]  # the same id: "never overwrites" says it
        if same:
            raise InputError(
                f"{path}: the catalogue already documents this error: {', '.join(same)} "
                "(its signature matches the document's message, or the reverse); nothing "
                "written. Add what the document says there, or pass --anyway"
            )
        try:
            folder, files = write_scaffold(scaffold, repo / "repros", args.id)
        except FileExistsError as exc:
            raise InputError(str(exc)) from exc
        console.print(
            f"{scaffold.format} document -> {folder.relative_to(repo)}/: "
            f"{len(scaffold.claims)} claimed workarounds/dead ends + baseline + control "
            f"(all None in VARIANTS: not written)"
        )
        for f in files:
            console.print(f"  wrote {f.relative_to(repo)}")
        console.print(
            "next: write repro.py (and the TODOs), then `python -m harness check "
            f"{folder.relative_to(repo / 'repros')}`"
        )
        return 0
