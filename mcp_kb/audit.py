"""The audit trail of a server: one JSON line per request that touched a knowledge base, saying when,
who (a token's name or an OAuth subject), which KB, what (a tool, resource or prompt), how it ended
(a result count or the error) and how long it took. The query text only when `[server] audit_queries`
asks for it (queries can hold personal data); never a token. Rotated by size like the query log."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from .config import ServerConfig, megabytes
from .metrics import JsonLines, now_text

_ERROR_CHARS = 300  # an error's text kept per line


class AuditTrail:
    def __init__(self, settings: ServerConfig):
        self.file = JsonLines(Path(settings.audit_log), megabytes(settings.audit_max_mb)) \
            if settings.audit_log else None
        self.queries = settings.audit_queries

    def record(self, who: str, kb: str, action: str, latency_ms: float, results: int | None = None,
               error: str | None = None, query: str | None = None) -> None:
        if self.file is None:
            return
        entry: dict[str, Any] = {"time": now_text(), "who": who, "kb": kb, "action": action,
                                 "latency_ms": round(latency_ms, 2)}
        if error is not None:
            entry["error"] = error[:_ERROR_CHARS]
        elif results is not None:
            entry["results"] = results
        if self.queries and query is not None:
            entry["query"] = query
        self.file.append(entry)


def callers(path: Path) -> list[dict[str, Any]]:
    """The audit trail summed up per caller (the rotated file first): requests, errors, KBs, last seen."""
    figures: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0, "errors": 0, "kbs": defaultdict(int),
                                                              "last_seen": ""})
    for part in (path.with_name(path.name + ".1"), path):
        if not part.exists():
            continue
        for line in part.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
                caller = figures[str(entry["who"])]
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash
            caller["requests"] += 1
            caller["errors"] += "error" in entry
            caller["kbs"][str(entry.get("kb"))] += 1
            caller["last_seen"] = max(caller["last_seen"], str(entry.get("time", "")))
    return [{"who": who, **figure, "kbs": dict(figure["kbs"])} for who, figure in sorted(figures.items())]
