"""How long a stage took, measured one way: a sync adds up seconds per stage in its report, a search keeps
milliseconds per stage in its result; both time their blocks with `stopwatch`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def stopwatch(took: Callable[[float], None]) -> Iterator[None]:
    """Times the block; `took(seconds)` hears how long it took, also when it raised."""
    start = time.perf_counter()
    try:
        yield
    finally:
        took(time.perf_counter() - start)
