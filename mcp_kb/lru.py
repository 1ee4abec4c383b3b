"""A bounded mapping that forgets its least recently used entries, safe to share across threads: the
one shape of every cache and bounded table (search answers, query vectors, admitted tokens, rate
buckets)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    def __init__(self, size: int, weigh: Callable[[V], int] | None = None):
        """At most `size` entries; with `weigh`, entries weighing at most `size` in all (bytes, say: one heavier
        than that is not kept)."""
        self.size = size
        self._weigh = weigh or (lambda _: 1)
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._total = 0
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
        weight = self._weigh(value)
        with self._lock:
            if key in self._entries:
                del self._entries[key]
                self._total -= self._weights.pop(key)
            if weight > self.size:
                return
            self._entries[key], self._weights[key] = value, weight
            self._total += weight
            while self._total > self.size:
                oldest, _ = self._entries.popitem(last=False)
                self._total -= self._weights.pop(oldest)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weights.clear()
            self._total = 0

    def __len__(self) -> int:
        return len(self._entries)
