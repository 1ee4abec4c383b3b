"""PDF via pypdf: text per page; encrypted, scanned and malformed files reported clearly."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path

from pypdf import PageObject, PdfReader
from pypdf.errors import FileNotDecryptedError, PdfReadError, PyPdfError

from .. import ocr as engine
from ..document import Block, Document
from ...errors import ParseError
from .bounds import check_time
from .text import paragraph_blocks


MAX_OCR_PAGES = 500  # scanned pages read per document; a scan longer than this is cut, with a note
# A word and a hyphen ending a line, then the word starting the next line. Both match from a word's start only:
# tried inside a long run of letters (Chinese has no spaces), each would cost the rest of the run.
_LINE_END_HYPHEN = re.compile(r"(?<![\w-])(\w+(?:-\w+)*)-[ \t]*\n[ \t]*(\w+)")
_HYPHENATED = re.compile(r"(?<![\w-])\w+(?:-\w+)+")


def parse(path: Path, doc_id: str, ocr: bool = True) -> Document:
    """Text per page; a page without a text layer is read by OCR when it is on and installed."""
    # pypdf logs every oddity of real-world files as a warning; the outcome is what we report.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = _open(path)
    read_images = ocr and engine.available()
    blocks = []
    empty_pages: list[int] = []
    failed_pages: list[int] = []
    ocr_pages: list[int] = []
    for number, page in enumerate(reader.pages, start=1):
        check_time()
        try:
            text = page.extract_text() or ""
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError):
            failed_pages.append(number)
            continue
        page_blocks = paragraph_blocks(text.replace("\r\n", "\n"), page=number)
        if not page_blocks and read_images and len(ocr_pages) < MAX_OCR_PAGES:
            page_blocks = paragraph_blocks(_page_image_text(page), page=number)
            ocr_pages += [number] if page_blocks else []
        if not page_blocks:
            empty_pages.append(number)
        blocks.extend(page_blocks)
    blocks = _rejoin_broken_words(blocks)
    if not blocks:
        if failed_pages and not empty_pages:
            raise ParseError("parse error: no page's text could be extracted (malformed PDF)")
        raise ParseError(f"no text layer (scanned or image-only PDF){_why_unread(ocr, read_images)}")
    notes = []
    if ocr_pages:
        notes.append(f"pages read by OCR: {_ranges(ocr_pages)}")
    if empty_pages:
        notes.append(f"pages without a text layer: {_ranges(empty_pages)}{_why_unread(ocr, read_images)}")
    if failed_pages:
        notes.append(f"pages that could not be read: {_ranges(failed_pages)}")
    return Document(
        doc_id,
        "pdf",
        _title(reader, path),
        tuple(blocks),
        {"ocr": True} if ocr_pages else {},
        notes=tuple(notes),
        ocr_pages=len(ocr_pages),
        pages=len(reader.pages),
    )


def _rejoin_broken_words(blocks: list[Block]) -> list[Block]:
    """Blocks whose words broken at a line-end hyphen are whole again, so keyword search finds `dan-` / `gerous`
    as "dangerous". The line break goes whether the hyphen stays or not: it never stood for a space."""
    hyphenated = {word.lower() for block in blocks for word in _HYPHENATED.findall(block.text)}

    def rejoined(match: re.Match[str]) -> str:
        first, second = match.groups()
        compound = f"{first}-{second}"
        return compound if _keeps_hyphen(first, second, compound.lower() in hyphenated) else first + second

    return [replace(block, text=_LINE_END_HYPHEN.sub(rejoined, block.text)) for block in blocks]


def _keeps_hyphen(first: str, second: str, written_hyphenated: bool) -> bool:
    """Whether the hyphen at a line end belongs to the text: a typesetter breaks a word between lower-case letters
    (`dan-|gerous`, `Abbil-|dung`); `COVID-|19`, `HIV-|positive`, `well-|Known`, `state-of-the-|art` (TeX breaks a
    word that has a hyphen only there) and a compound the document writes whole elsewhere (`well-known`) keep it."""
    typeset_break = first[-1].islower() and second[0].islower() and "-" not in first
    return not typeset_break or written_hyphenated


def _page_image_text(page: PageObject) -> str:
    """OCR of the images on a page (a scanned page is one image); "" when it has none or they fail."""
    texts = []
    try:
        images = list(page.images)
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError):
        return ""
    for image in images:
        try:
            texts.append(engine.image_text(image.data))
        except ParseError:
            continue
    return "\n\n".join(text for text in texts if text.strip())


def _why_unread(ocr: bool, read_images: bool) -> str:
    if read_images:
        return ""  # OCR ran and found nothing (or the scan was longer than MAX_OCR_PAGES)
    return ": OCR is off for this knowledge base" if not ocr else f": {engine.INSTALL_HINT}"


def _open(path: Path) -> PdfReader:
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseError("encrypted: needs a password")
        len(reader.pages)  # forces the page tree to load, where malformed files fail
        return reader
    except ParseError:
        raise
    except FileNotDecryptedError as exc:
        raise ParseError("encrypted: needs a password") from exc
    except NotImplementedError as exc:  # unsupported encryption algorithm
        raise ParseError(f"encrypted: {exc}") from exc
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParseError(f"parse error: malformed PDF ({type(exc).__name__}: {exc})") from exc


def _title(reader: PdfReader, path: Path) -> str:
    try:
        title = reader.metadata.title if reader.metadata else None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError):
        title = None
    return str(title).strip() if title and str(title).strip() else path.stem


def _ranges(pages: list[int]) -> str:
    return ", ".join(str(p) for p in pages[:20]) + (" ..." if len(pages) > 20 else "")
