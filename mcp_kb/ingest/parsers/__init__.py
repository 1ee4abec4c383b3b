"""Parsers by file suffix: each turns a file into a Document or raises ParseError.

Built-in parser modules are imported on first use (pypdf and BeautifulSoup cost a third of a
second that a starting server should not pay); a plugin registers with `register`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import replace
from importlib import import_module
from pathlib import Path

from ..document import Document
from ...errors import ParseError
from ...settings import FILE_SECONDS
from ...text import name_text
from .bounds import time_budget
from .code import LANGUAGE_BY_SUFFIX, PLAIN_SUFFIXES  # tree-sitter itself is imported on first use

Parser = Callable[..., Document]  # (path, doc_id) -> Document; OCR-capable parsers also take `ocr: bool`
_PARSERS: dict[str, Parser] = {}
_BINARY: set[str] = set()  # suffixes whose parser reads bytes, not text: the text sniffing leaves them alone
_OCR: set[str] = set()  # suffixes whose parser takes `ocr` (whether it may read text from images)
_READ_IMAGES = ("pdf", "images")  # built-in modules whose parser takes `ocr`
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
# suffix -> (module.function in this package that reads it, whether the format is binary)
_BUILTIN = {
    **dict.fromkeys([".md", ".markdown", ".mdx"], ("markdown.parse", False)),
    ".pdf": ("pdf.parse", True),
    **dict.fromkeys([".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"], ("images.parse", True)),
    **dict.fromkeys([".txt", ".text", ".rst", ".log", ".org", ".adoc"], ("text.parse", False)),
    **dict.fromkeys(HTML_SUFFIXES, ("html.parse", False)),
    **dict.fromkeys([".json", ".jsonl", ".ndjson"], ("json.parse", False)),
    **dict.fromkeys([".docx", ".doc"], ("office.parse_docx", True)),
    **dict.fromkeys([".pptx", ".ppt"], ("office.parse_pptx", True)),
    **dict.fromkeys([".xlsx", ".xls"], ("sheets.parse_xlsx", True)),
    **dict.fromkeys([".csv", ".tsv"], ("sheets.parse_delimited", False)),
    **dict.fromkeys([*LANGUAGE_BY_SUFFIX, *PLAIN_SUFFIXES], ("code.parse", False)),
    ".ipynb": ("notebook.parse", False),
}


def register(suffixes: list[str], parser: Parser, binary: bool = False, ocr: bool = False) -> None:
    """Make `parser` handle files with these suffixes (lower case, with the dot).

    `binary`: the format is not text (PDF, Office, images), so files are not judged by their bytes
    before the parser sees them. `ocr`: the parser takes an `ocr` keyword (may it read images).
    """
    for suffix in suffixes:
        _PARSERS[suffix] = parser
        for flag, kinds in ((binary, _BINARY), (ocr, _OCR)):
            if flag:
                kinds.add(suffix)
            else:
                kinds.discard(suffix)


def registered() -> dict[str, tuple[Parser, bool, bool]]:
    """The parsers plugins or code registered (suffix -> parser, binary, ocr), not the built-in ones a process
    loads by itself: what a worker process must register to parse as this one does."""
    return {
        suffix: (parser, suffix in _BINARY, suffix in _OCR)
        for suffix, parser in _PARSERS.items()
        if not getattr(parser, "__module__", "").startswith(f"{__name__}.")
    }


def is_supported(suffix: str) -> bool:
    """Whether some parser reads files with this suffix (lower case, with the dot)."""
    return suffix in _PARSERS or suffix in _BUILTIN


def unsupported_type(suffix: str) -> str:
    """How a file no parser reads is reported: by its suffix (lower case, with the dot), shown as text."""
    return f"unsupported file type {name_text(suffix) or '(none)'}"


def supported_suffixes() -> list[str]:
    """Every suffix some parser reads, sorted."""
    return sorted({*_PARSERS, *_BUILTIN})


def is_binary_format(suffix: str) -> bool:
    """Whether the parser for this suffix reads a binary format (it judges the bytes itself)."""
    if suffix in _PARSERS:
        return suffix in _BINARY
    return _BUILTIN.get(suffix, ("", False))[1]


def parse_file(path: Path, doc_id: str, ocr: bool = True, seconds: float = FILE_SECONDS) -> Document:
    """Parse one file (`ocr`: may text be read from images) within `seconds`; any failure becomes a ParseError
    naming the reason, except running out of memory (a worker process reports that: ingest/workers.py)."""
    suffix = path.suffix.lower()
    parser = _parser_for(suffix)
    if parser is None:
        raise ParseError(unsupported_type(suffix))
    try:
        with time_budget(seconds):
            document = parser(path, doc_id, ocr=ocr) if suffix in _OCR else parser(path, doc_id)
        return _titled_by_its_id(document, path)
    except (ParseError, MemoryError):
        raise
    except OSError as exc:
        raise ParseError(f"unreadable: {exc.strerror or exc}") from exc
    except Exception as exc:  # a parser bug or a library failure on odd input: report, never crash the sync
        raise ParseError(f"parse error: {type(exc).__name__}: {exc}") from exc


def _titled_by_its_id(document: Document, path: Path) -> Document:
    """A title a parser took from the local file's name, taken from the document's own name instead: a repository's
    file or a downloaded page is held in a file named by a hash."""
    own = posixpath.basename(document.doc_id.rstrip("/")) or document.doc_id
    if path.name == own or document.title not in (path.stem, path.name):
        return document
    return replace(document, title=own if document.title == path.name else posixpath.splitext(own)[0])


def _parser_for(suffix: str) -> Parser | None:
    if suffix not in _PARSERS and suffix in _BUILTIN:
        target, binary = _BUILTIN[suffix]
        module, function = target.split(".")
        register([suffix], getattr(import_module(f".{module}", __name__), function), binary, ocr=module in _READ_IMAGES)
    return _PARSERS.get(suffix)
