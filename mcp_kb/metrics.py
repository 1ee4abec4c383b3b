"""Search metrics per knowledge base, kept in the process that answers: counts, latency per stage,
cache hits, degraded and empty answers, query embedding tokens, rerank calls. Nothing is sent
anywhere; a snapshot is written next to the index now and then, for `mcp-kb stats`. And the query
log, off by default: one JSON line per search, rotated by size.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping

from .files import JsonLines
from .records import SearchFigures, SearchHour, StageLatency, recorded_hour, recorded_now
from .search import SearchResult

_SAMPLES = 2_000  # latencies kept per stage: percentiles over the most recent searches
_HOURS_KEPT = 48  # hourly figures kept (the admin page charts them)


class KBMetrics:
    def __init__(self) -> None:
        self.since = recorded_now()
        self.searches = self.cache_hits = self.degraded = self.zero_results = 0
        self.query_tokens = self.rerank_calls = 0
        self.latencies: dict[str, deque[float]] = {}
        self.hours: dict[str, HourFigures] = {}  # by hour (UTC), the last _HOURS_KEPT of them

    def record(self, result: SearchResult, total_ms: float, query_tokens: int) -> None:
        self.searches += 1
        self.cache_hits += result.cached
        self.degraded += result.degraded
        self.zero_results += result.found_nothing
        if not result.cached:  # a cached answer ran no stage
            self.query_tokens += query_tokens
            self.rerank_calls += "rerank" in result.timings_ms
            for stage, ms in result.timings_ms.items():
                self.latencies.setdefault(stage, deque(maxlen=_SAMPLES)).append(ms)
        self.latencies.setdefault("total", deque(maxlen=_SAMPLES)).append(total_ms)
        hour = recorded_hour()
        if hour not in self.hours:
            self.hours[hour] = HourFigures()
            for old in sorted(self.hours)[:-_HOURS_KEPT]:
                del self.hours[old]
        self.hours[hour].record(result, total_ms)

    def snapshot(self) -> SearchFigures:
        return SearchFigures(
            since=self.since,
            searches=self.searches,
            cache_hit_rate=round(self.cache_hits / self.searches, 4) if self.searches else 0.0,
            degraded_answers=self.degraded,
            zero_result_queries=self.zero_results,
            query_embedding_tokens=self.query_tokens,
            rerank_calls=self.rerank_calls,
            latency_ms={stage: _percentiles(samples) for stage, samples in sorted(self.latencies.items())},
            hourly=tuple(figures.snapshot(hour) for hour, figures in sorted(self.hours.items())),
        )


class HourFigures:
    """One hour's searches: how many, how many found nothing or were degraded, and their latency."""

    def __init__(self) -> None:
        self.searches = self.zero_results = self.degraded = 0
        self.latencies: deque[float] = deque(maxlen=_SAMPLES)

    def record(self, result: SearchResult, total_ms: float) -> None:
        self.searches += 1
        self.zero_results += result.found_nothing
        self.degraded += result.degraded
        self.latencies.append(total_ms)

    def snapshot(self, hour: str) -> SearchHour:
        latency = _percentiles(self.latencies)
        return SearchHour(
            hour, self.searches, self.zero_results, self.degraded, round(latency.p50, 2), round(latency.p95, 2)
        )


class Metrics:
    """KBMetrics by KB name, safe to share between threads; `due` says when to save a snapshot."""

    def __init__(self, save_every: float = 5.0):
        self._by_kb: dict[str, KBMetrics] = {}
        self._lock = threading.Lock()
        self._save_every = save_every
        self._saved_at: dict[str, float] = {}

    def record(self, kb: str, result: SearchResult, total_ms: float, query_tokens: int) -> None:
        with self._lock:
            self._by_kb.setdefault(kb, KBMetrics()).record(result, total_ms, query_tokens)

    def due(self, kb: str) -> bool:
        """True (once per `save_every` seconds) when this KB's snapshot should be saved."""
        with self._lock:
            now = time.monotonic()
            if now - self._saved_at.get(kb, -self._save_every) < self._save_every:
                return False
            self._saved_at[kb] = now
            return True

    def snapshot(self, kb: str) -> SearchFigures:
        with self._lock:
            return self._by_kb.setdefault(kb, KBMetrics()).snapshot()


def _percentiles(samples: deque[float]) -> StageLatency:
    ordered = sorted(samples)
    return StageLatency(
        len(ordered), ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], ordered[-1]
    )


class QueryLog(JsonLines):
    """JSON lines of searches (time, query, mode, filters, top hits, latency) in one file per KB."""

    def write(
        self, query: str, mode: str, filters: Mapping[str, object] | None, result: SearchResult, total_ms: float
    ) -> None:
        self.append(
            {
                "time": recorded_now("milliseconds"),
                "query": query,
                "mode": mode,
                "answered_by": result.mode,
                "filters": filters,
                "latency_ms": round(total_ms, 2),
                "hits": [{"source": h.source, "chunk_index": h.chunk_index, "score": h.score} for h in result.hits],
            }
        )
