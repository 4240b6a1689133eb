"""Hold off Python's cyclic garbage collector over work that makes millions of objects and
no cycles (the aggregation, the rendering): each of its passes would walk every object
made so far again (in a forked child, copying their pages). Reference counting still frees
every object no longer used; the collector runs again when the outermost pause ends, but
the objects made meanwhile join its oldest generation rather than its youngest: the first
collection after the pause would otherwise walk every one of them (0.8 s after a report
of a million records), and a short-lived command never needs it to."""

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
            gc.freeze()  # every object tracked now: out of the young generations ...
            gc.enable()
            gc.unfreeze()  # ... and into the oldest, walked at its next full collection
