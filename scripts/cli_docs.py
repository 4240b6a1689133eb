"""Write docs/reference/cli.md from the argparse definitions in harness/cli/ (--check: write
nothing, exit 1 when the committed file differs). Run after changing a command's options."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the checkout's harness, installed or not

from harness.cli.docs import REFERENCE, reference  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = ap.parse_args(argv)
    path = REPO / REFERENCE
    text = reference()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current != text:
            print(f"stale: {REFERENCE}; run `python scripts/cli_docs.py` and commit it")
            return 1
        print(f"{REFERENCE} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
