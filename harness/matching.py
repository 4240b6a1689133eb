"""The one place a pattern from a document, an entry or a knowledge-base record is run on a
text: on at most ``MATCH_CHARS`` of it, for at most ``MATCH_SECONDS`` (a kept record's regex
of ``(.+)+Z`` would hang ``corrections --check``; a signature of polynomial backtracking
would keep ``report`` past 120 s on one stored message of 2,000 characters).

The loader refuses exponential backtracking and the worst polynomial shapes
(spec/backtracking.py); this bounds whatever remains. The time bound is a timer signal that
interrupts ``re``'s matching loop: it holds in the main thread (each report worker is a
process and runs there); elsewhere only the size bound holds. A search of a text shorter than
``SHORT_CHARS`` by a pattern of at most ``POLYNOMIAL_MOST`` ambiguous repetitions in a row is
not timed (fast on it): the grading of a store's records stays as quick as a plain search. Imports nothing of the harness.
"""

from __future__ import annotations

import functools
import re
import signal
import threading
import time
from typing import Any

__all__ = [
    "MATCH_CHARS",
    "MATCH_SECONDS",
    "SHORT_CHARS",
    "TooSlow",
    "bounded_find",
    "bounded_search",
    "compiled",
    "find",
]

MATCH_CHARS = 32 * 1024
MATCH_SECONDS = 1.0
SHORT_CHARS = 256


class TooSlow(Exception):
    """A search that ran past its time bound."""


@functools.lru_cache(maxsize=8192)
def compiled(pattern: str, flags: int = 0, checked: bool = True) -> re.Pattern[str] | None:
    """``pattern`` compiled once; None where it is no regex or, ``checked``, may backtrack
    exponentially (spec/backtracking.py; a polynomial one is left to the time bound)."""
    try:
        rx = re.compile(pattern, flags)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    if checked:
        from harness.spec.backtracking import backtracking_problem  # stdlib only

        try:
            if backtracking_problem(pattern, polynomial_most=None) is not None:
                return None
        except RecursionError:
            return None
    return rx


@functools.lru_cache(maxsize=8192)
def _fast_when_short(pattern: str) -> bool:
    from harness.spec.backtracking import POLYNOMIAL_MOST, polynomial_degree

    try:
        return polynomial_degree(pattern) <= POLYNOMIAL_MOST
    except (re.error, RecursionError):
        return False


def bounded_find(
    rx: re.Pattern[str],
    text: str,
    seconds: float = MATCH_SECONDS,
    chars: int = MATCH_CHARS,
) -> re.Match[str] | None:
    """``rx.search`` on the first ``chars`` of ``text``; raises TooSlow past ``seconds``."""
    text = text[:chars]
    if (
        (len(text) < SHORT_CHARS and _fast_when_short(rx.pattern))
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        return rx.search(text)

    def _stop(signum: int, frame: Any) -> None:
        raise TooSlow

    # a timer already set (a caller's, pytest-timeout's) is put back with what it had left
    outer, interval = signal.getitimer(signal.ITIMER_REAL)
    previous = signal.signal(signal.SIGALRM, _stop)
    start = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, min(seconds, outer) if outer > 0 else seconds)
        try:
            return rx.search(text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        # None: a handler not set from Python; the default is what was there
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if outer > 0:
            left = max(outer - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def find(
    pattern: str, text: str, flags: int = re.DOTALL, checked: bool = False
) -> re.Match[str] | None:
    """``pattern`` searched in ``text`` within the bounds: a search past its time bound, or a
    pattern that is no regex (``checked``: or may backtrack exponentially), finds nothing."""
    rx = compiled(pattern, flags, checked)
    if rx is None:
        return None
    try:
        return bounded_find(rx, text)
    except TooSlow:
        return None


def bounded_search(
    pattern: str,
    text: str,
    seconds: float = MATCH_SECONDS,
    flags: int = re.DOTALL,
    chars: int = MATCH_CHARS,
) -> bool | None:
    """Whether ``pattern`` is found in the first ``chars`` of ``text``: None where it is no
    safe regex or took longer than ``seconds``."""
    rx = compiled(pattern, flags)
    if rx is None:
        return None
    try:
        return bounded_find(rx, text, seconds, chars) is not None
    except TooSlow:
        return None
