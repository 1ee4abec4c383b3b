"""What the admin page shows, gathered from the App: plain data for the templates. Blocking (the
store), so the routes call these in a worker thread."""

from __future__ import annotations

from collections.abc import Iterable
from markupsafe import Markup

from ..api import READ_TOKENS_MAX, App, HealthCheck, Pending, ReadRequest, SearchFigures, SyncBrief, readable_time
from ..present import NEVER, running_sync_text
from ..settings import DEFAULT_MODE, KBConfig
from .charts import bar_chart, line_chart


def kb_summary(app: App, name: str) -> dict[str, object]:
    """One KB as the overview shows it: contents, last sync, model, index state, health, a running sync."""
    return _kb_summary(app, name, app.search_figures(name))


def _kb_summary(app: App, name: str, figures: SearchFigures | None) -> dict[str, object]:
    """The KB's glance, its fields as they are (the templates read its records by attribute), with its search
    figures and health as the page words them."""
    status = app.glance(name)
    pending = app.pending(name, COUNTED_WITHIN_SECONDS)
    searches = figures.searches if figures else 0
    total = figures.latency_ms.get("total") if figures else None
    return {
        **vars(status),
        "pending": pending,
        "searches": searches,
        "searches_counted": _searches_counted(app, name, figures),
        "p95_ms": total.p95 if total else None,
        "zero_share": figures.zero_result_queries / searches if figures and searches else None,
        "hit_rate": _latest_hit_rate(status.health),
        "progress_text": running_sync_text(status.progress),
        "pending_text": pending_text(pending),
    }


# Said wherever the page shows search figures: a count that leaves out the command line's searches says so.
SEARCHES_NOT_COUNTED = "Searches run with mcp-kb search are not counted: each runs in a process of its own."


def _searches_counted(app: App, name: str, figures: SearchFigures | None) -> str:
    """A KB's search count saying who counted it and since when: this server, or (when it has answered none) another
    server process, whose last saved figures App.search_figures gives then."""
    if figures is None or not figures.searches:
        return "no searches answered by this server yet"
    count = f"{figures.searches} search{'' if figures.searches == 1 else 'es'}"
    if app.metrics.snapshot(name).searches:  # this server has answered some: the figures are its own
        return f"{count} answered by this server since {when(figures.since)}"
    return f"{count} answered by another mcp-kb server since {when(figures.since)} (the figures it last saved)"


def live_status(app: App, names: Iterable[str]) -> list[dict[str, object]]:
    """What the page's script polls: each KB's running sync and the figures a finished one changes."""
    return [
        {
            **status.as_dict(),
            "progress_text": running_sync_text(status.progress),
            "last_sync_text": when(status.last_sync),
            **_pending_fields(app.pending(status.name, COUNTED_WITHIN_SECONDS)),
        }
        for status in map(app.glance, names)
    ]


def _pending_fields(pending: Pending | None) -> dict[str, object]:
    return {"pending_text": pending_text(pending), "pending_behind": bool(pending and pending.behind)}


def when(stamp: str | None, short: bool = False) -> str:
    """A recorded time (ISO 8601, UTC) as a person reads it: `2026-12-01 19:14 UTC` (the page's script shows this
    text); `short`, a chart's label: `12-01 19:14`."""
    return readable_time(stamp, short) if stamp else NEVER


# The page polls every few seconds: what a sync would do is counted at most this often per KB (and at each version).
COUNTED_WITHIN_SECONDS = 10.0


def pending_text(pending: Pending | None) -> str:
    """What a sync would do now, as the page words it (its script shows the text the server wrote)."""
    if pending is None:
        return (
            "not counted (web sites and repositories are counted by their sync; a folder not on this machine, or "
            "a knowledge base never synced, not at all)"
        )
    return f"{pending.text()} (counted {when(pending.counted_at)})"


VERSIONS_SHOWN = 50  # on a KB page: the rest are a command away
_EXAMPLE_VALUES = {"integer": ">=1", "number": ">=0.5", "date": ">=2024-01-01", "boolean": "=true"}


def filter_example(kb: KBConfig) -> str:
    """The playground's filter example, in the KB's own fields: its declared ones (up to two), then a path prefix."""
    declared = [(name, kind) for name, kind in kb.filter_field_types().items() if name in kb.filterable][:2]
    lines = [f"{name}{_EXAMPLE_VALUES.get(kind, '=value')}" for name, kind in declared]
    return "\n".join([*lines, "path^=folder/"])


def kb_details(app: App, name: str, wanted: str = "") -> dict[str, object]:
    """A KB's page: its summary, failed and skipped files (those matching `wanted`), recent syncs, charts."""
    figures = app.search_figures(name)
    summary = _kb_summary(app, name, figures)
    history = app.sync_history(name)
    [status] = app.status(name)
    problems = [("failed", item) for item in status.failed] + [("skipped", item) for item in history.skipped]
    needle = wanted.casefold()
    shown = [
        {"kind": kind, "path": p.path, "reason": p.reason}
        for kind, p in problems
        if needle in p.path.casefold() or needle in p.reason.casefold()
    ]
    return {
        "kb": summary,
        "problems": shown,
        "problem_count": len(problems),
        "recent": history.recent[::-1],
        "crawl": history.crawl,
        "charts": _charts(figures, history.recent),
        **_versions(app, name),
    }


def _versions(app: App, name: str) -> dict[str, object]:
    """The newest versions a KB page lists (a KB that syncs every minute keeps a day of them), and how many are kept."""
    kept = app.versions(name)
    return {"versions": kept[-VERSIONS_SHOWN:], "version_count": len(kept)}


def _charts(figures: SearchFigures | None, syncs: tuple[SyncBrief, ...]) -> list[Markup]:
    hours = figures.hourly if figures else ()
    labels = [when(hour.hour, short=True) for hour in hours]
    charts: list[Markup] = []
    if hours:
        charts += [
            line_chart(
                "Search latency", labels, {"p50": [h.p50_ms for h in hours], "p95": [h.p95_ms for h in hours]}, "ms"
            ),
            bar_chart("Searches per hour", labels, [h.searches for h in hours], "searches"),
            line_chart(
                "Answers that found nothing or were degraded",
                labels,
                {"found nothing": [h.zero_results for h in hours], "degraded": [h.degraded for h in hours]},
                "answers",
            ),
        ]
    timed = [(sync.finished_at, sync.seconds) for sync in syncs if sync.seconds is not None]
    if timed:
        charts.append(
            bar_chart(
                "Sync durations",
                [when(finished, short=True) for finished, _ in timed],
                [seconds for _, seconds in timed],
                "s",
            )
        )
    return charts


def _latest_hit_rate(health: HealthCheck | None) -> float | None:
    rates = health.hit_rate if health else {}
    return rates.get(DEFAULT_MODE, next(iter(rates.values()), None))


def document(app: App, name: str, doc_id: str, chunk: int | None) -> dict[str, object]:
    """A document's text from the index as a read gives it (on from the passage before chunk `chunk`, when asked),
    in three parts: before, the passage and after."""
    answer = app.read(name, ReadRequest(kb=name, path=doc_id, chunk=chunk, max_tokens=READ_TOKENS_MAX))
    start, end = answer.passage_start or 0, answer.passage_end or 0
    text = answer.text
    return {
        "before": text[:start],
        "passage": text[start:end],
        "after": text[end:],
        "found": end > start,
        "path": doc_id,
        "location": answer.location,
        "more": answer.cursor is not None,
        "indexed_at": answer.indexed_at,
        "changed": answer.changed,
    }
