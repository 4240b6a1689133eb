"""Hold off Python's cyclic garbage collector over work that makes millions of objects and
no cycles (the aggregation, the rendering): each of its passes would walk every object
made so far again (in a forked child, copying their pages). Reference counting still frees
every object no longer used; the collector runs again when the outermost pause ends."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off within (nested pauses leave it to the outermost)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
