"""Text a person or an LLM reads: search results as numbered citations with their passages, and a
parsed document as its reader would see it.

The CLI's text output, the search tool's text block and the document resource are rendered here: a helper of
the faces, reading the core's records through its API like any face.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from collections.abc import Callable

from .api import (
    CallerFigures,
    HealthCheck,
    KBStats,
    KBStatus,
    SyncProgress,
    printable,
    sync_remedy,
    HEADING_SEPARATOR,
    READ_TOOL,
    BrowseOutput,
    KBVersion,
    ModeScores,
    ReadOutput,
    SearchResult,
    SelfCheck,
    SyncReport,
    citation_line,
    clipped,
)

NO_RESULTS = "No passages found. Try other words, mode 'keyword' for exact terms, or fewer filters."


def cited_text(result: SearchResult, max_chars: int | None = None, name_kb: bool = False) -> str:
    """Notes, then `[n] file › heading (page p) (score s)` and the passage (with its context) per hit.

    `max_chars` cuts each passage and says how much was left out; `name_kb` leads each citation with the
    passage's KB (a search across KBs).
    """
    lines = [f"Note: {note}" for note in result.notes]
    if result.found_nothing and not result.holds_nothing:  # other words would find nothing either
        lines.append(NO_RESULTS)
    for number, hit in enumerate(result.hits, start=1):
        lines.append(citation_line(hit, number, name_kb))
        lines += [hit.link] if hit.link else []
        lines += [stale_line(hit.changed)] if hit.changed else []
        # blank lines trimmed, not spaces: code's first line keeps its indentation
        body = "\n\n".join(part for part in (hit.context_before, hit.text, hit.context_after) if part).strip("\n")
        if max_chars is not None and len(body) > max_chars:
            body = f"{body[:max_chars].rstrip()} […{len(body) - max_chars} more characters]"
        lines.append(body + "\n")
    return "\n".join(lines).strip()


def read_text(answer: ReadOutput, go_on: str = "") -> str:
    """A read's answer as the model (or a person) reads it: where it is, the text, and what is left. `go_on`: how
    to ask for the rest (the tool's cursor by default)."""
    about = HEADING_SEPARATOR.join(part for part in (answer.path, answer.section) if part)
    indexed = f"; indexed {answer.indexed_at}" if answer.indexed_at else ""
    lines = [
        f"{about} ({answer.location}{f'; as of {answer.as_of}' if answer.as_of else ''}{indexed})",
        *([stale_line(answer.changed)] if answer.changed else []),
        *([f"Note: {answer.note}"] if answer.note else []),
        "",
        answer.text,
    ]
    if answer.cursor:
        how = go_on or f"call {READ_TOOL} with cursor={answer.cursor!r}"
        lines += [
            "",
            f"[about {answer.tokens_left} more tokens of this {'section' if answer.section else 'part'}: {how}]",
        ]
    return "\n".join(lines)


def stale_line(changed: str) -> str:
    """The line an answer from a document whose source changed since it was indexed carries."""
    return f"Stale: {changed}; this text may be out of date"


def browse_text(answer: BrowseOutput) -> str:
    """A page of documents (one line each) or of an outline, and how to see more."""
    if answer.outline:
        lines = [f"{answer.path}: {answer.total} headings{_as_of(answer)}"]
        lines += [
            f"{'  ' * (entry.depth - 1)}{entry.heading.split(HEADING_SEPARATOR)[-1]} — lines "
            f"{entry.line_start}-{entry.line_end}{_pages(entry.page_start, entry.page_end)}, ~{entry.tokens} "
            f"tokens"
            for entry in answer.outline
        ]
    else:
        lines = [f"{answer.total} documents{f' matching {answer.path!r}' if answer.path else ''}{_as_of(answer)}"]
        lines += [
            f"- {d.path} — {d.title} ({d.kind}{f', {d.pages} pages' if d.pages else ''}, ~{d.tokens} tokens"
            f"{f', changed {d.changed[:10]}' if d.changed else ''})"
            for d in answer.documents
        ]
    if answer.cursor:
        lines.append(f"[more: pass cursor={answer.cursor!r}]")
    return "\n".join(lines)


def versions_text(versions: list[KBVersion]) -> str:
    """A KB's versions, one line each, oldest first: number, when, what changed, tags, who."""
    if not versions:
        return "no versions recorded yet (each sync that changes the knowledge base records one)"
    lines = []
    for version in versions:
        what = (
            f"rolled back to {version.rolled_back_to}"
            if version.rolled_back_to is not None
            else f"{version.kind}: +{version.added} ~{version.changed} -{version.removed}"
        )
        tags = f" [{', '.join(version.tags)}]" if version.tags else ""
        commits = "".join(f"  {name}@{commit[:12]}" for name, commit in version.commits.items())
        lines.append(
            f"{version.number:>5}  {version.finished}  {what}{tags}{commits}"
            f"{f'  by {version.by}' if version.by else ''}"
        )
    return "\n".join(lines)


def sync_text(reports: list[SyncReport]) -> str:
    """What a sync did, a sentence per KB: the sync tool's text (its structured content carries each whole report,
    `mcp-kb sync` prints the long summary)."""
    if not reports:
        return "No knowledge base was synced."
    return "\n".join(_synced(report) for report in reports)


def _synced(report: SyncReport) -> str:
    said = (
        f"{report.kb}: {report.files_added} added, {report.files_changed} changed, {report.files_deleted} "
        f"deleted, {report.files_unchanged} unchanged, {report.files_failed} failed, in "
        f"{report.seconds.get('total', 0.0):.1f} s"
    )
    if report.rebuilt:
        said += f" (rebuilt from scratch: {report.rebuilt})"
    if report.failures:
        named = "; ".join(
            f"{problem.path} ({clipped(problem.reason, _REASON_CHARS)})" for problem in report.failures[:_FAILED_NAMED]
        )
        more = len(report.failures) - _FAILED_NAMED
        said += f". Failed: {named}{f'; and {more} more (the reports list them)' if more > 0 else ''}"
    return said + "."


_FAILED_NAMED = 3  # failed files a sync's sentence names with why; the report lists every one
_REASON_CHARS = 120


def _as_of(answer: BrowseOutput) -> str:
    return f" (as of {answer.as_of})" if answer.as_of else ""


def _pages(first: int | None, last: int | None) -> str:
    if first is None:
        return ""
    return f", page {first}" if last in (None, first) else f", pages {first}-{last}"


NEVER = "never"  # a time that has not come: a KB never synced, a count never made


def status_text(item: KBStatus, located: Callable[[str], str]) -> str:
    """One KB's status as a few lines: counts, last sync, model, index, repositories, what a sync would do, a sync
    running, the latest self-check, the last error (its places named by `located`) and the files that failed."""
    model = item.model.name if item.model else "-"
    outcome = f"{item.last_outcome}, {len(item.failed)} failed" if item.failed else item.last_outcome
    lines = [
        f"{item.name}: {item.files} files, {item.chunks} chunks; last sync {item.last_sync or NEVER} ({outcome}); "
        f"model {model}; index {item.index_state or '-'}"
    ]
    lines += [f"  {repository} at commit {commit}" for repository, commit in item.commits.items()]
    if item.pending and item.pending.behind:
        lines.append(f"  behind its sources: {item.pending.text()}; {sync_remedy(item.name)}")
    elif item.pending:
        lines.append("  in step with its sources")
    if item.sync_running:
        lines.append(f"  {running_sync_text(item.progress)}")
    if item.health:
        lines.append(f"  {hit_rates_text(item.health)}")
    if item.last_error:  # recorded for every caller, places named by what they are: the owner reads them
        lines.append(f"  last error: {located(item.last_error)}")
    lines += [f"  failed {failure.path}: {failure.reason}" for failure in item.failed]
    return "\n".join(lines)


def running_sync_text(progress: SyncProgress) -> str:
    """A sync under way, as every face words it."""
    return f"syncing now: {progress.text() if progress.counted else 'reading its sources'}"


def stats_text(item: KBStats) -> str:
    """One KB's stats as a few lines of text."""
    search, sync, health = item.search, item.last_sync, item.health
    lines = [f"{item.name}:"]
    if search:
        lines.append(
            f"  searches {search.searches} since {search.since}; cache hits {search.cache_hit_rate:.0%}; "
            f"degraded {search.degraded_answers}; no results {search.zero_result_queries}; query tokens "
            f"{search.query_embedding_tokens}; rerank calls {search.rerank_calls}"
        )
        lines.append(f"  {'stage':10} {'count':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        lines += [
            f"  {stage:10} {s.count:6d} {s.p50:8.1f} {s.p95:8.1f} {s.max:8.1f}"
            for stage, s in search.latency_ms.items()
        ]
    else:
        lines.append("  no searches recorded yet")
    if sync.finished_at:
        lines.append(
            f"  last sync {sync.finished_at}: {sync.chunks_embedded} chunks "
            f"({sync.tokens_embedded} tokens) embedded in {sync.seconds.get('total', 0):.1f}s"
        )
    if health:
        lines.append(f"  {hit_rates_text(health)}")
    return "\n".join(lines)


def hit_rates_text(health: HealthCheck) -> str:
    """The latest label-free self-check's hit rate per mode, with its size and time."""
    rates = ", ".join(f"{mode} {rate:.2f}" for mode, rate in health.hit_rate.items())
    return f"hit@{health.k} without labels ({health.queries} queries, {health.checked_at}): {rates}"


def callers_text(figures: list[CallerFigures]) -> str:
    """The audit trail per caller, a line each; names, KBs and times come from a file callers' requests wrote:
    escaped."""
    lines = []
    for caller in figures:
        kbs = ", ".join(f"{printable(kb)} {count}" for kb, count in sorted(caller.kbs.items()))
        lines.append(
            f"{printable(caller.who.label)}: {caller.requests} requests ({caller.errors} failed), last "
            f"{printable(caller.last_seen)}; by KB: {kbs}"
        )
    return "\n".join(lines)


def scores_text(scores: list[ModeScores], k: int) -> str:
    """An evaluation's figures, one row per search mode."""
    lines = [
        f"{'mode':8} {'queries':>7} {'recall@' + str(k):>9} {'MRR@10':>7} {'nDCG@10':>8} {'p50 ms':>7} {'p95 ms':>7}"
    ]
    lines += [
        f"{s.mode:8} {s.queries:7d} {s.recall_at_k:9.3f} {s.mrr_at_10:7.3f} {s.ndcg_at_10:8.3f} "
        f"{s.p50_ms:7.1f} {s.p95_ms:7.1f}"
        for s in scores
    ]
    return "\n".join(lines)


def self_checks_text(checks: list[SelfCheck], threshold: float, shown: int = 5) -> str:
    """A self-check's hit rates, the documents it served least, and a warning per mode below `threshold`."""
    lines = [f"{'mode':8} {'queries':>7} {'hit@' + str(checks[0].k):>7}"]
    lines += [f"{c.mode:8} {c.queries:7d} {c.hit_rate:7.3f}" for c in checks]
    for check in checks:
        lines.append(
            f"least served ({check.mode}): "
            + ", ".join(f"{doc} {served}/{asked}" for doc, served, asked in check.least_served[:shown])
        )
    for check in checks:
        if check.hit_rate < threshold:
            lines.append(
                f"warning: {check.mode} hit rate {check.hit_rate:.2f} is below {threshold:.2f}: check the "
                f"chunking settings (`mcp-kb chunks FILE`) and the embedding model"
            )
    return "\n".join(lines)


def json_text(value: object) -> str:
    """An answer as JSON for a program or a person, one way on every face: each record in its JSON form
    (`model_dump(mode="json")` or `as_dict()`), indented, other scripts than Latin kept as they are."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=_json_form)


def _json_form(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    as_dict = getattr(value, "as_dict", None)
    return as_dict() if callable(as_dict) else str(value)  # a path or a date, as its text
