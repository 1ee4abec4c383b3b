"""Work taken a fixed number of items at a time: a sync's batches and waves, a model's batches, a query's IN lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

_T = TypeVar("_T")


def sliced(items: Sequence[_T], size: int) -> list[list[_T]]:
    """`items` in consecutive slices of `size` (the last one shorter; none when there are no items)."""
    return [list(items[start : start + size]) for start in range(0, len(items), size)]
