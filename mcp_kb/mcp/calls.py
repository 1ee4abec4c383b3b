"""How a handler calls the core: blocking work in a worker thread, its failures translated for the client."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from collections.abc import Callable, Iterator
from typing import TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError

from ..api import (
    KBError,
)
from .guard import current_view


log = logging.getLogger(__name__)
_T = TypeVar("_T")


@contextmanager
def client_errors(error: type[Exception] = ToolError) -> Iterator[None]:
    """Failures reach the client as `error` (the SDK hides other exceptions' text) with a useful message."""
    try:
        yield
    except KBError as exc:
        view = current_view()
        raise error(view.explain(exc) if view else str(exc)) from exc
    except Exception as exc:
        log.exception("request failed")
        view = current_view()
        said = f"internal error ({type(exc).__name__}: {exc}); the server is still running"
        raise error(view.unlocated(said) if view else said) from exc


async def call_core(work: Callable[[], _T], error: type[Exception] = ToolError) -> _T:
    """Run blocking work in a thread, translating its failures for the client."""
    with client_errors(error):
        return await anyio.to_thread.run_sync(work)
