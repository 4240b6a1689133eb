"""What a user wrote wrong, as one exception type: ``str()`` is "file:line: problem". The
command line prints it as "error: ..." and exits 2 (harness/cli). Imports nothing."""

from __future__ import annotations

import os

__all__ = ["HarnessError", "InputError"]


class HarnessError(Exception):
    """A problem in something the user wrote (a file, an option): ``str()`` is
    ``path:line: problem``, ``path: problem`` without a line, ``problem`` without a file."""

    def __init__(self, path: str | os.PathLike[str] | None, line: int | None, problem: str) -> None:
        super().__init__(path, line, problem)
        self.path = None if path is None else str(path)
        self.line = line  # 1-based; None (or 0) when the problem has no line
        self.problem = problem

    @property
    def message(self) -> str:  # the name the file-reading errors had before this class
        return self.problem

    def __str__(self) -> str:
        if self.path is None:
            return self.problem
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.problem}"


class InputError(HarnessError):
    """A problem no file holds: an option, a filter, a name that matches nothing."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, None, problem)
