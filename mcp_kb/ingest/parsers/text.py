"""Plain text files, and the decoding every text-based parser shares."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from ..document import Block, Document
from ...errors import ParseError

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
# Encodings worth trying on non-UTF-8 files, most likely first for this tool's users.
_LEGACY = ["gb18030", "big5", "shift_jis", "euc_kr", "cp1252", "latin_1"]
_READ_AS_CP1252 = {"iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "windows-1252"}


def decode_bytes(data: bytes, declared: str = "") -> str:
    """Decode text: a byte-order mark, else UTF-8, else the charset the file or its server declared
    (any encoding Python knows), else a legacy encoding (GB18030, Big5, ...) detected from the bytes.

    Valid UTF-8 wins over a declaration because servers often declare Latin-1 for UTF-8 pages,
    while legacy text with non-ASCII bytes almost never happens to be valid UTF-8.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError as exc:
                raise ParseError(f"undecodable: {encoding} byte-order mark but invalid {encoding}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if declared:
        try:
            return data.decode(_python_codec(declared))
        except (LookupError, UnicodeDecodeError):
            pass  # an unknown or wrong declaration: detect instead
    import charset_normalizer  # only legacy text needs it: every command that can parse would import it (0.02 s)

    best = (
        charset_normalizer.from_bytes(data, cp_isolation=_LEGACY).best() or charset_normalizer.from_bytes(data).best()
    )
    if best is None:
        raise ParseError(
            "undecodable: not UTF-8 and no known encoding fits"
            + (f" (declared {declared[:40]!r} does not fit either)" if declared else "")
        )
    return str(best)


def _python_codec(charset: str) -> str:
    """Python's codec for a charset label as web pages write it; browsers read the Latin-1 and ASCII
    labels as windows-1252 (WHATWG), and so does this."""
    label = charset.strip().strip("\"'").lower()
    if label in _READ_AS_CP1252:
        return "cp1252"
    return codecs.lookup(label).name


def read_text(path: Path) -> str:
    return normalize_newlines(decode_bytes(path.read_bytes()))


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def paragraph_blocks(text: str, page: int | None = None) -> list[Block]:
    """Split text at blank lines into blocks that remember their line span."""
    blocks = []
    for match in re.finditer(r"\S(?:.*?\S)??(?=\n\s*\n|\s*\Z)", text, flags=re.S):
        line_start = text.count("\n", 0, match.start()) + 1
        line_end = line_start + match.group().count("\n")
        blocks.append(Block(match.group(), page=page, line_start=line_start, line_end=line_end))
    return blocks


def parse(path: Path, doc_id: str) -> Document:
    text = read_text(path)
    return Document(doc_id, "text", path.stem, tuple(paragraph_blocks(text)), source=text)
