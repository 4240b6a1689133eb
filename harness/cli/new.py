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


MAX_DOCUMENT_BYTES = 4 << 20


def documenting_the_same(scaffold: Any, repros: Path) -> list[str]:
    """The entries whose documented signature matches the new document's message, or whose
    own documented message the new document's signature matches (a duplicate
    would become a second entry, which explain would list first, unmeasured)."""
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


def _commit(text: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{40}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a commit (40 hex digits)")
    return text


def where_in_git(path: Path) -> tuple[str | None, str | None]:
    """The file's path in the git checkout that holds it and that checkout's commit, where
    the file is as that commit has it (None, None: not in a checkout, or changed since)."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(path.resolve().parent), *args],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    relative = git("ls-files", "--full-name", "--error-unmatch", "--", path.name)
    if not relative or git("status", "--porcelain", "--", path.name) != "":
        return None, None
    return relative, git("rev-parse", "HEAD")


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
            "--kb-commit",
            default=None,
            type=_commit,
            help="a JSON record: the knowledge base's commit it was read at (default: the "
            "commit of the git checkout holding it, where the file is as committed)",
        )
        parser.add_argument(
            "--kb-path",
            default=None,
            help="a JSON record: its path in the knowledge base's repository (default: its "
            "path in the git checkout holding it)",
        )
        parser.add_argument(
            "--anyway",
            action="store_true",
            help="write the entry even where one already documents the same error",
        )

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.scaffold import keep_record, parse_document, write_scaffold
        from harness.spec.yaml_nodes import read_regular

        path = Path(args.document)
        try:
            # a regular file only, bounded before it is parsed (a 50 MB record took 6 GB)
            raw = read_regular(path, MAX_DOCUMENT_BYTES)
            if len(raw) > MAX_DOCUMENT_BYTES:
                raise HarnessError(
                    path, None, f"larger than {MAX_DOCUMENT_BYTES} bytes; a document is a few KB"
                )
            text = raw.decode("utf-8")
        except OSError as exc:
            raise HarnessError(path, None, f"cannot read: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise HarnessError(path, None, f"cannot read: {exc}") from exc
        scaffold = parse_document(text, path, args.format)
        if scaffold.format == "deadends-json":
            kb_path, commit = args.kb_path, args.kb_commit
            if kb_path is None or commit is None:
                found_path, found_commit = where_in_git(path)
                kb_path = kb_path or found_path
                commit = commit or found_commit
            scaffold = keep_record(scaffold, raw, kb_path, commit)
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
