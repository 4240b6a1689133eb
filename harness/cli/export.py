"""`python -m harness export ENTRY --variant NAME`: one standalone script for one variant."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from harness.cli.command import Command
from harness.errors import InputError

__all__ = ["ExportCommand"]


class ExportCommand(Command):
    name = "export"
    help = "one standalone script (helpers inlined) running one variant"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "entry", metavar="ENTRY", help="entry id, e.g. pytorch/grad-scale-unscale-error"
        )
        parser.add_argument(
            "--variant", required=True, help="the variant the script runs by default"
        )
        parser.add_argument(
            "-o",
            "--output",
            default=None,
            help="write here (default: stdout); never into results/ or repros/, never a link",
        )
        parser.add_argument("--force", action="store_true", help="replace an existing -o file")

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        from harness.catalogue.export import export_script
        from harness.spec.entries import load_entry

        repros = repo / "repros"
        folder = repros / args.entry
        if not (folder / "entry.yaml").is_file():
            raise InputError(f"no entry {args.entry!r} ({folder}/entry.yaml)")
        script = export_script(load_entry(folder, repros), args.variant, repros / "reprokit.py")
        if args.output:
            from harness.atomic import write_atomically
            from harness.paths import check_output

            # not into the project's data, not through a link, not over a file unasked
            target = check_output(args.output, repo, force=args.force)
            try:
                write_atomically(target, script.encode("utf-8"))
            except OSError as exc:
                raise InputError(f"-o {args.output}: {exc.strerror or exc}") from exc
            console.print(f"wrote {args.output} ({len(script.splitlines())} lines)")
        else:
            sys.stdout.write(script)
        return 0
