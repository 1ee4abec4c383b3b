"""Connection limits for the HTTP transports, so a flood of slow or idle connections cannot lock out
a client holding a valid token (nor make the server write gigabytes of log lines):

- a header deadline: a connection must complete each request head within `[server] header_timeout` of opening
  (or of its last answer), however slowly it drips bytes (uvicorn's own keep-alive timer restarts
  on every byte);
- a cap on open connections (`[server] max_connections`), below the process's file-descriptor limit (raised to its hard limit
  first): at the cap, a new connection evicts the one that has waited longest for its headers;
- a filter that lets a repeated log line through once per window and counts the rest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Protocol, TypeGuard

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

_FD_RESERVE_SHARE = 2  # half the descriptors stay for the index, the model and the rest of the process


def connection_cap(wanted: int) -> int:
    """How many connections may be open at once: `wanted`, or half of what the descriptor limit allows."""
    try:
        import resource  # POSIX only: Windows has no per-process descriptor limit to raise
    except ImportError:
        return max(8, wanted)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:  # the soft limit is often 1024 while the hard one allows far more
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return max(8, min(wanted, soft // _FD_RESERVE_SHARE))


def accept_burst(cap: int) -> int:
    """The listen backlog, which asyncio also takes as how many connections it accepts in one go
    before closing any: kept to a quarter of the cap, so evictions keep up within the descriptor limit."""
    return max(16, min(2048, cap // 4))


def guarded_protocol(cap: int, header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header deadline and a connection cap (uvicorn has neither)."""

    class GuardedH11Protocol(H11Protocol):
        waiting_since: float | None = None  # when it started waiting for a request head; None while answering
        _header_timer: asyncio.TimerHandle | None = None

        # asyncio's protocol takes a BaseTransport; uvicorn's own override narrows it so too
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_timer = None
            self._wait_for_head()
            if len(self.connections) > cap:
                _evict_longest_waiting(self.connections, self)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:  # a whole head came: answering
                self._stop_waiting()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._wait_for_head()  # the next request's head has its own deadline
                if self.cycle is not None and not self.cycle.response_complete:  # pipelined: already answering
                    self._stop_waiting()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            self._stop_waiting()
            self.waiting_since = time.monotonic()
            self._header_timer = self.loop.call_later(header_timeout, self._close_slow_connection)

        def _stop_waiting(self) -> None:
            self.waiting_since = None
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _close_slow_connection(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


class _Guarded(Protocol):
    """What eviction needs of a GuardedH11Protocol (a class made per call of guarded_protocol)."""

    @property
    def transport(self) -> asyncio.Transport: ...

    def _stop_waiting(self) -> None: ...


class _Waiting(_Guarded, Protocol):
    """A guarded connection waiting for a request head."""

    @property
    def waiting_since(self) -> float: ...


def _is_waiting(connection: object) -> TypeGuard[_Waiting]:
    """Only a guarded connection has a waiting_since, and it is set while it waits for a request head."""
    return getattr(connection, "waiting_since", None) is not None


def _evict_longest_waiting(connections: Iterable[object], newcomer: _Guarded) -> None:
    """Close the connection that has waited longest for a request head (the newcomer itself when every
    other one is being answered)."""
    waiting = [c for c in connections if _is_waiting(c) and c is not newcomer]
    victim = min(waiting, key=lambda c: c.waiting_since) if waiting else newcomer
    victim._stop_waiting()
    victim.transport.close()


class RepeatedLineFilter(logging.Filter):
    """Lets a log line through once per `window` seconds per (logger, message template), and says how
    many like it were held back: a failure that repeats per connection must not fill a disk."""

    def __init__(self, window: float = 60.0):
        super().__init__()
        self.window = window
        self.last: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (when let through, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        shown, held = self.last.get(key, (float("-inf"), 0))
        if now - shown < self.window:
            self.last[key] = (shown, held + 1)
            return False
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {self.window:g} s were not shown)"
        self.last[key] = (now, 0)
        return True
