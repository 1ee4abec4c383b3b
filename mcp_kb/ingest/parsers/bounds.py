"""What one file may make a parser unpack, hold and spend, so that no single file can take a sync past
its memory bound or stall it: the file fails with a reason and the rest is indexed.

- Office packages (.docx .pptx .xlsx are zip files) are judged by their zip directory before a
  part is read: the sizes it declares are a real bound, since Python's zipfile stops a part at
  its declared size (a part that inflates further fails its CRC check).
- Images are judged by the size their header declares before a pixel is decoded.
- Parsers call `check_time()` in their loops (paragraphs, slides, rows, pages): a file that has
  used up its time budget fails there.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from ...errors import ParseError

MAX_UNPACKED_BYTES = 200 * 1024 * 1024  # an Office package's parts, all together
# XML is what the libraries build trees of (about 9 bytes of memory per byte: 23 MB of Word XML
# peaked at 217 MB); media parts are only held as bytes.
MAX_XML_BYTES = 50 * 1024 * 1024
MAX_PARTS = 10_000  # entries in one package (a real document has dozens; each costs the reader memory)
MAX_IMAGE_PIXELS = 60_000_000  # decoded before scaling: 60 MP of RGBA is 240 MB
PARSE_SECONDS = 120.0  # per file

_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("parse_deadline", default=float("inf"))


@contextlib.contextmanager
def time_budget() -> Iterator[None]:
    """Give the file parsed inside this block PARSE_SECONDS to finish."""
    token = _deadline.set(time.monotonic() + PARSE_SECONDS)
    try:
        yield
    finally:
        _deadline.reset(token)


def check_time() -> None:
    """Fail the file being parsed if it has used up its time budget."""
    if time.monotonic() > _deadline.get():
        raise ParseError(f"parsing took longer than {PARSE_SECONDS:g} s, the limit per file; split the file to "
                         f"index it")


def check_package(path: Path, kind: str) -> None:
    """An Office package whose zip directory promises more than a parser may unpack fails before it is read."""
    try:
        with zipfile.ZipFile(path) as package:
            parts = package.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as exc:
        raise ParseError(f"not a readable {kind} file: its zip structure is broken ({exc})") from exc
    if len(parts) > MAX_PARTS:
        raise ParseError(f"the {kind} package holds {len(parts):,} parts, over the {MAX_PARTS:,} limit")
    unpacked = sum(part.file_size for part in parts)
    if unpacked > MAX_UNPACKED_BYTES:
        raise ParseError(f"unpacks to {_size(unpacked)}, over the {_size(MAX_UNPACKED_BYTES)} limit per file")
    xml = sum(part.file_size for part in parts if part.filename.lower().endswith((".xml", ".rels", ".vml")))
    if xml > MAX_XML_BYTES:
        raise ParseError(f"its XML unpacks to {_size(xml)}, over the {_size(MAX_XML_BYTES)} limit per file")


def check_image(width: int, height: int) -> None:
    """An image whose header declares more pixels than may be decoded fails before decoding."""
    if width * height > MAX_IMAGE_PIXELS:
        raise ParseError(f"image of {width}×{height} pixels ({width * height / 1e6:.0f} MP), over the "
                         f"{MAX_IMAGE_PIXELS / 1e6:.0f} MP limit")


def _size(count: int) -> str:
    return f"{count / 1024 ** 3:.1f} GB" if count >= 1024 ** 3 else f"{count / 1024 ** 2:.0f} MB"
