"""Fills the disk of TMPDIR (outside its own run folder, so the harness's clean-up does not
free it) and returns normally; the variants after it are healthy."""

import os
import tempfile

VARIANTS = {
    "a-fills-the-disk": "writes to TMPDIR until ENOSPC",
    "b-healthy": "returns at once",
    "c-healthy": "returns at once",
}


def run(variant, device, precision):
    if variant == "a-fills-the-disk":
        path = os.path.join(tempfile.gettempdir(), "filler")
        with open(path, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 16))
                    f.flush()
            except OSError:
                pass
        return {"filled": {"ok": True, "detail": "wrote until the disk was full"}}
    return {"moved": {"ok": True, "detail": "fine"}}
