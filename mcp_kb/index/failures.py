"""LanceDB's and the object store's failures, as one StoreError line naming the index and what failed (a sync
whose final write meets a dropped connection says so, instead of a Rust traceback)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from ..errors import KBError, StoreError

_RUST_LOCATION = re.compile(r",?\s*/\S+\.rs:\d+:\d+")  # "…, /root/.cargo/…/object_store.rs:1506:92"


class Located(Protocol):
    """What an operation's failure names: the index it was on."""

    @property
    def uri(self) -> str: ...


_On = TypeVar("_On", bound=Located)
_Args = ParamSpec("_Args")
_Result = TypeVar("_Result")


def store_failures(
    what: str,
) -> Callable[[Callable[Concatenate[_On, _Args], _Result]], Callable[Concatenate[_On, _Args], _Result]]:
    """An operation on an index (its first argument) whose failures are StoreErrors saying it could not `what`."""

    def wrap(operation: Callable[Concatenate[_On, _Args], _Result]) -> Callable[Concatenate[_On, _Args], _Result]:
        @functools.wraps(operation)
        def run(on: _On, /, *args: _Args.args, **kwargs: _Args.kwargs) -> _Result:
            try:
                return operation(on, *args, **kwargs)
            except KBError:
                raise
            except Exception as exc:
                raise StoreError(f"the index at {on.uri} could not {what}: {_one_line(exc)}") from exc

        return run

    return wrap


def _one_line(exc: BaseException) -> str:
    """An error from LanceDB in one line, without the Rust source location it ends with."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return _RUST_LOCATION.sub("", text)[:400]
