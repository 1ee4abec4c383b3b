"""Calling a model service over HTTP, the same way for every provider that does: transient failures
(429, 5xx, timeouts, dropped connections) retried with exponential backoff and jitter (Retry-After
honoured), credentials never shown, the address shown without any user:password part."""

from __future__ import annotations

import email.utils
import logging
import random
import re
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..errors import ConfigError, ModelError

log = logging.getLogger(__name__)

_BACKOFF_FIRST, _BACKOFF_MAX = 0.5, 30.0  # seconds
_RETRY_AFTER_MAX = 120.0  # a longer Retry-After is waited for this long at most, then retried
RETRIED_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}


def post(client: httpx.Client, url: str, body: dict[str, Any], retries: int, what: str) -> httpx.Response:
    """POST `body` as JSON; the answer to the last attempt (a status not worth retrying, or the last
    retry's). A service that cannot be reached at all is a ModelError naming `what` and `url`."""
    attempt = 0
    while True:
        try:
            response = client.post(url, json=body)
        except httpx.TransportError as exc:  # timeouts, refused or dropped connections
            if attempt >= retries:
                raise ModelError(f"{what} at {service_address(url)} unreachable after {attempt + 1} attempt(s): "
                                 f"{type(exc).__name__}: {exc}") from exc
            pause(attempt, None)
        else:
            if response.status_code not in RETRIED_STATUSES or attempt >= retries:
                return response
            log.info("%s answered %s; retry %d of %d", what, response.status_code, attempt + 1, retries)
            pause(attempt, response.headers.get("retry-after"))
        attempt += 1


def pause(attempt: int, retry_after: str | None) -> None:
    """Exponential backoff with full jitter, or the server's Retry-After when it gives one."""
    wait = _retry_after_seconds(retry_after)
    if wait is None:
        wait = random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** attempt))
    time.sleep(min(wait, _RETRY_AFTER_MAX))


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds or as an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def request_headers(settings: Any) -> dict[str, str]:
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


def refusal(response: httpx.Response, what: str, url: str, settings: Any, on_404: str) -> ModelError | None:
    """The error an answer of status 400 or more stands for (None below that): refused credentials name
    the variable to check, 404 says what to check (`on_404`), others quote the service."""
    status, url = response.status_code, service_address(url)
    if status in (401, 403):
        return ModelError(f"the {what} at {url} refused the credentials ({status}): check the key in "
                          f"${settings.api_key_env or '(api_key_env is not set)'}")
    if status == 404:
        return ModelError(f"the {what} at {url} answered 404: {on_404} ({excerpt(response)})")
    if status >= 400:
        return ModelError(f"the {what} at {url} answered {status}: {excerpt(response)}")
    return None


def excerpt(response: httpx.Response) -> str:
    return " ".join(response.text.split())[:200] or "(empty body)"
