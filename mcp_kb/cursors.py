"""Cursors: where a read or a browse stopped, handed to the caller and taken back, tamper-evident.

A place is a little JSON object whose keys are one letter each (reader.py writes them: p path, h version, a where
to go on, e where the part ends, i section, o order or outline): a model reads every character of a cursor. A path
or pattern longer than `CARRIED_BYTES` is carried by its digest (resolved against the KB's paths when the cursor
comes back), so a cursor stays short whatever it names: paths may be 2,000 characters of Chinese.

A cursor is its place (JSON) and an HMAC of it under a key this process drew at start: an edited cursor, or one
from another server process, is refused in one line. What a cursor names is checked again when it comes back
(the caller's view of the KB, the document's version, the bounds), so even a valid one reaches nothing the
caller could not ask for by name.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from typing import Any

from .errors import CursorError

_SIGNATURE_BYTES = 16
_DIGEST_BYTES = 12
CARRIED_BYTES = 512  # of a path or pattern (in its JSON) a cursor carries as written; a longer one by its digest
_ESCAPED_IN_JSON = r'[\x00-\x1f"\\]'  # what a cursor's JSON writes longer than UTF-8 (a control character: \u0001)


class Cursors:
    def __init__(self, secret: str | None = None):
        """Cursors signed with a key from `secret` (`[server] cursor_secret`, shared by replicas), or with one this
        process draws."""
        self._key = hashlib.sha256(secret.encode()).digest() if secret else secrets.token_bytes(32)

    def make(self, kind: str, kb: str, place: Mapping[str, object]) -> str:
        """A cursor for `place` in a `kind` answer (read, browse) on `kb`: the place and a signature that covers
        the kind and the KB too (they are not sent: the model reads every character of a cursor)."""
        body = json.dumps(place, ensure_ascii=False, separators=(",", ":")).encode()
        return _encoded(body + self._signature(kind, kb, body))

    def open(self, cursor: str, kind: str, kb: str) -> dict[str, Any]:  # json.loads of the signed place
        """The place a cursor holds, when this process made it for a `kind` answer on `kb`; else CursorError."""
        try:
            raw = base64.urlsafe_b64decode(cursor.encode("ascii") + b"=" * (-len(cursor) % 4))
        except (ValueError, binascii.Error, UnicodeEncodeError):
            raw = b""
        body, signature = raw[:-_SIGNATURE_BYTES], raw[-_SIGNATURE_BYTES:]
        if len(raw) <= _SIGNATURE_BYTES or not hmac.compare_digest(signature, self._signature(kind, kb, body)):
            raise CursorError(
                "this cursor is not valid here (changed, given by another server process, or by "
                "another call: pass it to the call that gave it, with the same kb); ask again without "
                "it"
            )
        place: dict[str, Any] = json.loads(body)  # what make() wrote, signed: its values are read as written
        return place

    def _signature(self, kind: str, kb: str, body: bytes) -> bytes:
        signed = b"\0".join((kind.encode(), kb.encode(), body))
        return hmac.new(self._key, signed, hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def carried(text: str) -> bool:
    """Whether a cursor carries `text` as written (else by its digest)."""
    return _carried_size(text) <= CARRIED_BYTES


def digest(text: str) -> str:
    """What a cursor carries of a long path or pattern: enough to tell it among a KB's."""
    return _encoded(hashlib.sha256(_utf8(text)).digest()[:_DIGEST_BYTES])


def leading(text: str) -> str:
    """The longest start of `text` a cursor carries (where a long path sorts, near enough), found by halving."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if carried(text[:middle]) else (low, middle - 1)
    return text[:low]


def named(paths: Any, wanted: str) -> str | None:
    """The one of `paths` (an Arrow array of a KB's paths, or of their starts) a cursor names by the digest
    `wanted`, if any. Only text whose JSON is longer than UTF-8 (what JSON escapes) or over the bound can be carried
    by digest: the rest is left out without hashing it (100,000 deep paths cost 111 ms a cursor when all were)."""
    import pyarrow.compute as pc  # here: a server's handshake need not wait for Arrow's compute functions

    maybe = paths.filter(
        pc.or_(pc.greater(pc.binary_length(paths), CARRIED_BYTES), pc.match_substring_regex(paths, _ESCAPED_IN_JSON))
    )
    return next((text for text in maybe.to_pylist() if not carried(text) and digest(text) == wanted), None)


def _carried_size(text: str) -> int:
    """The bytes `text` takes in a cursor's JSON: a control character takes six (`\\u0001`)."""
    return len(_utf8(json.dumps(text, ensure_ascii=False))) - 2


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a caller's text may hold a lone surrogate: never an error here


def _encoded(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
