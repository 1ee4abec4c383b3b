"""Search results as text a person or an LLM reads: numbered citations with their passages.

The CLI's text output and the search tool's text block are both rendered here.
"""

from __future__ import annotations

from .search import SearchResult

NO_RESULTS = "No passages found. Try other words, mode 'keyword' for exact terms, or fewer filters."


def cited_text(result: SearchResult, max_chars: int | None = None) -> str:
    """Notes, then `[n] file › heading (page p) (score s)` and the passage (with its context) per hit.

    `max_chars` cuts each passage and says how much was left out.
    """
    lines = [f"Note: {note}" for note in result.notes]
    if not result.hits:
        lines.append(NO_RESULTS)
    for number, hit in enumerate(result.hits, start=1):
        lines.append(f"[{number}] {hit.citation()} (score {hit.score:.3f})")
        body = "\n\n".join(part for part in (hit.context_before, hit.text, hit.context_after) if part).strip()
        if max_chars is not None and len(body) > max_chars:
            body = f"{body[:max_chars].rstrip()} […{len(body) - max_chars} more characters]"
        lines.append(body + "\n")
    return "\n".join(lines).strip()
