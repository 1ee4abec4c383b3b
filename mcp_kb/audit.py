"""The audit trail of a server: one JSON line per request that touched a knowledge base, saying when,
who (its kind, a token's name or an OAuth subject and its issuer: access.Identity), which KB, what (a tool, resource or prompt), how it ended
(a result count or the error) and how long it took. The query text only when `[server] audit_queries`
asks for it (queries can hold personal data); never a token. Rotated by size like the query log.

A trail that cannot be written (a full disk, its folder a file) does not stop searches by default: the
failure is loud instead (a log line a minute, and `failure` for the admin page). With `[server]
audit_required = true` a request that cannot be recorded is refused. Either way the caller is told
no local path and no OS text beyond the reason."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Mapping

from .access import IDENTITY_KINDS, Identity
from .errors import AuditUnavailable
from .settings import ServerConfig, megabytes
from .files import JsonLines, json_lines
from .records import recorded_now

__all__ = [
    "CallerFigures",
    "AuditTrail",
    "callers",
]  # what the core's API (mcp_kb.api) offers from this module

log = logging.getLogger(__name__)

_ERROR_CHARS = 300  # an error's text kept per line
_ACTION_CHARS = 200  # an action names a tool or a URI the caller chose
_LOG_EVERY = 60.0  # seconds between log lines about a trail that cannot be written


@dataclass(frozen=True)
class AuditFailure:
    """Since when the trail cannot be written, how many lines were lost, and why (no path)."""

    since: str
    lost: int
    reason: str


class AuditTrail:
    def __init__(self, settings: ServerConfig):
        self.file = (
            JsonLines(Path(settings.audit_log), megabytes(settings.audit_max_mb)) if settings.audit_log else None
        )
        self.queries = settings.audit_queries
        self.required = settings.audit_required
        self.failure: AuditFailure | None = None
        self._logged_at = float("-inf")

    def record(  # noqa: PLR0913  # one per field of an audit entry
        self,
        who: Identity,
        kb: str,
        action: str,
        latency_ms: float,
        results: int | None = None,
        error: str | None = None,
        query: str | None = None,
    ) -> None:
        if self.file is None:
            return
        entry: dict[str, object] = {
            "time": recorded_now("milliseconds"),
            "who": who.name,
            "kind": who.kind,
            "kb": kb,
            "action": action[:_ACTION_CHARS],
            "latency_ms": round(latency_ms, 2),
        }
        if who.issuer:
            entry["issuer"] = who.issuer
        if error is not None:
            entry["error"] = error[:_ERROR_CHARS]
        elif results is not None:
            entry["results"] = results
        if self.queries and query is not None:
            entry["query"] = query
        try:
            self.file.append(entry)
        except OSError as exc:
            self._failed(exc)
            return
        if self.failure is not None:
            log.warning(
                "the audit trail %s is written again (%d line(s) were lost since %s)",
                self.file.path,
                self.failure.lost,
                self.failure.since,
            )
            self.failure = None

    def _failed(self, exc: OSError) -> None:
        assert self.file is not None
        reason = exc.strerror or type(exc).__name__  # strerror never holds the path
        failure = self.failure or AuditFailure(recorded_now(), 0, reason)
        self.failure = replace(failure, lost=failure.lost + 1, reason=reason)
        if time.monotonic() - self._logged_at >= _LOG_EVERY:
            self._logged_at = time.monotonic()
            log.error(
                "cannot write the audit trail %s (%s): %d line(s) lost since %s; %s",
                self.file.path,
                reason,
                self.failure.lost,
                self.failure.since,
                "requests are refused ([server] audit_required)" if self.required else "requests go on",
            )
        if self.required:
            raise AuditUnavailable(
                f"this request was refused: this server records every request in its audit trail "
                f"([server] audit_required) and cannot write it now ({reason})"
            )


@dataclass(frozen=True)
class CallerFigures:
    """One caller's requests in the audit trail."""

    who: Identity
    requests: int
    errors: int
    kbs: dict[str, int]  # requests by KB
    last_seen: str

    def as_dict(self) -> dict[str, object]:
        return {
            "who": self.who.name,
            "kind": self.who.kind,
            **({"issuer": self.who.issuer} if self.who.issuer else {}),
            "requests": self.requests,
            "errors": self.errors,
            "kbs": self.kbs,
            "last_seen": self.last_seen,
        }


def callers(path: Path) -> list[CallerFigures]:
    """The audit trail summed up per caller (the rotated file first): requests, errors, KBs, last seen.
    Callers are told apart by kind and issuer too: a token and an OAuth subject of one name are two."""
    figures: dict[Identity, _Tally] = defaultdict(_Tally)
    for entry in json_lines(path):
        try:
            caller = figures[_identity(entry)]
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # a line that names no caller
        caller.requests += 1
        caller.errors += "error" in entry
        caller.kbs[str(entry.get("kb"))] += 1
        caller.last_seen = max(caller.last_seen, str(entry.get("time", "")))
    ordered = sorted(figures.items(), key=lambda item: (item[0].name, item[0].kind, item[0].issuer))
    return [
        CallerFigures(who, figure.requests, figure.errors, dict(figure.kbs), figure.last_seen)
        for who, figure in ordered
    ]


@dataclass
class _Tally:
    """One caller's figures while the audit trail is read."""

    requests: int = 0
    errors: int = 0
    kbs: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    last_seen: str = ""


def _identity(entry: Mapping[str, object]) -> Identity:
    """Who a line names (lines written before kinds were recorded: "owner" or a token)."""
    name = str(entry["who"])
    given = entry.get("kind") or ("owner" if name == "owner" else "token")
    if not isinstance(given, str):
        raise KeyError(given)  # a kind that is not text: callers() passes the line over, as an unknown kind
    kind = IDENTITY_KINDS[given]
    return Identity(kind, name, str(entry.get("issuer", "")))
