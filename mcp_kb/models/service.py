"""Calling a model service over HTTP, the same way for every provider that does: transient failures
(429, 5xx, timeouts, dropped connections) retried with exponential backoff and jitter (Retry-After
honoured, never past the caller's deadline), credentials never shown, the address shown without any
user:password part. The service is not trusted: an attempt has one deadline as a whole (a body
dripped a byte at a time is cut at it), its answer a size bound, its JSON a depth bound (wire.py),
and redirects are not followed."""

from __future__ import annotations

import email.utils
import logging
import random
import re
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..errors import ConfigError, ModelError
from ..wire import parse_json, read_within

log = logging.getLogger(__name__)

_BACKOFF_FIRST, _BACKOFF_MAX = 0.5, 30.0  # seconds
_RETRY_AFTER_MAX = 120.0  # a longer Retry-After is waited for this long at most, then retried
RETRIED_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """A service's answer, read whole within its bounds."""

    status: int
    headers: httpx.Headers
    body: bytes
    url: str

    def json(self, what: str) -> Any:
        return parse_json(self.body, f"the {what} at {service_address(self.url)}")

    @property
    def excerpt(self) -> str:
        """The start of the body, fit for an error message."""
        return " ".join(self.body[:4096].decode("utf-8", "replace").split())[:200] or "(empty body)"


@dataclass(frozen=True)
class Limits:
    """A request's bounds: how many times a transient failure is retried, the seconds each attempt may take, the
    bytes its answer may hold, and when every attempt must have ended (time.monotonic())."""

    retries: int
    timeout: float
    answer_bytes: int
    deadline: float = float("inf")


def post(client: httpx.Client, url: str, body: Mapping[str, object], what: str, limits: Limits) -> Answer:
    """POST `body` as JSON; the answer to the last attempt (a status not worth retrying, or the last
    retry's). Each attempt ends within `limits.timeout` seconds, all of them by `limits.deadline`: a retry that
    could not finish by then is not made. A service that cannot be reached, or answers past its bounds, is a
    ModelError naming `what` and `url`."""
    retries, deadline = limits.retries, limits.deadline
    attempt = 0
    while True:
        ends = min(deadline, time.monotonic() + limits.timeout)
        try:
            answer = _attempt(client, url, body, what, replace(limits, deadline=ends))
        except (httpx.TransportError, TimeoutError) as exc:  # timeouts, refused or dropped connections, drips
            wait = _backoff(attempt)
            if attempt >= retries or time.monotonic() + wait >= deadline:
                raise ModelError(
                    f"{what} at {service_address(url)} unreachable after {attempt + 1} attempt(s): "
                    f"{type(exc).__name__}: {exc}"
                ) from None
        except ValueError as exc:  # more than `limits.answer_bytes` bytes
            raise ModelError(str(exc)) from None
        else:
            asked = _retry_after_seconds(answer.headers.get("retry-after"))
            wait = _backoff(attempt) if asked is None else min(asked, _RETRY_AFTER_MAX)
            if answer.status not in RETRIED_STATUSES or attempt >= retries or time.monotonic() + wait >= deadline:
                return answer
            log.info("%s answered %s; retry %d of %d", what, answer.status, attempt + 1, retries)
        time.sleep(wait)
        attempt += 1


def _attempt(client: httpx.Client, url: str, body: Mapping[str, object], what: str, limits: Limits) -> Answer:
    """One exchange, ended at `limits.deadline` whatever the service does: the blocking read runs in a thread of
    its own that is left to end by itself (at its next piece of body, or the client's read timeout)."""
    deadline = limits.deadline
    source = f"the {what} at {service_address(url)}"
    done: Future[Answer] = Future()

    def exchange() -> None:
        try:
            with client.stream("POST", url, json=body) as response:
                content = read_within(response.iter_bytes(), limits.answer_bytes, deadline, source)
                done.set_result(Answer(response.status_code, response.headers, content, url))
        except Exception as exc:  # handed to the caller, who is waiting for this thread's outcome
            done.set_exception(exc)

    threading.Thread(target=exchange, name="mcp-kb service call", daemon=True).start()
    try:
        return done.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        raise TimeoutError(f"{source} did not answer in time") from None


def by_input(answered: list[tuple[Any, T]], count: int) -> list[T | None]:
    """What a service answered for each of `count` inputs, in input order (None: not answered), from
    (index, value) pairs; ValueError when an index is not a whole number of 0..count-1 or comes twice."""
    ordered: list[T | None] = [None] * count
    seen: set[int] = set()
    for index, value in answered:
        shown = str(index)[:20]
        if type(index) is not int:  # not 1e400, "3" or true
            raise ValueError(f"index {shown} is not a whole number, not one of the inputs 0..{count - 1}")
        if not 0 <= index < count:
            raise ValueError(f"index {shown} is out of range, not one of the inputs 0..{count - 1}")
        if index in seen:
            raise ValueError(f"index {shown} is repeated: it repeats one answered before")
        seen.add(index)
        ordered[index] = value
    return ordered


def _backoff(attempt: int) -> float:
    """Exponential backoff with full jitter."""
    return random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2**attempt))


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds or as an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class _ServiceSettings(Protocol):
    """A service provider's settings (OpenAISettings, ServiceRerankSettings)."""

    def request_headers(self) -> dict[str, str]: ...


def request_headers(settings: _ServiceSettings) -> dict[str, str]:
    """The settings' headers and key; a key that is not set (or not fit for a header) fails the model,
    not the config."""
    try:
        return settings.request_headers()
    except ConfigError as exc:
        raise ModelError(str(exc)) from None


def service_address(base_url: str) -> str:
    """The base URL without any user:password part, fit for status, notes and the index's state."""
    parts = urlsplit(base_url.rstrip("/"))
    if not parts.hostname:
        return base_url
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


def refusal(answer: Answer, what: str, settings: Any, on_404: str) -> ModelError | None:
    """The error an answer other than 2xx stands for (None for 2xx): refused credentials name the variable
    to check, 404 says what to check (`on_404`), a redirect says where to point base_url, others quote it."""
    status, url = answer.status, service_address(answer.url)
    if status in (401, 403):
        return ModelError(
            f"the {what} at {url} refused the credentials ({status}): check the key in "
            f"${settings.api_key_env or '(api_key_env is not set)'}"
        )
    if status == 404:
        return ModelError(f"the {what} at {url} answered 404: {on_404} ({answer.excerpt})")
    if 300 <= status < 400:
        return ModelError(
            f"the {what} at {url} answered {status}, a redirect (not followed): set base_url to the address it names"
        )
    if not 200 <= status < 300:
        return ModelError(f"the {what} at {url} answered {status}: {answer.excerpt}")
    return None
