"""Text rules every layer shares: which characters are CJK, where a sentence ends (English and
Chinese), and how much two heading paths share. Chunking, keyword analysis, token estimates,
passages, the document view and the tool descriptions all read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "as_sentence",
    "clipped",
    "is_number",
    "printable",
]  # what the core's API (mcp_kb.api) offers from this module

# Kana, CJK ideographs (with extension A and compatibility forms) and Hangul.
CJK_CHARACTERS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# A sentence ends after one of these wherever it stands, or after one of the spaced ones when a
# space follows ("v2.1" and "10:30" are no ends).
_ENDS = "。！？；!?"
_SPACED_ENDS = ".;:"

SENTENCE_SPLIT = re.compile(rf"(?<=[{_ENDS}])|(?<=[{_SPACED_ENDS}])(?=\s)")  # the point after each end
SENTENCE_END = re.compile(rf"(?:[{_ENDS}]|[{_SPACED_ENDS}](?=\s)|\n)\s*")  # an end or a line break
SENTENCE_ENDS_BEFORE = re.compile(rf"(?:[{_ENDS}]|[{_SPACED_ENDS}]\s|\n)\s*$")  # text that stops at one


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence end and line break (English and Chinese); joined, they are `text`."""
    pieces, start = [], 0
    for match in SENTENCE_END.finditer(text):
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    return pieces + [text[start:]] if start < len(text) else pieces


def as_sentence(text: str) -> str:
    """Text ending as a sentence: a full stop added only where no sentence end closes it."""
    text = text.strip()
    return text if text.endswith((*_ENDS, ".")) else f"{text}."


_OVERLAP_SEARCH_CHARS = 4_000  # an overlap is a few dozen tokens; never look further for one


def without_overlap(previous: str, text: str) -> str:
    """`text` less its opening lines when they repeat the end of `previous` (the chunk overlap)."""
    end = previous.rstrip()
    cuts = [index for index, char in enumerate(text[:_OVERLAP_SEARCH_CHARS]) if char == "\n"]
    for cut in reversed(cuts):
        repeated = text[:cut].strip()
        if repeated and end.endswith(repeated):
            return text[cut + 1 :].lstrip("\n")
    return text


def shared_depth(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading headings two heading paths share."""
    depth = 0
    while depth < min(len(a), len(b)) and a[depth] == b[depth]:
        depth += 1
    return depth


# What a terminal acts on rather than shows: C0 and C1 controls (ESC starts a command), DEL, the Unicode
# line and paragraph separators, and the marks that reorder what follows them (bidi overrides).
_TERMINAL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text someone else wrote, fit to print on a terminal: every control shown as its escape (`\\x1b`,
    `\\n`, `\\u2028`), so it can neither forge a line nor clear the screen, and a name's bytes that are not UTF-8
    as `\\xe9` (a strict terminal refuses them). Other text, CJK included, stays."""
    return _TERMINAL_CONTROLS.sub(
        lambda found: repr(found.group())[1:-1] if ord(found.group()) < 0x100 else f"\\u{ord(found.group()):04x}",
        name_text(text),
    )


def name_text(name: str) -> str:
    """A file or folder name as valid text: bytes that are not UTF-8 (Python holds them as surrogates, which
    TOML, JSON and a strict terminal refuse) shown as `\\xe9`; a name that is text stays as it is."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate of another kind (JSON's "\\ud800"), not a name's own bytes
        return name.encode("utf-8", "surrogatepass").decode("utf-8", "backslashreplace")


def is_text(name: str) -> bool:
    """Whether a name is UTF-8 text (not one in other bytes, held as surrogates)."""
    return name_text(name) == name


_MOST_DIGITS = 18  # a version, page, line, chunk or port of more digits names nothing


def is_number(text: str) -> bool:
    """Whether `text` is a number as versions, pages, lines, chunks and ports are written: ASCII digits only
    (str.isdigit takes "²", which int() refuses; int() takes "٣" and "３"), and few enough to name something (int()
    refuses over 4,300 digits)."""
    return text.isascii() and text.isdigit() and len(text) <= _MOST_DIGITS


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis saying so."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
