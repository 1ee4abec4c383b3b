"""Passages an LLM can use: ranked chunks assembled the way a careful researcher would quote them.

- Hits of one document that are adjacent (or overlap) become one passage: the text of all its chunks
  in order with the repeated overlap removed, the heading path of the first, the line and page span
  of all. A merged passage scores what its best chunk scored and keeps that chunk's ranks.
- A document gives at most `max_per_document` passages, so one long document cannot fill the list.
- All passages of one answer, with their neighbour context, fit `max_tokens` (counted with the
  embedding model's tokenizer): the budget is shared out evenly, a short passage lending what it does
  not need; a passage over its share is cut at sentence boundaries around its best-matching sentence,
  context first, and says so (`trimmed`, "…" where text was left out).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from collections.abc import Iterable

from pydantic import ConfigDict, Field, computed_field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from .index.keywords import keyword_terms
from .text import sentences, shared_depth
from .vocabulary import HEADING_SEPARATOR
from .models.base import TokenCounter

ELLIPSIS = "…"
# A passage given fewer tokens than this says too little; lower-ranked passages are left out instead.
MIN_PASSAGE_TOKENS = 48
_OVERLAP_SEARCH_CHARS = 4_000  # an overlap is a few dozen tokens; never look further for one


# Its JSON schema is that of what is sent, so it lists the citation (computed from the other fields).
@pydantic_dataclass(frozen=True, config=ConfigDict(json_schema_mode_override="serialization"))
class Hit:
    """One passage (one chunk, or adjacent chunks of one document merged) with its citation: what a
    search returns to every face (the search tool's structured output is this record, described here, its
    citation included, so no face words a citation of its own)."""

    text: str
    source: Annotated[str, Field(description="The document: a file path relative to the knowledge base root, "
                                             "or a page's URL")]
    title: str
    heading: Annotated[str, Field(description=f"Heading path, e.g. 'Install{HEADING_SEPARATOR}Linux'")]
    page: Annotated[int | None, Field(description="PDF page number, if any (the first, when page_end is set)")]
    chunk_index: Annotated[int, Field(description="First chunk of the passage")]
    score: float
    line_start: int | None = None
    line_end: int | None = None
    vector_rank: Annotated[int | None, Field(description="1-based rank of its best chunk on the vector side")] = None
    keyword_rank: Annotated[int | None, Field(description="1-based rank of its best chunk on the keyword side")] = None
    context_before: str = ""
    context_after: str = ""
    chunk_count: Annotated[int, Field(description="Adjacent chunks of the document merged into this passage")] = 1
    page_end: Annotated[int | None, Field(description="Last page, when the passage runs over pages")] = None
    trimmed: Annotated[bool, Field(description=f"Cut to fit max_tokens; '{ELLIPSIS}' marks where text was "
                                               f"left out")] = False
    kb: Annotated[str, Field(description="The knowledge base it comes from")] = ""
    commit: Annotated[str, Field(description="The repository commit it was read at (a file of a git repository)")] = ""
    link: Annotated[str, Field(description="A permalink to its lines in the repository's web view")] = ""

    @property
    def last_chunk_index(self) -> int:
        return self.chunk_index + self.chunk_count - 1

    @computed_field(description="How it ranked, as a person reads it: score, rank on each side, trimmed")  # type: ignore[prop-decorator]
    @property
    def ranking(self) -> str:
        parts = [f"score {self.score:.3f}"]
        parts += [f"vector rank {self.vector_rank}"] if self.vector_rank else []
        parts += [f"keyword rank {self.keyword_rank}"] if self.keyword_rank else []
        parts += ["trimmed to fit the token budget"] if self.trimmed else []
        return " · ".join(parts)

    @computed_field(description="How the passage is cited: document, heading path, pages")  # type: ignore[prop-decorator]
    @property
    def citation(self) -> str:
        parts = [self.source, *([self.heading] if self.heading else [])]
        label = HEADING_SEPARATOR.join(parts)
        if self.commit:  # code is cited by lines at a commit
            lines = f"lines {self.line_start}-{self.line_end} " if self.line_start is not None else ""
            return f"{label} ({lines}@ {self.commit[:12]})"
        if self.page and self.page_end and self.page_end != self.page:
            return f"{label} (pages {self.page}-{self.page_end})"
        return f"{label} (page {self.page})" if self.page else label


def assemble(hits: Iterable[Hit], top_k: int, max_per_document: int | None) -> list[Hit]:
    """Up to `top_k` passages from chunk hits in rank order (consumed only as far as needed).

    A hit next to a passage of its document joins it (and may join two passages into one); a hit of
    a document that already has `max_per_document` passages elsewhere is left out.
    """
    groups: list[list[Hit]] = []  # chunks of each passage; the first one is the best ranked
    for hit in hits:
        same_document = [group for group in groups if (group[0].kb, group[0].source) == (hit.kb, hit.source)]
        touching = [group for group in same_document
                    if any(abs(member.chunk_index - hit.chunk_index) <= 1 for member in group)]
        if touching:
            touching[0].append(hit)
            for other in touching[1:]:
                touching[0].extend(other)
                groups.remove(other)
        elif max_per_document is None or len(same_document) < max_per_document:
            if len(groups) == top_k:
                break
            groups.append([hit])
    return [_merged(group) for group in groups]


def _merged(group: list[Hit]) -> Hit:
    best = group[0]
    if len(group) == 1:
        return best
    ordered = sorted(group, key=lambda hit: hit.chunk_index)
    text = ordered[0].text
    for previous, chunk in zip(ordered, ordered[1:]):
        body = without_overlap(previous.text, chunk.text)
        if chunk.heading != previous.heading:  # a new section starts inside the passage: say which
            body = f"{_local_heading(previous.heading, chunk.heading)}\n{body}"
        text = f"{text}\n\n{body}"
    first, last = ordered[0], ordered[-1]
    return replace(best, text=text, heading=first.heading, page=first.page, chunk_index=first.chunk_index,
                   line_start=first.line_start, line_end=last.line_end, chunk_count=len(ordered),
                   page_end=last.page if last.page != first.page else None)


def _local_heading(previous: str, heading: str) -> str:
    """The part of `heading` below what it shares with `previous` (the full path when nothing is shared)."""
    old, new = previous.split(HEADING_SEPARATOR), heading.split(HEADING_SEPARATOR)
    return HEADING_SEPARATOR.join(new[min(shared_depth(old, new), len(new) - 1):])  # the last heading stays


def without_overlap(previous: str, text: str) -> str:
    """`text` less its opening lines when they repeat the end of `previous` (the chunk overlap)."""
    end = previous.rstrip()
    cuts = [index for index, char in enumerate(text[:_OVERLAP_SEARCH_CHARS]) if char == "\n"]
    for cut in reversed(cuts):
        repeated = text[:cut].strip()
        if repeated and end.endswith(repeated):
            return text[cut + 1:].lstrip("\n")
    return text


def add_context(hits: list[Hit], text_by_position: dict[tuple[str, int], str], n: int) -> list[Hit]:  # of one KB
    """Each passage with up to `n` neighbouring chunks on each side, read as one continuous text:
    the overlap a neighbour shares with the passage is left out once."""
    def chain(source: str, positions: range) -> list[str]:
        return [text_by_position[(source, i)] for i in positions if (source, i) in text_by_position]

    with_context = []
    for hit in hits:
        before = chain(hit.source, range(hit.chunk_index - n, hit.chunk_index))
        after = chain(hit.source, range(hit.last_chunk_index + 1, hit.last_chunk_index + n + 1))
        text = without_overlap(before[-1], hit.text) if before else hit.text
        with_context.append(replace(hit, text=text, context_before=_joined(before),
                                    context_after=_joined([hit.text, *after])[len(hit.text):].lstrip("\n")))
    return with_context


def _joined(texts: list[str]) -> str:
    """Consecutive chunks as one text, each overlap once."""
    if not texts:
        return ""
    joined = texts[0]
    for previous, text in zip(texts, texts[1:]):
        joined = f"{joined}\n\n{without_overlap(previous, text)}"
    return joined


def fit_budget(hits: list[Hit], max_tokens: int, counter: TokenCounter, query: str,
               token_bounds: list[int | None] | None = None) -> tuple[list[Hit], list[str]]:
    """The passages, cut to `max_tokens` in all (text and context); notes say what was left out. `token_bounds`:
    an upper bound of each passage's tokens where the index knows one; when those fit, nothing is counted."""
    kept = list(hits)
    known = [bound for bound in token_bounds or [] if bound is not None]
    if len(known) == len(kept) and sum(known) <= max_tokens:
        return kept, []
    sizes = _sizes(kept, counter)
    if sum(sizes) <= max_tokens:
        return kept, []
    while len(kept) > 1 and max_tokens // len(kept) < MIN_PASSAGE_TOKENS:
        kept.pop()  # the lowest-ranked passage: better a few readable passages than many stubs
        sizes.pop()
    notes = []
    if len(kept) < len(hits):
        notes.append(f"{len(hits) - len(kept)} lower-ranked passage(s) left out to stay within "
                     f"max_tokens={max_tokens}; ask for fewer results or a larger budget to see them")
    shares = _shares(sizes, max_tokens)
    terms = _match_terms(query)
    return [hit if size <= share else _trimmed(hit, share, counter, terms)
            for hit, size, share in zip(kept, sizes, shares)], notes


def _size(hit: Hit, counter: TokenCounter) -> int:
    return _sizes([hit], counter)[0]


def _sizes(hits: list[Hit], counter: TokenCounter) -> list[int]:
    """The tokens of each passage, its context included, counted in one call (one hand-off to the tokenizer's
    threads, not one per passage)."""
    parts = [[part for part in (hit.context_before, hit.text, hit.context_after) if part] for hit in hits]
    counts = iter(counter.count([part for passage in parts for part in passage]))
    return [sum(next(counts) for _ in passage) for passage in parts]


def _shares(sizes: list[int], budget: int) -> list[int]:
    """An even split of `budget`, where a passage needing less than its share passes the rest on."""
    shares = [0] * len(sizes)
    remaining = budget
    for position, index in enumerate(sorted(range(len(sizes)), key=sizes.__getitem__)):
        shares[index] = min(sizes[index], remaining // (len(sizes) - position))
        remaining -= shares[index]
    return shares


def _trimmed(hit: Hit, share: int, counter: TokenCounter, terms: set[str]) -> Hit:
    """The passage within `share` tokens: context gives way first, then the text is cut around its
    best-matching sentence."""
    text_size = counter.count([hit.text])[0]
    if text_size < share:
        room = share - text_size
        before = _sentence_window(hit.context_before, room // 2, counter, anchor="end")
        room -= counter.count([before])[0] if before else 0
        after = _sentence_window(hit.context_after, room, counter, anchor="start")
        hit = replace(hit, context_before=before, context_after=after, trimmed=True)
    else:
        hit = replace(hit, text=_around_best_sentence(hit.text, share, counter, terms), context_before="",
                      context_after="", trimmed=True)
    while _size(hit, counter) > share:  # joined sentences can count a token more than their parts
        if hit.context_after or hit.context_before:
            hit = replace(hit, context_after="") if hit.context_after else replace(hit, context_before="")
        else:
            cut = counter.head(hit.text, max(0, counter.count([hit.text])[0] - 3)).rstrip()
            hit = replace(hit, text=f"{cut} {ELLIPSIS}")
    return hit


def _around_best_sentence(text: str, budget: int, counter: TokenCounter, terms: set[str]) -> str:
    """The best-matching sentence and as many of its neighbours as fit, "…" where text was left out."""
    pieces = sentences(text)
    sizes = counter.count(pieces)
    best = max(range(len(pieces)), key=lambda i: (_match(pieces[i], terms), -i))
    start, end, used = best, best + 1, sizes[best]
    room = budget - 2  # the two ellipses
    grown = True
    while grown:  # one sentence after, one before, while they fit
        grown = False
        if end < len(pieces) and used + sizes[end] <= room:
            used, end, grown = used + sizes[end], end + 1, True
        if start > 0 and used + sizes[start - 1] <= room:
            used, start, grown = used + sizes[start - 1], start - 1, True
    window = "".join(pieces[start:end]).strip()
    if used > room:  # the best sentence alone is too long: its beginning
        window = counter.head(window, room).strip()
    head = f"{ELLIPSIS} " if start > 0 else ""
    tail = f" {ELLIPSIS}" if end < len(pieces) or used > room else ""
    return f"{head}{window}{tail}"


def _sentence_window(text: str, budget: int, counter: TokenCounter, anchor: str) -> str:
    """The whole sentences at the start (or end) of `text` that fit `budget` tokens, marked when cut."""
    if not text or budget <= 2:
        return ""
    pieces = sentences(text)
    order = reversed(range(len(pieces))) if anchor == "end" else range(len(pieces))
    sizes = counter.count(pieces)
    chosen, used = [], 1  # one token for the ellipsis
    for index in order:
        if used + sizes[index] > budget:
            break
        chosen.append(index)
        used += sizes[index]
    if len(chosen) == len(pieces):
        return text
    if not chosen:
        return ""
    window = "".join(pieces[i] for i in sorted(chosen)).strip()
    return f"{ELLIPSIS} {window}" if anchor == "end" else f"{window} {ELLIPSIS}"


def _match_terms(query: str) -> set[str]:
    return {term.lower() for term in keyword_terms(query).split()}


def _match(sentence: str, terms: set[str]) -> int:
    """How much of the query a sentence holds: the length of the query terms found in it."""
    lowered = sentence.lower()
    return sum(len(term) for term in terms if term in lowered)
