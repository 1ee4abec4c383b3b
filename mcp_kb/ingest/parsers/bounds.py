"""What one file may make a parser unpack, hold and spend, so that no single file can take a sync past
its memory bound or stall it: the file fails with a reason and the rest is indexed.

- Office packages (.docx .pptx .xlsx are zip files) are judged by their zip directory before a
  part is read: the sizes it declares are a real bound, since Python's zipfile stops a part at
  its declared size (a part that inflates further fails its CRC check).
- Images are judged by the size their header declares before a pixel is decoded.
- Parsers call `check_time()` in their loops (paragraphs, slides, rows, pages): a file that has
  used up its time budget fails there, with the same words as the kill timer of its worker process
  (ingest/workers.py), which is the bound that holds inside a C call too.
- A file makes at most MAX_CHUNKS chunks: that bounds what embedding one file costs.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from ...errors import ParseError
from ...settings import megabytes

MAX_UNPACKED_BYTES = megabytes(200)  # an Office package's parts, all together
# XML is what the libraries build trees of (about 9 bytes of memory per byte: 23 MB of Word XML
# peaked at 217 MB); media parts are only held as bytes.
MAX_XML_BYTES = megabytes(50)
MAX_PARTS = 10_000  # entries in one package (a real document has dozens; each costs the reader memory)
MAX_IMAGE_PIXELS = 60_000_000  # decoded before scaling: 60 MP of RGBA is 240 MB
# 20,000 chunks of 256 tokens are about 5 million tokens (a 10 MB text, a book of 10,000 pages): some
# minutes of embedding on a CPU.
MAX_CHUNKS = 20_000

# (deadline, seconds allowed) of the file being parsed
_budget: contextvars.ContextVar[tuple[float, float]] = contextvars.ContextVar(
    "parse_budget", default=(float("inf"), 0.0)
)


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Give the file parsed inside this block `seconds` to finish."""
    token = _budget.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def check_time() -> None:
    """Fail the file being parsed if it has used up its time budget."""
    deadline, seconds = _budget.get()
    if time.monotonic() > deadline:
        raise ParseError(too_slow(seconds))


def too_slow(seconds: float) -> str:
    """Why a file that ran out of time failed."""
    return (
        f"parsing took longer than {seconds:g} s, the limit per file; split the file to index it (or raise "
        f"[sync] file_seconds)"
    )


def too_large(megabytes: int) -> str:
    """Why a file that needed more memory than a worker may hold failed."""
    return (
        f"parsing needed more than {megabytes} MB of memory, the limit per file; split the file to index it "
        f"(or raise [sync] file_memory_mb)"
    )


def check_chunks(count: int) -> None:
    """Fail a file that makes more chunks than one file may."""
    if count > MAX_CHUNKS:
        raise ParseError(
            f"makes {count:,} chunks, over the {MAX_CHUNKS:,} limit per file; split the file (or raise "
            f"[kb.chunking] max_tokens) to index it"
        )


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
        raise ParseError(
            f"image of {width}×{height} pixels ({width * height / 1e6:.0f} MP), over the "
            f"{MAX_IMAGE_PIXELS / 1e6:.0f} MP limit"
        )


def _size(count: int) -> str:
    return f"{count / 1024**3:.1f} GB" if count >= 1024**3 else f"{count / 1024**2:.0f} MB"
