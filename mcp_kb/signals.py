"""How a signal stops work, decided once for every command: SIGTERM (a service manager, `kill`) as Ctrl-C."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a service manager, `kill`) ends the work as Ctrl-C does: a sync is recorded as interrupted with
    what it wrote, a server stops."""

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
