"""Passages an LLM can use: ranked chunks assembled the way a careful researcher would quote them.

- A passage is cited where its evidence is: by the section (or code symbol) of its best chunk that holds most of
  the query, with that section's heading path, lines and page; a chunk holding several small sections keeps each
  one's place (its parts), and the passage lists them all.
- Hits of one document that are adjacent (or overlap) become one passage: the text of all its chunks
  in order with the repeated overlap removed, a new section's heading line where one begins (as the document
  writes it; code's own lines show where a symbol begins). A merged passage scores what its best chunk scored,
  keeps that chunk's ranks and is cited by the part of its chunks holding most of the query. Neighbouring code
  symbols stay passages of their own.
- A document gives at most `max_per_document` passages, so one long document cannot fill the list.
- A whole answer fits `max_tokens` (counted with the embedding model's tokenizer): its notes, each passage's
  citation lines and its text with its neighbour context. What is left after the notes is shared out evenly, a
  short passage lending what it does not need; a passage over its share is cut at sentence boundaries around its
  best-matching sentence, context first, and says so (`trimmed`, "…" where text was left out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Annotated, Any
from collections.abc import Iterable, Sequence

from pydantic import ConfigDict, Field, computed_field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from .index.keywords import keyword_terms
from .text import sentences, without_overlap
from .vocabulary import HEADING_SEPARATOR, citation_marker
from .models.base import TokenCounter

__all__ = ["Hit", "citation_line"]  # what the core's API (mcp_kb.api) offers from this module

ELLIPSIS = "…"
# A passage given fewer tokens than this says too little; lower-ranked passages are left out instead.
MIN_PASSAGE_TOKENS = 48
_JOINT_TOKENS = 2  # what the line breaks between an answer's parts may count, per part
_LEFT_OUT_NOTE_TOKENS = 40  # the note saying lower-ranked passages were left out
NO_PASSAGE_FITS = "no passage fits max_tokens"  # how the note begins when even the best one's citation does not


@pydantic_dataclass(frozen=True)
class Part:
    """A section (or code symbol) of a passage, in the order of its text."""

    heading: Annotated[str, Field(description=f"Heading path, e.g. 'Install{HEADING_SEPARATOR}Linux'")]
    line_start: Annotated[int | None, Field(description="Its first line in the document")] = None
    line_end: Annotated[int | None, Field(description="Its last line in the document")] = None
    page: Annotated[int | None, Field(description="Its PDF page, if any")] = None
    # the line that opens it where a passage shows a new section begin ("" for code: its own lines show it)
    opening: Annotated[str, Field(exclude=True)] = ""
    at: Annotated[int, Field(exclude=True)] = 0  # where it begins in its chunk's text


# Its JSON schema is that of what is sent, so it lists the citation (computed from the other fields).
@pydantic_dataclass(frozen=True, config=ConfigDict(json_schema_mode_override="serialization"))
class Hit:
    """One passage (one chunk, or adjacent chunks of one document merged) with its citation: what a
    search returns to every face (the search tool's structured output is this record, described here, its
    citation included, so no face words a citation of its own)."""

    text: str
    source: Annotated[
        str, Field(description="The document: a file path relative to the knowledge base root, or a page's URL")
    ]
    title: str
    heading: Annotated[
        str, Field(description=f"Heading path of the part its evidence is in, e.g. 'Install{HEADING_SEPARATOR}Linux'")
    ]
    page: Annotated[int | None, Field(description="PDF page number, if any (the first, when page_end is set)")]
    chunk_index: Annotated[int, Field(description="First chunk of the passage")]
    score: float
    line_start: Annotated[int | None, Field(description="First line of the part cited, in the document")] = None
    line_end: Annotated[int | None, Field(description="Last line of the part cited")] = None
    vector_rank: Annotated[int | None, Field(description="1-based rank of its best chunk on the vector side")] = None
    keyword_rank: Annotated[int | None, Field(description="1-based rank of its best chunk on the keyword side")] = None
    context_before: str = ""
    context_after: str = ""
    chunk_count: Annotated[int, Field(description="Adjacent chunks of the document merged into this passage")] = 1
    page_end: Annotated[int | None, Field(description="Last page, when the passage runs over pages")] = None
    trimmed: Annotated[
        bool, Field(description=f"Cut to fit max_tokens; '{ELLIPSIS}' marks where text was left out")
    ] = False
    kb: Annotated[str, Field(description="The knowledge base it comes from")] = ""
    commit: Annotated[str, Field(description="The repository commit it was read at (a file of a git repository)")] = ""
    link: Annotated[str, Field(description="A permalink to its lines in the repository's web view")] = ""
    parts: Annotated[
        tuple[Part, ...],
        Field(
            description="Each section (or symbol) the passage's text holds, in "
            "order, with its lines: the citation names the one its "
            "evidence is in"
        ),
    ] = ()
    indexed_at: Annotated[str, Field(description="When its document was indexed (RFC 3339, UTC)")] = ""
    changed: Annotated[
        str,
        Field(
            description="How its document's source changed since it was indexed, in one line "
            "('' when it has not, or cannot be told): the text may be out of date "
            "until the knowledge base is synced"
        ),
    ] = ""

    @property
    def last_chunk_index(self) -> int:
        return self.chunk_index + self.chunk_count - 1

    @computed_field(description="Its source changed since it was indexed (`changed` says how)")  # type: ignore[prop-decorator]
    @property
    def stale(self) -> bool:
        return bool(self.changed)

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


def parts_of(stored: str | None, whole: Part) -> tuple[Part, ...]:
    """A chunk's parts from its row's JSON (schema.ChunkRow.parts); `whole`, the chunk as one part, where its row has
    none (an index built before parts)."""
    if not stored:
        return (whole,)
    placed: list[list[Any]] = json.loads(stored)
    return tuple(Part(heading, first, last, page, opening, at) for heading, first, last, page, at, opening in placed)


def _part_texts(hit: Hit) -> list[str]:
    """The text of each part of a chunk's hit, under its heading."""
    starts = [part.at for part in hit.parts]
    return [
        f"{part.heading}\n{hit.text[start:end]}"
        for part, start, end in zip(hit.parts, starts, [*starts[1:], len(hit.text)])
    ]


def _matches(texts: list[str], query: str) -> list[tuple[int, int]]:
    """How well each part matches: the length of the query's terms it holds that not every part holds (a term's
    length says how telling it is), then its length (among parts holding as much, the longest)."""
    held = [set(keyword_terms(text).lower().split()) for text in texts]
    telling = {term for term in _match_terms(query) if not all(term in terms for terms in held)}
    return [(sum(len(term) for term in telling & terms), len(text)) for terms, text in zip(held, texts)]


def _cited_by(hit: Hit, part: Part) -> Hit:
    return replace(hit, heading=part.heading, line_start=part.line_start, line_end=part.line_end, page=part.page)


def assemble(hits: Iterable[Hit], top_k: int, max_per_document: int | None, query: str = "") -> list[Hit]:
    """Up to `top_k` passages from chunk hits in rank order (consumed only as far as needed).

    A hit next to a passage of its document joins it (and may join two passages into one), unless they meet where
    one code symbol ends and another begins (each is a passage cited by its own name); a hit of a document that
    already has `max_per_document` passages elsewhere is left out.
    """
    groups: list[list[Hit]] = []  # chunks of each passage; the first one is the best ranked
    for hit in hits:
        same_document = [group for group in groups if (group[0].kb, group[0].source) == (hit.kb, hit.source)]
        touching = [group for group in same_document if any(_reads_on(member, hit) for member in group)]
        if touching:
            touching[0].append(hit)
            for other in touching[1:]:
                touching[0].extend(other)
                groups.remove(other)
        elif max_per_document is None or len(same_document) < max_per_document:
            if len(groups) == top_k:
                break
            groups.append([hit])
    return [_merged(group, query) for group in groups]


def _reads_on(hit: Hit, other: Hit) -> bool:
    """Whether two chunks of a document read as one passage: neighbours, not two code symbols meeting."""
    if abs(hit.chunk_index - other.chunk_index) > 1:
        return False
    first, second = sorted((hit, other), key=lambda chunk: chunk.chunk_index)
    if not first.parts or not second.parts:
        return True
    end, start = first.parts[-1], second.parts[0]
    return end.heading == start.heading or not (_is_symbol(end) and _is_symbol(start))


def _is_symbol(part: Part) -> bool:
    """A code symbol's part: a heading that is not a line of the text (code's own lines show where it begins)."""
    return bool(part.heading) and not part.opening


def _merged(group: list[Hit], query: str) -> Hit:
    """One passage of adjacent chunks (or one chunk), cited by its part holding most of the query."""
    best, chosen = group[0], _cited_part(group, query)
    if len(group) == 1:
        unchanged = (best.heading, best.line_start, best.line_end, best.page) == (
            chosen.heading,
            chosen.line_start,
            chosen.line_end,
            chosen.page,
        )
        return best if unchanged else _cited_by(best, chosen)
    ordered = sorted(group, key=lambda hit: hit.chunk_index)
    text = ordered[0].text
    for previous, chunk in zip(ordered, ordered[1:]):
        body = without_overlap(previous.text, chunk.text)
        opening = chunk.parts[0].opening if chunk.parts else ""
        if (
            chunk.parts
            and previous.parts
            and chunk.parts[0].heading != previous.parts[-1].heading
            and opening
            and not body.startswith(opening)
        ):  # a new section starts inside the passage: its heading line
            body = f"{opening}\n{body}"
        text = f"{text}{_between(previous, chunk)}{body}"
    first = ordered[0]
    pages = [hit.page for hit in ordered if hit.page is not None]
    parts = _joined_parts([part for hit in ordered for part in hit.parts])
    cited = _holding(parts, chosen)
    return replace(
        best,
        text=text,
        chunk_index=first.chunk_index,
        chunk_count=len(ordered),
        page=pages[0] if pages else None,
        page_end=pages[-1] if pages and pages[-1] != pages[0] else None,
        parts=parts,
        heading=cited.heading,
        line_start=cited.line_start,
        line_end=cited.line_end,
    )


def _holding(parts: tuple[Part, ...], chosen: Part) -> Part:
    """The passage's part that holds a chunk's part (a section continued over chunks is one part, with its whole
    span)."""
    return next(
        (
            part
            for part in parts
            if (part.heading, part.page) == (chosen.heading, chosen.page)
            and (
                chosen.line_start is None
                or part.line_start is None
                or part.line_start <= chosen.line_start <= (part.line_end or part.line_start)
            )
        ),
        chosen,
    )


def _between(previous: Hit, chunk: Hit) -> str:
    """What joins two chunks in a passage: the line breaks between them in the document where their lines say
    (code's statements and symbols on consecutive lines stay so), else a blank line."""
    end, start = (
        previous.parts[-1].line_end if previous.parts else None,
        chunk.parts[0].line_start if chunk.parts else None,
    )
    gap = start - end - 1 if start is not None and end is not None else -1
    return "\n" * (gap + 1) if 0 <= gap <= 2 else "\n\n"


def _cited_part(group: list[Hit], query: str) -> Part:
    """The part of a passage's chunks holding most of the query's telling terms; among equals, one of its best chunk
    (the first of `group`), then the longest: so a chunk holding one part is cited by it, whatever the query."""
    best = group[0]
    if len({part.heading for hit in group for part in hit.parts}) <= 1:  # one section: nothing to choose
        return best.parts[0] if best.parts else Part(best.heading, best.line_start, best.line_end, best.page)
    candidates = [
        (number == 0, part, text) for number, hit in enumerate(group) for part, text in zip(hit.parts, _part_texts(hit))
    ]
    scores = _matches([text for *_, text in candidates], query)
    ranked = max(range(len(candidates)), key=lambda i: (scores[i][0], candidates[i][0], scores[i][1]))
    return candidates[ranked][1]


def _joined_parts(parts: Sequence[Part]) -> tuple[Part, ...]:
    """Parts in order, a section continued in the next chunk listed once with its whole span."""
    joined: list[Part] = []
    for part in parts:
        if joined and joined[-1].heading == part.heading and joined[-1].page == part.page:
            joined[-1] = replace(
                joined[-1], line_end=part.line_end if part.line_end is not None else joined[-1].line_end
            )
        else:
            joined.append(part)
    return tuple(joined)


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
        with_context.append(
            replace(
                hit,
                text=text,
                context_before=_joined(before),
                context_after=_joined([hit.text, *after])[len(hit.text) :].lstrip("\n"),
            )
        )
    return with_context


def _joined(texts: list[str]) -> str:
    """Consecutive chunks as one text, each overlap once."""
    if not texts:
        return ""
    joined = texts[0]
    for previous, text in zip(texts, texts[1:]):
        joined = f"{joined}\n\n{without_overlap(previous, text)}"
    return joined


def citation_line(hit: Hit, number: int, name_kb: bool = False, as_trimmed: bool = False) -> str:
    """How an answer introduces passage `number`: `[n] file › heading (page p) (score s)` (`name_kb`: its KB first,
    in a search across KBs; `as_trimmed`: as it reads once trimmed). The model reads the score alone: ranks cost
    tokens and tell it nothing."""
    trimmed = ", trimmed to fit max_tokens" if hit.trimmed or as_trimmed else ""
    source = f"{hit.kb}: {hit.citation}" if name_kb else hit.citation
    return f"{citation_marker(number)} {source} (score {hit.score:.3f}{trimmed})"


@dataclass(frozen=True)
class Budget:
    """An answer's token budget (a search's max_tokens) and the tokenizer that counts its text against it."""

    max_tokens: int
    counter: TokenCounter


def fit_budget(
    hits: list[Hit],
    limit: Budget,
    query: str,
    token_bounds: list[int | None] | None = None,
    notes: Sequence[str] = (),
) -> tuple[list[Hit], list[str]]:
    """The passages, cut so the whole answer's text fits `limit.max_tokens`: its `notes`, each passage's frame (its
    citation line, as trimmed and named by KB: the most it can be, and its permalink) and text with context; notes say what was
    left out. `token_bounds`: an upper bound of each passage's tokens where the index knows one; when those fit with
    the frames and notes, no passage is counted (and nothing at all when the frames fit at a token a byte)."""
    max_tokens, counter = limit.max_tokens, limit.counter
    frame_texts = [_frame_text(hit, len(hits)) for hit in hits]
    said = "\n".join(f"Note: {note}" for note in notes)
    known = [bound for bound in token_bounds or [] if bound is not None]
    if len(known) == len(hits):  # the passages' sizes are known: the frames first at a token a byte, then counted
        lines = "\n".join(frame_texts)
        if (
            sum(known) + len(lines.encode()) + len(said.encode()) + 3 * _JOINT_TOKENS * len(hits) <= max_tokens
            or sum(known) + _one_count(lines, counter) + _one_count(said, counter) + 3 * _JOINT_TOKENS * len(hits)
            <= max_tokens
        ):
            return list(hits), []
    budget = max_tokens - (_one_count(said, counter) if notes else 0)
    frames = [count + 3 * _JOINT_TOKENS for count in counter.count(frame_texts)] if hits else []
    sizes = _sizes(hits, counter)
    if sum(sizes) + sum(frames) <= budget:
        return list(hits), []
    kept = _readable(frames, budget)
    if kept < len(hits):
        budget -= _LEFT_OUT_NOTE_TOKENS  # the note saying so
        kept = _readable(frames, budget)
    left_out = []
    if not kept:
        left_out.append(
            f"{NO_PASSAGE_FITS}={max_tokens}: the best one's citation alone takes {frames[0]} tokens; ask "
            f"for a larger budget"
        )
    elif kept < len(hits):
        left_out.append(
            f"{len(hits) - kept} lower-ranked passage(s) left out to stay within max_tokens={max_tokens}; "
            f"ask for fewer results or a larger budget to see them"
        )
    sizes, frames = sizes[:kept], frames[:kept]
    shares = [share - frame for share, frame in zip(_shares([s + f for s, f in zip(sizes, frames)], budget), frames)]
    terms = _match_terms(query)
    return [
        hit if size <= share else _trimmed(hit, share, counter, terms) for hit, size, share in zip(hits, sizes, shares)
    ], left_out


def _one_count(text: str, counter: TokenCounter) -> int:
    """The tokens of lines counted as one text (one call: a batch's hand-off to the tokenizer's threads costs more),
    and the line break that joins them to the rest."""
    return counter.count([text])[0] + _JOINT_TOKENS if text else 0


def _readable(frames: list[int], budget: int) -> int:
    """How many of the best passages fit `budget` with at least MIN_PASSAGE_TOKENS of text each (better a few
    readable passages than many stubs), one whenever its frame leaves room for any text."""
    kept = len(frames)
    while kept > 1 and (budget - sum(frames[:kept])) // kept < MIN_PASSAGE_TOKENS:
        kept -= 1
    return kept if kept > 1 or (frames and budget - frames[0] > _JOINT_TOKENS) else 0


def _frame_text(hit: Hit, number: int) -> str:
    """Everything an answer's text says of a passage besides the passage, at its longest."""
    return f"{citation_line(hit, number, name_kb=True, as_trimmed=True)}\n{hit.link}"


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
        hit = replace(
            hit,
            text=_around_best_sentence(hit.text, share, counter, terms),
            context_before="",
            context_after="",
            trimmed=True,
        )
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
