"""Files mcp-kb writes beside its work: replaced in one step, so that a reader in this process or
another never sees half of one (the bytes go to a temporary file of a name no other writer uses), and
append-only JSON lines rotated by size (the query log, the audit trail)."""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step (its folder is made when missing); a failed write leaves
    the old file and no temporary one behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


class JsonLines:
    """An append-only file of JSON lines; past `max_bytes` it becomes `<name>.1` (the one before is
    dropped) and a new one starts."""

    def __init__(self, path: Path, max_bytes: int):
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def append(self, entry: Mapping[str, object]) -> None:
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if self.path.exists() and self.path.stat().st_size + len(line.encode()) > self.max_bytes:
                self.path.replace(rotated(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)


def rotated(path: Path) -> Path:
    """Where a JSON-lines file's previous part lives once it is rotated."""
    return path.with_name(path.name + ".1")


def json_lines(path: Path) -> Iterator[Any]:
    """The entries of a rotated JSON-lines file, the older part first. Lines end at "\\n" only (a value
    holding U+2028 or U+0085 is one line, as it was written); a line cut by a crash is passed over."""
    for part in (rotated(path), path):
        if not part.exists():
            continue
        for line in part.read_text(encoding="utf-8", errors="replace").split("\n"):
            try:
                yield json.loads(line)
            except ValueError:
                continue
