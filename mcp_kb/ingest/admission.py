"""Which files of a source are documents, decided once for every source (a folder, a repository): by name (hidden,
printable, globs), by type, by size and by content (binary despite a text extension)."""

from __future__ import annotations

import pathspec

from ..settings import KBConfig, in_megabytes
from ..text import is_text, name_text
from .parsers import is_binary_format, unsupported_type

# A NUL or a high share of control characters in the first block means binary, whatever the extension says.
_SNIFF_BYTES = 8192
_TEXT_CONTROL = {7, 8, 9, 10, 12, 13, 27}


def left_out_as_hidden(path: str, committed: bool) -> bool:
    """Whether a hidden entry (a name starting with a dot, or one below such a folder) is left out. On disk it is:
    tools keep their state, caches and secrets there (`.git`, `.venv`, `.config/gh/hosts.yml`). In a repository's
    commit it is not: what is committed is what the team chose to keep (`.github/CONTRIBUTING.md`)."""
    return not committed and any(part.startswith(".") for part in path.split("/"))


def name_reason(path: str, committed: bool) -> str:
    """Why a file's name keeps it out ("": it does not). On disk no name does: a folder's id holds any name as text
    (text.name_text: bytes that are not UTF-8 as `\\xe9`) and leads back to the file. A commit's id must name its
    path in git again, and a report of one shows it escaped: there a name that is not printable UTF-8 is left out."""
    if not committed or (is_text(path) and path.isprintable()):
        return ""
    return "file name is not printable UTF-8: left out"


def shown_name(path: str) -> str:
    """A name as an id shows it: as text (text.name_text), and one that does not print with its odd characters
    escaped (`evil\\x1b]0;…`), so no terminal that prints a report runs an escape sequence."""
    text = name_text(path)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def matches_globs(doc_id: str, include: list[str], exclude: list[str]) -> bool:
    if include and not _glob_spec(tuple(include)).match_file(doc_id):
        return False
    return not (exclude and _glob_spec(tuple(exclude)).match_file(doc_id))


_SPEC_CACHE: dict[tuple[str, ...], pathspec.PathSpec[pathspec.Pattern]] = {}


def _glob_spec(patterns: tuple[str, ...]) -> pathspec.PathSpec[pathspec.Pattern]:
    if patterns not in _SPEC_CACHE:
        _SPEC_CACHE[patterns] = pathspec.PathSpec.from_lines("gitignore", patterns)
    return _SPEC_CACHE[patterns]


def unsupported_reason(suffix: str, kb: KBConfig) -> str:
    """Why a file no parser reads is reported ("": it is left out in silence): the KB's `include` asked for files by
    name, so its user is told why one of them is not indexed."""
    return unsupported_type(suffix) if kb.include else ""


def size_reason(size: int, kb: KBConfig) -> str:
    """Why a file is too large for the KB ("": it is not), judged before a byte of it is read."""
    if size <= kb.max_file_bytes:
        return ""
    return f"too large: {in_megabytes(size):.1f} MB > max_file_size_mb = {kb.max_file_size_mb:g}"


def binary_reason(path: str, suffix: str) -> str:
    """Why a text-format file is skipped as binary, judged by its first bytes ("": it is text)."""
    if is_binary_format(suffix):
        return ""  # its parser reads bytes and judges them itself
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return ""  # UTF-16 with BOM has NULs by design
    if b"\x00" in head:
        return "binary content (NUL bytes) despite a text extension"
    controls = sum(1 for byte in head if byte < 32 and byte not in _TEXT_CONTROL)
    if head and controls / len(head) > 0.05:
        return "binary content (control characters) despite a text extension"
    return ""
