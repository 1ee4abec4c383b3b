"""Giving freed heap back to the system: glibc keeps the pages a process freed, so its RSS stays at its peak."""

from __future__ import annotations

import ctypes


def return_free_heap() -> None:
    """Give the heap pages this process freed back to the system (a dropped model; a server's start-up, whose
    imports and schema building leave about 15 MB freed behind)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator decides
        pass
