"""Writing a file so that a reader, in this process or another, never sees half of it: the bytes go to
a temporary file of a name no other writer uses, which then replaces the file in one step."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


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
