"""What a report shows as it goes. The first report of a large store takes a minute (a
million records: docs/performance.md), which must not be silence.

On a terminal: a transient display of the phase the report is in (reading the store,
aggregating, rendering, with a bar of the entries rendered, writing) and the time spent in
it, gone when the report prints its summary. Elsewhere (CI logs, pipes): one line for each
phase that took ``SLOW_PHASE_S`` or more, as it ends, naming it and its time, so that a slow
report says where its time went; a quick report prints none.

The display is refreshed by a thread of its own only in a phase that forks nothing: the
report forks its renderers only where no other thread is alive (harness/report/outputs.py:
fork copies the calling thread alone), so the rendering phase refreshes it as each shard of
entries is done instead.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

__all__ = ["SLOW_PHASE_S", "ReportProgress"]

SLOW_PHASE_S = 5.0  # off a terminal: a phase this long or longer is told when it ends
_TICK_S = 0.1  # on a terminal: how often the display is drawn again while a phase waits

Advance = Callable[[int], None]


class _Count(MofNCompleteColumn):
    """ "10/40" where the phase counts what it does; nothing where it does not ("0/?")."""

    def render(self, task: Task) -> Text:
        return super().render(task) if task.total is not None else Text("")


class ReportProgress:
    """The report's phases, as a context manager around the display (none off a terminal,
    or where ``quiet``); ``phase`` is one phase."""

    def __init__(
        self, console: Console, *, slow_s: float = SLOW_PHASE_S, quiet: bool = False
    ) -> None:
        self.console = console
        self.live = console.is_terminal and not quiet
        self.slow_s = slow_s
        self.quiet = quiet
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            _Count(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            auto_refresh=False,  # no thread of rich's: this class says when to draw
            disable=not self.live,
        )

    def __enter__(self) -> ReportProgress:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bar.__exit__(kind, exc, tb)

    @contextlib.contextmanager
    def phase(
        self, what: str, total: int | None = None, *, forks: bool = False
    ) -> Iterator[Advance]:
        """One phase, ``what`` it does (``total``: how many things it does, counted by the
        function it yields). ``forks``: the phase forks processes, so no thread draws the
        display meanwhile (the count does, as it moves)."""
        task = self._bar.add_task(what, total=total)
        self._bar.refresh()
        stop = threading.Event()
        ticker = None
        if self.live and not forks:
            ticker = threading.Thread(
                target=self._tick, args=(stop,), name="report-progress", daemon=True
            )
            ticker.start()

        def advance(n: int) -> None:
            self._bar.advance(task, n)
            self._bar.refresh()

        began = time.monotonic()
        try:
            yield advance
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            self._bar.remove_task(task)
            self._bar.refresh()
        took = time.monotonic() - began
        if not self.live and not self.quiet and took >= self.slow_s:
            self.console.print(f"report: {what}: {took:.1f} s", markup=False)

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(_TICK_S):
            self._bar.refresh()
