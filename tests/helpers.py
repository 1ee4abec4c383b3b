"""Helpers the tests share (imported as `helpers`; conftest only holds fixtures)."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
OFFLINE_MODEL = SHARED / "models" / "all-MiniLM-L6-v2-onnx"


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """Write a text file, creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares width×height RGBA pixels around almost no data (an image bomb's header)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1000))
            + chunk(b"IEND", b""))
