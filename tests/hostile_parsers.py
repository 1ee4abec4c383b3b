"""Parsers that misbehave as a parser can: written as a plugin's would be (module-level functions), so that
a worker process can be given them, for the tests of ingest/workers.py."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from mcp_kb.ingest.document import Block, Document


def hang(path: Path, doc_id: str) -> Document:
    """Never returns, and never checks its time budget (a C call that does not come back)."""
    _arrived(path)
    while True:
        time.sleep(3600)


def hang_once(path: Path, doc_id: str) -> Document:
    """Hangs the first time it meets a file (until its worker is killed); reads it the next time."""
    if _marker(path).exists():
        return Document(doc_id, "text", path.stem, (Block(path.read_text(encoding="utf-8").strip()),))
    hang(path, doc_id)
    raise AssertionError("unreachable")


def crash(path: Path, doc_id: str) -> Document:
    """A segmentation fault, as a C parser meets one."""
    _arrived(path)
    ctypes.string_at(0)
    raise AssertionError("unreachable")


def hog(path: Path, doc_id: str) -> Document:
    """Holds ever more memory, 32 MB at a time, every page of it written."""
    held = []
    while True:
        held.append(bytearray(b"x" * (32 * 1024 * 1024)))


def meet(path: Path, doc_id: str) -> Document:
    """Waits up to 20 s for every other file of its folder with this suffix to be parsed at the same time:
    its text says whether they were."""
    _arrived(path)
    others = [p for p in path.parent.glob(f"*{path.suffix}") if p != path]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(_marker(p).exists() for p in others):
        time.sleep(0.01)
    met = all(_marker(p).exists() for p in others)
    return Document(doc_id, "text", path.stem, (Block(f"{path.stem} met the others: {met}"),))


def _arrived(path: Path) -> None:
    """Say that this file's parsing began, and in which process (the marker holds its pid)."""
    _marker(path).write_text(str(os.getpid()), encoding="ascii")


def _marker(path: Path) -> Path:
    return path.parent.parent / "markers" / f"{path.name}.pid"
