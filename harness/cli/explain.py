"""`python -m harness explain [FILE | -]`: which entries a pasted traceback or message is, and
for the versions installed what each workaround and dead end did in the runs (the work is in
harness/catalogue/explain.py and explain_terminal.py, imported when the command runs)."""

from __future__ import annotations

import argparse
import json
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from rich.console import Console
from rich.markup import escape

from harness.cli.command import Command
from harness.domain import version_option
from harness.errors import InputError
from harness.store.validate import safe_text

__all__ = ["MAX_PASTE_BYTES", "ExplainCommand", "add_arguments", "read_file_tail", "read_tail"]


# what explain reads of a paste: a traceback's last lines are what name the error, and every
# stored message is compared with the paste, so its size bounds the time
MAX_PASTE_BYTES = 32 * 1024
MAX_STDIN_BYTES = 16 * 1024 * 1024  # read from a stream before it is cut (a /dev/zero)


def _decoded(tail: bytes, cut: bool) -> str:
    text = tail.decode("utf-8", errors="replace")
    if cut and "\n" in text.rstrip("\n"):
        text = text.split("\n", 1)[1]  # the first line read is a part of a line
    return safe_text(text, limit=MAX_PASTE_BYTES)


def read_file_tail(path: Path) -> tuple[str, str]:
    """The last MAX_PASTE_BYTES of a regular file, sanitised as records are (terminal
    escapes, C0/C1 and bidirectional controls), and what was cut ("" if nothing). A FIFO, a
    device or a folder is refused: it may never end."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{path}: not a regular file (a FIFO, a device or a folder may never end): give a "
            "file, or pipe the text to stdin"
        )
    with path.open("rb") as f:
        if info.st_size > MAX_PASTE_BYTES:
            f.seek(info.st_size - MAX_PASTE_BYTES)
        tail = f.read(MAX_PASTE_BYTES)
    cut = info.st_size > MAX_PASTE_BYTES
    note = (
        f"read the last {MAX_PASTE_BYTES // 1024} KiB of {info.st_size:,} bytes (a traceback's "
        "last lines name the error)"
        if cut
        else ""
    )
    return _decoded(tail, cut), note


def read_tail(stream: BinaryIO) -> tuple[str, str]:
    """The last MAX_PASTE_BYTES of at most MAX_STDIN_BYTES read from ``stream``, sanitised,
    and what was cut ("" if nothing)."""
    kept = bytearray()
    total = 0
    while total < MAX_STDIN_BYTES:
        chunk = stream.read(min(1 << 16, MAX_STDIN_BYTES - total))
        if not chunk:
            break
        total += len(chunk)
        kept += chunk
        if len(kept) > MAX_PASTE_BYTES:
            del kept[: len(kept) - MAX_PASTE_BYTES]
    ended = total < MAX_STDIN_BYTES
    cut = total > MAX_PASTE_BYTES
    note = ""
    if cut:
        note = f"read the last {MAX_PASTE_BYTES // 1024} KiB of {total:,} bytes"
        if not ended:
            note += f" (stopped after {MAX_STDIN_BYTES // (1 << 20)} MiB)"
    return _decoded(bytes(kept), cut), note


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="the traceback or error message (default: read from stdin)",
    )
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="read torch's and lightning's versions from this interpreter (default: this "
        "one if it has torch, else the python3/python on PATH that has it)",
    )
    p.add_argument(
        "--torch", default=None, type=version_option, metavar="V", help="torch release, e.g. 2.5.1"
    )
    p.add_argument(
        "--lightning",
        default=None,
        type=version_option,
        metavar="V",
        help="lightning release or series: 2.5.6, 2.5.x",
    )
    p.add_argument("--json", action="store_true", help="print the answer as JSON, for tools")


class ExplainCommand(Command):
    name = "explain"
    help = "which entries an error is, and what works for your versions"

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace, repo: Path, console: Console) -> int:
        # imported here: the CLI starts without DuckDB (run --python in a bare GPU stack)
        from harness.catalogue.explain import explain
        from harness.catalogue.explain_terminal import _harness_command, find_versions, render
        from harness.spec.entries import load_entries
        from harness.store.columnar import load_latest
        from harness.store.jsonl import Store
        from harness.store.snapshot import cache_dir

        try:
            versions, how = find_versions(args)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        try:
            if args.file == "-":
                if sys.stdin.isatty():
                    Console(stderr=True).print("paste the traceback or message, then Ctrl-D")
                text, cut = read_tail(sys.stdin.buffer)
            else:
                text, cut = read_file_tail(Path(args.file))
        except OSError as exc:
            raise InputError(f"{args.file}: cannot read: {exc}") from None
        if cut:
            Console(stderr=True).print(f"explain: {cut}")
        if not text.strip():
            raise InputError("no error text given (a file, or stdin)")
        entries = load_entries(repo / "repros")
        records = repo / "results" / "records"
        table = load_latest(Store(records), cache_dir(records))
        for warning in table.warnings:
            console.print(f"[yellow]warning:[/] {escape(str(warning))}")
        x = explain(text, versions, entries, table, harness=_harness_command(repo))
        if args.json:
            sys.stdout.write(json.dumps({**x.to_dict(), "versions_from": how}, indent=1) + "\n")
        else:
            render(x, how, console)
        return 0 if x.answers and not x.guessed else 1
