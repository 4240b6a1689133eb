"""`python -m harness ...`: the command line, harness/cli."""

from __future__ import annotations

import sys

from harness.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
