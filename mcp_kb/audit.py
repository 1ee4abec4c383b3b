"""The audit trail of a server: one JSON line per request that touched a knowledge base, saying when,
who (its kind, a token's name or an OAuth subject and its issuer: access.Identity), which KB, what (a tool, resource or prompt), how it ended
(a result count or the error) and how long it took. The query text only when `[server] audit_queries`
asks for it (queries can hold personal data); never a token. Rotated by size like the query log."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .access import IDENTITY_KINDS, Identity
from .settings import ServerConfig, megabytes
from .files import JsonLines, json_lines
from .records import recorded_now

_ERROR_CHARS = 300  # an error's text kept per line


class AuditTrail:
    def __init__(self, settings: ServerConfig):
        self.file = JsonLines(Path(settings.audit_log), megabytes(settings.audit_max_mb)) \
            if settings.audit_log else None
        self.queries = settings.audit_queries

    def record(self, who: Identity, kb: str, action: str, latency_ms: float, results: int | None = None,
               error: str | None = None, query: str | None = None) -> None:
        if self.file is None:
            return
        entry: dict[str, Any] = {"time": recorded_now("milliseconds"), "who": who.name, "kind": who.kind, "kb": kb, "action": action,
                                 "latency_ms": round(latency_ms, 2)}
        if who.issuer:
            entry["issuer"] = who.issuer
        if error is not None:
            entry["error"] = error[:_ERROR_CHARS]
        elif results is not None:
            entry["results"] = results
        if self.queries and query is not None:
            entry["query"] = query
        self.file.append(entry)


@dataclass(frozen=True)
class CallerFigures:
    """One caller's requests in the audit trail."""

    who: Identity
    requests: int
    errors: int
    kbs: dict[str, int]  # requests by KB
    last_seen: str

    def as_dict(self) -> dict[str, Any]:
        return {"who": self.who.name, "kind": self.who.kind, **({"issuer": self.who.issuer} if self.who.issuer else {}),
                "requests": self.requests, "errors": self.errors, "kbs": self.kbs, "last_seen": self.last_seen}


def callers(path: Path) -> list[CallerFigures]:
    """The audit trail summed up per caller (the rotated file first): requests, errors, KBs, last seen.
    Callers are told apart by kind and issuer too: a token and an OAuth subject of one name are two."""
    figures: dict[Identity, dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "errors": 0, "kbs": defaultdict(int), "last_seen": ""})
    for entry in json_lines(path):
        try:
            caller = figures[_identity(entry)]
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # a line that names no caller
        caller["requests"] += 1
        caller["errors"] += "error" in entry
        caller["kbs"][str(entry.get("kb"))] += 1
        caller["last_seen"] = max(caller["last_seen"], str(entry.get("time", "")))
    ordered = sorted(figures.items(), key=lambda item: (item[0].name, item[0].kind, item[0].issuer))
    return [CallerFigures(who, figure["requests"], figure["errors"], dict(figure["kbs"]), figure["last_seen"])
            for who, figure in ordered]


def _identity(entry: dict[str, Any]) -> Identity:
    """Who a line names (lines written before kinds were recorded: "owner" or a token)."""
    name = str(entry["who"])
    kind = IDENTITY_KINDS[entry.get("kind") or ("owner" if name == "owner" else "token")]
    return Identity(kind, name, str(entry.get("issuer", "")))
