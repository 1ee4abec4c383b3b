"""Plain text files, and the decoding every text-based parser shares."""

from __future__ import annotations

import re
from pathlib import Path

import charset_normalizer

from ..document import Block, Document
from ...errors import ParseError

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
# Encodings worth trying on non-UTF-8 files, most likely first for this tool's users.
_LEGACY = ["gb18030", "big5", "shift_jis", "euc_kr", "cp1252", "latin_1"]


def decode_bytes(data: bytes) -> str:
    """Decode UTF-8/UTF-16 (BOM) or a legacy encoding (GB18030, Big5, ...) detected from the bytes."""
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
    best = charset_normalizer.from_bytes(data, cp_isolation=_LEGACY).best()
    if best is None:
        raise ParseError("undecodable: not UTF-8 and no known encoding fits")
    return str(best)


def read_text(path: Path) -> str:
    return decode_bytes(path.read_bytes()).replace("\r\n", "\n").replace("\r", "\n")


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
    return Document(doc_id, "text", path.stem, tuple(paragraph_blocks(text)))
