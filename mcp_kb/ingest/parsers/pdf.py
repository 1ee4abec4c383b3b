"""PDF via pypdf: text per page; encrypted, scanned and malformed files reported clearly."""

from __future__ import annotations

import logging
from pathlib import Path

from pypdf import PdfReader
from pypdf.errors import FileNotDecryptedError, PdfReadError, PyPdfError

from ..document import Document
from ...errors import ParseError
from .text import paragraph_blocks



def parse(path: Path, doc_id: str) -> Document:
    # pypdf logs every oddity of real-world files as a warning; the outcome is what we report.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = _open(path)
    blocks = []
    empty_pages = []
    failed_pages = []
    for number, page in enumerate(reader.pages, start=1):
        try:
            text = page.extract_text() or ""
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError):
            failed_pages.append(number)
            continue
        page_blocks = paragraph_blocks(text.replace("\r\n", "\n"), page=number)
        if not page_blocks:
            empty_pages.append(number)
        blocks.extend(page_blocks)
    if not blocks:
        if failed_pages and not empty_pages:
            raise ParseError("parse error: no page's text could be extracted (malformed PDF)")
        raise ParseError("no text layer (scanned or image-only PDF): run OCR first to index it")
    notes = []
    if empty_pages:
        notes.append(f"pages without a text layer: {_ranges(empty_pages)}")
    if failed_pages:
        notes.append(f"pages that could not be read: {_ranges(failed_pages)}")
    return Document(doc_id, "pdf", _title(reader, path), tuple(blocks), {}, notes=tuple(notes))


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
