"""Parsers by file suffix: each turns a file into a Document or raises ParseError.

Built-ins register through the same `register` call a plugin would use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..document import Document
from ..errors import ParseError

Parser = Callable[[Path, str], Document]
_PARSERS: dict[str, Parser] = {}


def register(suffixes: list[str], parser: Parser) -> None:
    """Make `parser` handle files with these suffixes (lower case, with the dot)."""
    for suffix in suffixes:
        _PARSERS[suffix] = parser


def supported_suffixes() -> frozenset[str]:
    return frozenset(_PARSERS)


def parse_file(path: Path, doc_id: str) -> Document:
    """Parse one file; any failure becomes a ParseError naming the reason."""
    parser = _PARSERS.get(path.suffix.lower())
    if parser is None:
        raise ParseError(f"unsupported file type {path.suffix or '(none)'}")
    try:
        return parser(path, doc_id)
    except ParseError:
        raise
    except OSError as exc:
        raise ParseError(f"unreadable: {exc.strerror or exc}") from exc
    except Exception as exc:  # a parser bug or a library failure on odd input: report, never crash the sync
        raise ParseError(f"parse error: {type(exc).__name__}: {exc}") from exc


def _register_builtins() -> None:
    from . import html, json, markdown, pdf, text

    register(markdown.SUFFIXES, markdown.parse)
    register(pdf.SUFFIXES, pdf.parse)
    register(text.SUFFIXES, text.parse)
    register(html.SUFFIXES, html.parse)
    register(json.SUFFIXES, json.parse)


_register_builtins()
