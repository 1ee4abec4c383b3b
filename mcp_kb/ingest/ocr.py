"""Optical character recognition for images and scanned PDF pages, when the `ocr` extra is installed.

The engine is RapidOCR's onnxruntime build: its wheel carries the PP-OCRv4 detection and
recognition models (Chinese and English) and runs offline on the onnxruntime fastembed already
brings. Loaded once, on first use. Images over MAX_PIXELS are scaled down first, so a 60 MP
photo costs bounded time and memory.
"""

from __future__ import annotations

import importlib.util
import io
import threading
import warnings

from ..errors import ParseError
from .parsers.bounds import check_image

MAX_PIXELS = 8_000_000  # larger images are scaled down to this first (an A4 page scanned at 300 dpi is 8.7 MP)
INSTALL_HINT = "install the OCR extra to read it: pip install 'mcp-kb-server[ocr]'"
_ENGINE = None
_LOCK = threading.Lock()


def available() -> bool:
    """Whether the OCR engine is installed."""
    return importlib.util.find_spec("rapidocr_onnxruntime") is not None


def image_text(data: bytes) -> str:
    """The text in an image (any format Pillow reads), one line per detected text line."""
    import numpy as np
    from PIL import Image

    try:
        with warnings.catch_warnings():  # Pillow warns of a large size at open; the check below decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))  # reads the header only
        with opened:
            check_image(opened.width, opened.height)
            image = bounded(opened).convert("RGB")  # scale first: a copy of a 60 MP image is 180 MB
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ParseError(f"unreadable image: {exc}") from exc
    with _LOCK:
        lines, _ = _engine()(np.asarray(image))
    return "\n".join(text for _box, text, _score in lines or [])


def bounded(image):
    """The image, scaled down (aspect kept) when it has more than MAX_PIXELS pixels."""
    pixels = image.width * image.height
    if pixels <= MAX_PIXELS:
        return image
    scale = (MAX_PIXELS / pixels) ** 0.5
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    image.draft("RGB", size)  # JPEGs decode at a reduced size straight away
    return image.resize(size, reducing_gap=2.0)


def _engine():
    global _ENGINE
    if _ENGINE is None:
        from rapidocr_onnxruntime import RapidOCR

        _ENGINE = RapidOCR()
    return _ENGINE
