"""Answers read from services on the network (an OAuth issuer's keys, an embeddings or rerank service),
which this server does not trust: a body is read within a size bound and one deadline for the whole
answer (not per read: a body dripped a byte at a time must not hold a caller past it), and JSON is
parsed within a depth bound. Every failure is a ValueError or TimeoutError naming the source, so each
caller turns it into its documented outcome."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects; every answer read here needs fewer than 8 levels
_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_BRACKETS = re.compile(r"[\[\]{}]")


def parse_json(body: bytes, source: str) -> Any:
    """The JSON value of `body`, or ValueError saying what is wrong with it (never RecursionError)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{source} sent an answer that is not UTF-8 text") from None
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"{source} sent JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source} sent an answer that is not JSON ({exc})") from None


def _depth(text: str) -> int:
    """How deeply arrays and objects nest (brackets inside strings do not count), without parsing."""
    deepest = depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_within(pieces: Iterator[bytes], limit: int, deadline: float, source: str) -> bytes:
    """A body from its pieces, refused past `limit` bytes or the `deadline` (time.monotonic())."""
    body = bytearray()
    for piece in pieces:
        body += piece
        _check(len(body), limit, deadline, source)
    return bytes(body)


async def aread_within(pieces: AsyncIterator[bytes], limit: int, source: str) -> bytes:
    """A body from its pieces, refused past `limit` bytes; its deadline is the caller's cancel scope
    (anyio.fail_after ends an async read where it waits, which a blocking read cannot)."""
    body = bytearray()
    async for piece in pieces:
        body += piece
        _check(len(body), limit, float("inf"), source)
    return bytes(body)


def _check(size: int, limit: int, deadline: float, source: str) -> None:
    if size > limit:
        raise ValueError(f"{source} sent more than {limit:,} bytes")
    if time.monotonic() > deadline:
        raise TimeoutError(f"{source} did not finish its answer in time")
