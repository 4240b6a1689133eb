"""`python -m harness new DOCUMENT`: scaffold repros/<id>/ from an error document."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.errors import HarnessError, InputError

__all__ = ["NewCommand"]


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

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.scaffold import parse_document, write_scaffold

        path = Path(args.document)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HarnessError(path, None, f"cannot read: {exc}") from exc
        scaffold = parse_document(text, path, args.format)
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
