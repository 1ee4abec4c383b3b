"""Text a person or an LLM reads: search results as numbered citations with their passages, and a
parsed document as its reader would see it.

The CLI's text output, the search tool's text block and the document resource are rendered here.
"""

from __future__ import annotations

from .ingest.document import Document
from .search import SearchResult
from .text import shared_depth
from .vocabulary import citation_marker

NO_RESULTS = "No passages found. Try other words, mode 'keyword' for exact terms, or fewer filters."


def cited_text(result: SearchResult, max_chars: int | None = None) -> str:
    """Notes, then `[n] file › heading (page p) (score s)` and the passage (with its context) per hit.

    `max_chars` cuts each passage and says how much was left out.
    """
    lines = [f"Note: {note}" for note in result.notes]
    if not result.hits:
        lines.append(NO_RESULTS)
    for number, hit in enumerate(result.hits, start=1):
        # The model reads the score alone (ranks cost tokens and tell it nothing; hit.ranking is for people).
        trimmed = ", trimmed to fit max_tokens" if hit.trimmed else ""
        lines.append(f"{citation_marker(number)} {hit.citation} (score {hit.score:.3f}{trimmed})")
        body = "\n\n".join(part for part in (hit.context_before, hit.text, hit.context_after) if part).strip()
        if max_chars is not None and len(body) > max_chars:
            body = f"{body[:max_chars].rstrip()} […{len(body) - max_chars} more characters]"
        lines.append(body + "\n")
    return "\n".join(lines).strip()


def document_text(document: Document) -> str:
    """The document's text with its headings (Markdown `#` by depth) and, for PDFs, page markers."""
    parts: list[str] = []
    path: tuple[str, ...] = ()
    page = None
    for block in document.blocks:
        if block.page is not None and block.page != page:
            page = block.page
            parts.append(f"--- page {page} ---")
        shared = shared_depth(path, block.heading_path)
        parts += [f"{'#' * (depth + 1)} {heading}" for depth, heading in enumerate(block.heading_path)
                  if depth >= shared]
        path = block.heading_path
        parts.append(block.text)
    return "\n\n".join(parts)
