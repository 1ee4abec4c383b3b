"""Images (.png .jpg .jpeg .tif .tiff .bmp .webp): their text, read by OCR (the `ocr` extra)."""

from __future__ import annotations

from pathlib import Path

from .. import ocr as engine
from ..document import Document
from ...errors import ParseError
from .text import paragraph_blocks


def parse(path: Path, doc_id: str, ocr: bool = True) -> Document:
    if not ocr:
        raise ParseError('image not read: OCR is off for this knowledge base (ocr = "off")')
    if not engine.available():
        raise ParseError(f"image without a text layer: {engine.INSTALL_HINT}")
    blocks = paragraph_blocks(engine.image_text(path.read_bytes()))
    if not blocks:
        raise ParseError("nothing to index: OCR found no text in the image")
    return Document(doc_id, "image", path.stem, tuple(blocks), {"ocr": True}, ocr_pages=1)
