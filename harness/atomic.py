"""Write a file whole or not at all, under a temp name no other process shares.

Two harness processes (two `report`s, two `run`s, a run and a report) may write the same
output at once; each writes its own temp file beside the target (``mkstemp``: a unique
name) and renames it over the target, so a reader sees the old bytes or the new, and
neither writer can rename or delete the other's temp file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["Staged", "write_atomically"]


def write_atomically(path: str | os.PathLike[str], data: bytes, *, keep_mode: bool = False) -> None:
    """Replace ``path`` with ``data``; ``keep_mode`` copies the old file's permissions."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if keep_mode:
            shutil.copymode(target, tmp)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Staged:
    """Files written together or not at all: ``put`` writes each beside its target under a
    temp name, ``commit`` renames them all over their targets (a rename needs no space), and
    ``discard`` removes the temp files. A full disk or a read-only folder while staging
    leaves every target as it was (the report's outputs)."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []

    def put(self, path: str | os.PathLike[str], data: bytes, *, keep_mode: bool = False) -> None:
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            self._staged.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if keep_mode and target.exists():
                shutil.copymode(target, tmp)
            else:
                os.chmod(tmp, 0o644)
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(target)  # name the output, not the temp file
            raise

    def commit(self) -> None:
        staged, self._staged = self._staged, []
        for tmp, target in staged:
            os.replace(tmp, target)

    def discard(self) -> None:
        staged, self._staged = self._staged, []
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()
