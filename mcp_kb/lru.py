"""A bounded mapping that forgets its least recently used entries, safe to share across threads: the
one shape of every cache and bounded table (search answers, query vectors, admitted tokens, rate
buckets)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()  # searches run in worker threads: a lookup must not meet an eviction

    def get(self, key: K) -> V | None:
        """The entry (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` as the most recently used entry, forgetting the least recently used beyond `size`."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
