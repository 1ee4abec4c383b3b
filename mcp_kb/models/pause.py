"""A pause after a failure, decided once: something slow to fail (a model's load, a service, writing an int8
copy) is not tried again for a while, so one request waits for the failure and the next ones hear of it at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

_Why = TypeVar("_Why")


class PauseAfterFailure(Generic[_Why]):
    """The last failure (`why`: an error, a reason), remembered for `seconds` by `clock`."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self._last: tuple[float, _Why] | None = None

    def recent(self) -> _Why | None:
        """The failure when it was less than `seconds` ago: do not try again yet."""
        if self._last is not None and self.clock() - self._last[0] < self.seconds:
            return self._last[1]
        return None

    def failed(self, why: _Why, at: float | None = None) -> None:
        """A failure now (or `at`, by the same clock: one recorded elsewhere)."""
        self._last = (self.clock() if at is None else at, why)

    def succeeded(self) -> None:
        self._last = None
