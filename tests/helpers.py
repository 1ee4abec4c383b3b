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
