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

__all__ = ["write_atomically"]


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
