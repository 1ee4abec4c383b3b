"""Optical character recognition for images and scanned PDF pages, when the `ocr` extra is installed.

The engine is RapidOCR's onnxruntime build: its wheel carries the PP-OCRv4 detection and
recognition models (Chinese and English) and runs offline on the onnxruntime fastembed already
brings. Loaded once, on first use. Images are scaled to the side the engine reads (OCR_SIDE)
before anything else, so a 60 MP photo costs bounded time and memory.
"""

from __future__ import annotations

import importlib.util
import io
import threading
import warnings
from typing import TYPE_CHECKING, Protocol

from ..errors import ParseError
from .parsers.bounds import check_image

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from PIL import Image

# RapidOCR reads an image scaled to this longest side. On an A4 page scanned at 300 dpi (10 pt text,
# English and Chinese) its default, 2000, read 83 % of the text and peaked at 870 MB; 1600 read 99.7 %
# at 640 MB; 1280 read 95 % at 450 MB.
OCR_SIDE = 1600
INSTALL_HINT = (
    "install the OCR extra to read it: pip install rapidocr-onnxruntime into mcp-kb's environment "
    "(in a clone: pip install -e '.[ocr]')"
)
_Line = tuple[object, str, float]  # a text line RapidOCR found: [box, text, score]


class _Engine(Protocol):
    """RapidOCR's call (its package carries no type information): the lines found, None when there are
    none, and how long its stages took."""

    def __call__(self, img_content: NDArray[np.uint8]) -> tuple[list[_Line] | None, list[float] | None]: ...


_ENGINE: _Engine | None = None
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


def bounded(image: Image.Image) -> Image.Image:
    """The image, scaled down (aspect kept) to OCR_SIDE on its longest side: the engine would scale it
    so anyway, and a smaller copy is all this process then holds."""
    longest = max(image.width, image.height)
    if longest <= OCR_SIDE:
        return image
    scale = OCR_SIDE / longest
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    image.draft("RGB", size)  # JPEGs decode at a reduced size straight away
    return image.resize(size, reducing_gap=2.0)


def _engine() -> _Engine:
    global _ENGINE
    if _ENGINE is None:
        from rapidocr_onnxruntime import RapidOCR

        _ENGINE = RapidOCR(max_side_len=OCR_SIDE)
    return _ENGINE
