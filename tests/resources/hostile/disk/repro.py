"""Fills the disk of TMPDIR (outside its own run folder, so the harness's clean-up does not
free it) and returns normally; the variants after it are healthy."""

import os
import tempfile


def fills_the_disk(device, precision):  # writes to TMPDIR until ENOSPC
    path = os.path.join(tempfile.gettempdir(), "filler")
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    return {"filled": {"ok": True, "detail": "wrote until the disk was full"}}


def healthy(device, precision):  # returns at once
    return {"moved": {"ok": True, "detail": "fine"}}


VARIANTS = {"a-fills-the-disk": fills_the_disk, "b-healthy": healthy, "c-healthy": healthy}
