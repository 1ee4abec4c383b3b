"""How long a stage took, measured one way: a sync adds up seconds per stage in its report, a search keeps
milliseconds per stage in its result, a call's audit line and latency figures keep milliseconds; all time with
`Stopwatch` (`stopwatch` for a block)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Stopwatch"]  # what the core's API (mcp_kb.api) offers from this module


class Stopwatch:
    """Started when made, on the clock that only goes forward (`time.perf_counter`)."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def seconds(self) -> float:
        """How long since it started."""
        return time.perf_counter() - self._start

    @property
    def milliseconds(self) -> float:
        """How long since it started, in milliseconds (a search's stages, an audit line, latency figures)."""
        return self.seconds * 1000


@contextmanager
def stopwatch(took: Callable[[float], None]) -> Iterator[None]:
    """Times the block; `took(seconds)` hears how long it took, also when it raised."""
    watch = Stopwatch()
    try:
        yield
    finally:
        took(watch.seconds)
