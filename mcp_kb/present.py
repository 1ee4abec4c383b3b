"""Text a person or an LLM reads: search results as numbered citations with their passages, and a
parsed document as its reader would see it.

The CLI's text output, the search tool's text block and the document resource are rendered here.
"""

from __future__ import annotations

from .kept_versions import KBVersion
from .read_outputs import BrowseOutput, ReadOutput
from .records import SyncReport
from .text import clipped
from .passages import citation_line
from .search import SearchResult
from .vocabulary import HEADING_SEPARATOR, READ_TOOL

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
