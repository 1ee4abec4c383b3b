"""Reading and browsing documents from the index: a document's text whole, by section, pages, lines or from a
passage on, each answer within a token budget with a cursor to go on; a KB's documents listed and a document's
outline, a page at a time. Everything comes from the generation's reading table (ingest/reading.py keeps what it
holds), so a server without the sources (a read-only one on object storage) reads as well as the writer.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .cursors import Cursors, carried, digest, leading, named
from .doc_ids import repo_file, rooted_id_patterns
from .errors import CursorError, NotReadableError, NotSyncedError, SearchError
from .freshness import Freshness
from .history import Edition, edition
from .index.contract import Store
from .index.filters import build_where, glob_to_regex
from .ingest.reading import Section, outline_of, section_names
from .lru import BoundedLRU
from .text import clipped
from .models.base import TokenCounter
from .read_outputs import BrowseOutput, DocumentEntry, OutlineEntry, ReadOutput
from .records import recorded_at
from .requests import BrowseRequest, ReadRequest
from .settings import KBConfig
from .vocabulary import HEADING_SEPARATOR, LIST_TOOL, READ_TOOL, heading_path, sync_remedy

_CHARS_PER_TOKEN_MAX = 16  # a read encodes at most this many characters per token of its budget
_FRAME_TOKENS = 50  # an answer's location and cursor lines, less its path, section and cursor
_LEAST_TOKENS = 16  # of text in an answer, whatever goes with it
_CUT_TRIES = 3  # cuts of a part before its cursor is counted as a token a character
_CURSOR_TOKENS_SLACK = 8  # a cursor that needed more than counted: room for the next one's splitting otherwise
_LINE_END_SHARE = 0.5  # an answer cut inside a line ends at the line before, unless that drops half of it
_TITLE_CHARS = 300  # of a title or a heading, in a listing or an outline
_SECTIONS_NAMED = 12  # headings an unknown section's error names
_GLOB = re.compile(r"[*?]")
_ALLOWED_KEPT = 16
RESOURCE_MAX_CHARS = 4_000_000  # of a document resource's text


@dataclass(frozen=True)
class _Document:
    """A reading row as the reader uses it."""

    kb: str
    row: dict[str, Any]  # LanceDB's reading row (ReadingRow's columns)
    edition: Edition

    @property
    def text(self) -> str:
        return str(self.row["text"])

    @property
    def version(self) -> str:
        """Enough of the content hash to tell this version from another (a cursor carries it)."""
        return str(self.row["file_hash"])[:16]

    @property
    def sections(self) -> tuple[Section, ...]:
        return outline_of(self.row["outline"])

    def heading(self, section: int | None) -> str:
        """The heading path of section number `section` as the outline names it ("" for None: not a section)."""
        return "" if section is None else _headings(self.sections)[section]

    @property
    def pages(self) -> list[tuple[int, int]]:
        return list(zip(self.row["page_numbers"] or [], self.row["page_starts"] or []))

    def tokens_in(self, chars: int) -> int:
        """About how many tokens `chars` characters of this document hold (its own ratio)."""
        return round(chars * int(self.row["tokens"]) / max(len(self.text), 1))

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def page_of(self, offset: int) -> int | None:
        pages = self.pages
        at = bisect.bisect_right([start for _, start in pages], offset) - 1
        return pages[at][0] if pages and at >= 0 else (pages[0][0] if pages else None)


class Reader:
    """Reads documents of KBs from a store's reading tables."""

    def __init__(
        self, store: Store, tokenizer: Callable[[], TokenCounter], cursors: Cursors, freshness: Freshness | None = None
    ):
        self.store = store
        self.freshness = freshness
        self._tokenizer = tokenizer
        self.cursors = cursors
        self._allowed: BoundedLRU[tuple[str, str, int], frozenset[str]] = BoundedLRU(_ALLOWED_KEPT)

    # ---- read ----------------------------------------------------------------------------
    def read(self, kb: KBConfig, request: ReadRequest, budgeted: bool = True) -> ReadOutput:
        """The part of a document a request asks for, from where its cursor stopped, within its max_tokens (unless
        not `budgeted`: all of it)."""
        form = request.form()
        if request.cursor:
            place = self.cursors.open(request.cursor, "read", kb.name)
            document = self._placed_document(kb, place)
            if document.version != place["h"]:
                raise CursorError(
                    f"{document.row['path']} changed since this cursor was given (a sync indexed a "
                    "new version): read it again without the cursor"
                )
            start, end, section = int(place["a"]), int(place["e"]), place.get("i")
            outside = section is not None and not 0 <= section < len(document.sections)
            if outside or not 0 <= start <= end <= len(document.text):
                raise CursorError("this cursor points outside its document: read it again without the cursor")
        else:
            document = self._document(kb, request.path.strip(), request.as_of)
            start, end, section = self._span(document, form, request)
        answer = self._answer(document, start, end, section, request.max_tokens if budgeted else None)
        if form == "chunk" and not request.cursor:
            answer = _with_passage(answer, document, int(request.chunk or 0), start)
        return self._dated(kb, document, answer)

    def _dated(self, kb: KBConfig, document: _Document, answer: ReadOutput) -> ReadOutput:
        """The answer saying when its document was indexed and, read in the current version, whether its source
        changed since."""
        path = document.row["path"]
        changed = (
            {}
            if document.edition.asked_for or self.freshness is None
            else self.freshness.changed(
                kb,
                self.store.fingerprints(kb.name, document.edition.synced, [path]),
                self.store.read_state(kb.name),
            )
        )
        return answer.model_copy(update={"indexed_at": document.row["synced_at"], "changed": changed.get(path, "")})

    def _span(self, document: _Document, form: str, request: ReadRequest) -> tuple[int, int, int | None]:
        """The characters of the part asked for, and its section's number in the outline (None: not a section)."""
        text = document.text
        if form == "section":
            index = _find_section(document, str(request.section))
            section = document.sections[index]
            return section.start, section.end, index
        if form == "pages":
            return (*_page_span(document, str(request.pages)), None)
        if form == "lines":
            first, last = _range(str(request.lines), "lines")
            if first > int(document.row["lines"]):
                raise SearchError(
                    f"{document.row['path']} has {document.row['lines']} lines; lines "
                    f"{str(request.lines).strip()} are past its end"
                )
            return _line_offset(text, first), _line_end(text, last), None
        if form == "chunk":
            starts = document.row["chunk_starts"] or []
            index = int(request.chunk or 0)
            if index >= len(starts):
                raise SearchError(
                    f"{document.row['path']} has {len(starts)} passages (chunk_index 0 to "
                    f"{len(starts) - 1}); chunk {index} is not one of them"
                )
            # the passage before it first, for context, if it leaves room for this one
            room = request.max_tokens * _CHARS_PER_TOKEN_MAX // 4
            return max(starts[index - 1] if index > 0 else 0, starts[index] - room), len(text), None
        return 0, len(text), None

    def _answer(
        self,
        document: _Document,
        start: int,
        end: int,
        section: int | None,
        max_tokens: int | None,
    ) -> ReadOutput:
        part = self._cut(document, start, end, section, max_tokens) if max_tokens else document.text[start:end]
        stop = start + len(part)
        # the text as it is, so the parts of a read put end to end are the document (a line longer than the budget
        # is cut inside); a final line break ends the last line shown
        shown = part
        first_line = document.line_of(start)
        last_line = first_line + shown.removesuffix("\n").count("\n")
        cursor = None
        if stop < end:
            cursor = self._cursor(document, stop, end, section)
        return ReadOutput(
            kb=document.kb,
            path=document.row["path"],
            title=document.row["title"],
            section=document.heading(section),
            text=shown,
            line_start=first_line,
            line_end=last_line,
            lines=int(document.row["lines"]),
            page_start=document.page_of(start),
            page_end=document.page_of(start + max(len(shown) - 1, 0)),
            pages=document.row["pages"],
            tokens_left=document.tokens_in(end - stop),
            cursor=cursor,
            as_of=_as_of(document.edition),
            note=_lines_note(document),
        )

    def _cursor(self, document: _Document, at: int, end: int, section: int | None) -> str:
        place = {
            **_path_place(document.row["path"]),
            "h": document.version,
            "a": at,
            "e": end,
            **_pinned(document.edition),
            **({} if section is None else {"i": section}),
        }
        return self.cursors.make("read", document.kb, place)

    def _cut(self, document: _Document, start: int, end: int, section: int | None, max_tokens: int) -> str:
        """The text from `start` that fits `max_tokens` with what goes with it (where it is: path, section, lines;
        and its cursor), ending at a line's end when one is near. A cursor's tokens depend on where the part stops
        (base64 of another number splits another way), so the cut is tried again when its cursor needs more."""
        counter = self._tokenizer()
        about = f"{document.row['path']}{HEADING_SEPARATOR}{document.heading(section)}"
        fixed = sum(counter.count([about, _lines_note(document)])) + _FRAME_TOKENS
        cursor = repr(self._cursor(document, end, end, section))  # quoted, as an answer shows it
        allowed = counter.count([cursor])[0]
        for tried in range(_CUT_TRIES):
            if tried == _CUT_TRIES - 1:
                allowed = len(cursor)  # a token holds a character at least: never more tokens than characters
            part = self._part(document, start, end, max(max_tokens - fixed - allowed, _LEAST_TOKENS), counter)
            if start + len(part) >= end:
                break
            cursor = repr(self._cursor(document, start + len(part), end, section))
            needed = counter.count([cursor])[0]
            if needed <= allowed:
                break
            allowed = needed + _CURSOR_TOKENS_SLACK
        return part

    @staticmethod
    def _part(document: _Document, start: int, end: int, budget: int, counter: TokenCounter) -> str:
        window = document.text[start : min(end, start + budget * _CHARS_PER_TOKEN_MAX)]
        part = counter.head(window, budget)
        if len(part) < end - start:
            line_end = part.rfind("\n")
            part = part[: line_end + 1] if line_end >= len(part) * _LINE_END_SHARE else part
        return part

    def _document(self, kb: KBConfig, path: str, as_of: Any = None) -> _Document:
        return self._document_in(kb, self._edition(kb, as_of), path)

    def _placed_document(self, kb: KBConfig, place: dict[str, Any]) -> _Document:  # Cursors.open's place
        """The document a cursor's place names (a long path by its digest), in the version it pins."""
        read = self._edition(kb, place.get("v"))
        if "p" in place:
            return self._document_in(kb, read, str(place["p"]))
        listing = self.store.reading_listing(kb.name, read.synced, read.at)
        path = named(listing["path"], str(place["d"])) if listing is not None else None
        if path is None:
            raise CursorError(
                f"the document this cursor reads is no longer in {kb.name!r}{_in(read)} (a sync removed it)"
            )
        return self._document_in(kb, read, path)

    def _document_in(self, kb: KBConfig, read: Edition, path: str) -> _Document:
        row = self.store.read_reading(kb.name, read.synced, path, read.at) if self._allows(kb, read, path) else None
        if row is None:
            if self.store.reading_listing(kb.name, read.synced, read.at) is None:
                raise NotReadableError(kb.name)
            raise SearchError(
                f"knowledge base {kb.name!r} has no document {_shown(path)}{_in(read)} (paths are as "
                f"search results cite them; {LIST_TOOL} or `mcp-kb ls` lists them)"
            )
        return _Document(kb.name, row, read)

    def _edition(self, kb: KBConfig, as_of: Any) -> Edition:
        """What the read reads: the version `as_of` names (a cursor's: its number), else the current one."""
        read = edition(self.store, kb.name, None if as_of is None else str(as_of))
        if read.generation is None:
            raise NotSyncedError(kb.name, self.store.uri, self.store.read_state(kb.name).last_error)
        return read

    def _allows(self, kb: KBConfig, read: Edition, path: str) -> bool:
        """Whether the KB's own filter (`[kb.search] filter`, applied to every search) lets this document be seen."""
        allowed = self._allowed_paths(kb, read)
        return allowed is None or path in allowed

    def _allowed_paths(self, kb: KBConfig, read: Edition) -> frozenset[str] | None:
        """The documents the KB's filter lets callers see (None: it has no filter), read once per index version."""
        if not kb.search.filter:
            return None
        view = self.store.view(kb.name, read.synced, read.at)
        if view is None:
            return frozenset()
        key = (kb.name, read.synced, view.version)
        allowed = self._allowed.get(key)
        if allowed is None:
            where = build_where(kb.search.filter, kb.filter_field_types(), rooted_id_patterns())
            assert where  # a filter that is not empty has a predicate
            allowed = frozenset(row["path"] for row in view.scan(where))
            self._allowed.put(key, allowed)
        return allowed

    def read_through(self, kb: KBConfig, request: ReadRequest) -> ReadOutput:
        """The whole part a read asks for in one answer, however long (a person's `mcp-kb read`)."""
        return self.read(kb, request, budgeted=False)

    def whole(self, kb: KBConfig, path: str) -> str:
        """A document's whole text (the document resource: a person attaches it), up to a bound that says where
        it stopped and how to read on."""
        document = self._document(kb, path)
        text = document.text
        if len(text) <= RESOURCE_MAX_CHARS:
            return text
        cursor = self._cursor(document, RESOURCE_MAX_CHARS, len(text), None)
        return (
            f"{text[:RESOURCE_MAX_CHARS]}\n\n[… the document goes on from line "
            f"{document.line_of(RESOURCE_MAX_CHARS)} of {document.row['lines']}: read on with {READ_TOOL}, "
            f"kb={kb.name!r}, cursor={cursor!r}]"
        )

    # ---- browse --------------------------------------------------------------------------
    def browse(self, kb: KBConfig, request: BrowseRequest) -> BrowseOutput:
        place = self.cursors.open(request.cursor, "browse", kb.name) if request.cursor else {}
        if place.get("o") is True if place else request.outline:  # a cursor goes on with what it was given for
            return self._outline(kb, request, place)
        read = self._edition(kb, place.get("v", request.as_of))
        listing = self.store.reading_listing(kb.name, read.synced, read.at)
        if listing is None:
            raise NotReadableError(kb.name)
        pattern = _placed_pattern(listing, place, request.path) if place else request.path
        sort = str(place.get("o", request.sort))
        matching = self._matching(kb, read, listing, pattern)
        if sort == "changed":
            matching = matching.take(pc.sort_indices(matching, [("mtime_ns", "descending"), ("path", "ascending")]))
        rest = _after(matching, place) if "l" in place else matching
        page = rest.slice(0, request.limit).to_pylist()
        cursor = None
        if len(page) < rest.num_rows:  # the next page begins after the last entry shown, however a sync moved it
            last = page[-1]
            cursor = self.cursors.make(
                "browse",
                kb.name,
                {
                    **_pattern_place(pattern),
                    "o": sort,
                    **_last_place(last["path"]),
                    **_pinned(read),
                    **({"m": last["mtime_ns"]} if sort == "changed" else {}),
                },
            )
        return BrowseOutput(
            kb=kb.name,
            path=pattern,
            documents=[_entry(row, kb) for row in page],
            total=matching.num_rows,
            cursor=cursor,
            as_of=_as_of(read),
        )

    def documents_under(self, kb: KBConfig, prefix: str, limit: int) -> tuple[list[str], int]:
        """Up to `limit` paths of the documents under `prefix` that callers may see, in order, and how many there
        are (a client completing a document's path); none before reading forms exist."""
        read = self._edition(kb, None)
        listing = self.store.reading_listing(kb.name, read.synced, read.at)
        if listing is None:
            return [], 0
        matching = self._matching(kb, read, listing, "")
        matching = matching.filter(pc.starts_with(matching["path"], prefix)) if prefix else matching
        return matching["path"].slice(0, limit).to_pylist(), matching.num_rows

    def browse_through(self, kb: KBConfig, request: BrowseRequest, limit: int | None) -> BrowseOutput:
        """Up to `limit` entries (None: all) of a listing or an outline in one answer (`mcp-kb ls`), its pages one
        after the other (its total says whether more remain)."""
        answers = [self.browse(kb, request)]
        while answers[-1].cursor and (limit is None or sum(_entries(a) for a in answers) < limit):
            answers.append(self.browse(kb, request.model_copy(update={"cursor": answers[-1].cursor})))
        documents = [entry for answer in answers for entry in answer.documents][:limit]
        outline = [entry for answer in answers for entry in answer.outline][:limit]
        return answers[0].model_copy(update={"documents": documents, "outline": outline, "cursor": None})

    def _matching(self, kb: KBConfig, read: Edition, listing: pa.Table, pattern: str) -> pa.Table:
        """The listed documents under a prefix or matching a glob (in path order), less those the KB's filter hides."""
        paths = listing["path"]
        if _GLOB.search(pattern):
            listing = listing.filter(pc.match_substring_regex(paths, glob_to_regex(pattern)))
        elif pattern:
            listing = listing.filter(pc.starts_with(paths, pattern))
        allowed = self._allowed_paths(kb, read)
        if allowed is not None:
            listing = listing.filter(pc.is_in(listing["path"], pa.array(sorted(allowed), pa.string())))
        return listing

    def _outline(self, kb: KBConfig, request: BrowseRequest, place: dict[str, Any]) -> BrowseOutput:  # Cursors.open's
        if place:
            document = self._placed_document(kb, place)
        elif request.path.strip():
            document = self._document(kb, request.path.strip(), request.as_of)
        else:
            raise SearchError("outline needs path: the document whose headings to list")
        path = document.row["path"]
        if place and document.version != place.get("h"):
            raise CursorError(f"{path} changed since this cursor was given: browse its outline again without it")
        sections = document.sections
        start = int(place.get("a", 0))
        shown = sections[start : start + request.limit]
        cursor = None
        if start + len(shown) < len(sections):
            cursor = self.cursors.make(
                "browse",
                kb.name,
                {
                    "o": True,
                    **_path_place(path),
                    "a": start + len(shown),
                    "h": document.version,
                    **_pinned(document.edition),
                },
            )
        headings = _headings(sections)[start : start + request.limit]
        return BrowseOutput(
            kb=kb.name,
            path=path,
            total=len(sections),
            cursor=cursor,
            as_of=_as_of(document.edition),
            outline=[_outline_entry(document, s, h) for s, h in zip(shown, headings)],
        )


def _pinned(read: Edition) -> dict[str, str]:
    """What a cursor carries of an earlier version (its number), so the next page reads the same one."""
    return {"v": str(read.asked_for.number)} if read.asked_for else {}


def _path_place(path: str) -> dict[str, str]:
    """How a cursor names a document: by its path, or by the path's digest when it is long."""
    return {"p": path} if carried(path) else {"d": digest(path)}


def _pattern_place(pattern: str) -> dict[str, object]:
    """How a cursor names what a listing lists: its pattern, or the pattern's digest when it is long (with its
    length when it is a prefix: the paths it lists start with it)."""
    if carried(pattern):
        return {"p": pattern}
    return {"q": digest(pattern), **({} if _GLOB.search(pattern) else {"n": len(pattern)})}


def _last_place(path: str) -> dict[str, str]:
    """How a cursor names the last entry a page showed: its path, or (long) its start and digest."""
    return {"l": path} if carried(path) else {"l": leading(path), "k": digest(path)}


def _placed_pattern(listing: pa.Table, place: dict[str, Any], asked: str) -> str:  # Cursors.open's place
    """What a listing's cursor lists: its pattern as carried; a long one given again with the cursor (as clients
    do), or a long prefix found again as the start of the paths it lists."""
    if "q" not in place:
        return str(place.get("p", ""))
    if digest(asked) == place["q"]:
        return asked
    if "n" in place:
        starts = pc.unique(pc.utf8_slice_codeunits(listing["path"], 0, int(place["n"])))
        found = named(starts, str(place["q"]))
        if found is not None:
            return found
        raise CursorError(
            "no document is left under the path this cursor lists (a sync removed them): list again without the cursor"
        )
    raise CursorError("this cursor goes on listing a long pattern: pass it with the same path")


def _as_of(read: Edition) -> str | None:
    return read.asked_for.describe() if read.asked_for else None


def _in(read: Edition) -> str:
    return f" in {read.asked_for.describe()}" if read.asked_for else ""


def _lines_note(document: _Document) -> str:
    """What the lines of a reading are, when they are not the file's own."""
    as_written = document.row.get("as_written")
    if as_written is None:  # a reading table of layout 2 or before
        return (
            f"this index was built before text files read as written: its lines may not be the file's; the next "
            f"sync rebuilds it with them, vectors reused ({sync_remedy(document.kb)})"
        )
    if not as_written:
        return (
            f"lines are of the text extracted from this {document.row['kind']} file, not of the file itself; "
            f"cite it by pages and sections"
        )
    return ""


def _with_passage(answer: ReadOutput, document: _Document, index: int, start: int) -> ReadOutput:
    """The answer marking where passage `index` lies in its text: from where its own text begins to where the next
    passage's does (cut where the answer ends)."""
    starts = document.row["chunk_starts"]
    end = starts[index + 1] if index + 1 < len(starts) else len(document.text)
    inside = (min(max(position - start, 0), len(answer.text)) for position in (starts[index], end))
    passage_start, passage_end = inside
    return answer.model_copy(
        update={
            "passage_start": passage_start,
            "passage_end": passage_start + len(answer.text[passage_start:passage_end].rstrip()),
        }
    )


def _after(listing: pa.Table, place: dict[str, Any]) -> pa.Table:  # Cursors.open's place
    """The entries of a listing (in its order) that come after the last one a page showed (`l`: its path; `m`: its
    last change, in a listing by last change)."""
    last = place["l"]
    if "k" in place:  # a long path: itself when still listed, else (a sync removed it) its start: what the page
        # showed under that start may come again, nothing is skipped
        last = named(listing["path"], str(place["k"])) or last
    later_path = pc.greater(listing["path"], last)
    if "m" not in place:
        return listing.filter(later_path)
    mtime = listing["mtime_ns"]
    same_time = pc.and_(pc.equal(mtime, place["m"]), later_path)
    return listing.filter(pc.or_(pc.less(mtime, place["m"]), same_time))


def _entries(answer: BrowseOutput) -> int:
    return len(answer.documents) + len(answer.outline)


def _entry(row: dict[str, Any], kb: KBConfig) -> DocumentEntry:  # pyarrow's listing row
    # A repository's file has no time of its own: its fingerprint's second number is its blob id, not a time.
    changed = "" if repo_file(kb, row["path"]) or not row["mtime_ns"] else recorded_at(row["mtime_ns"])
    return DocumentEntry(
        path=row["path"],
        title=clipped(row["title"], _TITLE_CHARS),
        kind=row["kind"],
        size=row["size"],
        pages=row["pages"],
        chunks=row["chunks"],
        tokens=row["tokens"],
        lines=row["lines"],
        changed=changed,
        synced=row["synced_at"],
    )


def _outline_entry(document: _Document, section: Section, heading: str) -> OutlineEntry:
    return OutlineEntry(
        heading=_listed(section, heading),
        depth=len(section.path),
        line_start=document.line_of(section.start),
        line_end=document.line_of(max(section.end - 1, section.start)),
        page_start=document.page_of(section.start),
        page_end=document.page_of(section.end - 1),
        tokens=document.tokens_in(section.end - section.start),
    )


def _headings(sections: tuple[Section, ...]) -> list[str]:
    """Each section's name as the outline shows it and a read takes it (`Guide › Notes (2)`)."""
    return section_names(section.path for section in sections)


def _listed(section: Section, name: str) -> str:
    """A section's name as the outline lists it: a long heading path clipped, its number (` (2)`) kept."""
    suffix = name[len(HEADING_SEPARATOR.join(section.path)) :]
    return clipped(name[: len(name) - len(suffix)], _TITLE_CHARS * len(section.path) - len(suffix)) + suffix


def _find_section(document: _Document, asked: str) -> int:
    """The number in the outline of the section a heading path names, as the outline (`Guide › Notes (2)`) or a
    citation writes it (the document's path or title may lead it; the last headings alone may do)."""
    sections = document.sections
    names = _headings(sections)
    named = [heading_path(heading) for heading in names]
    wanted = heading_path(asked)
    forms = [
        wanted,
        *(
            wanted.removeprefix(f"{lead}{HEADING_SEPARATOR}")
            for lead in (document.row["path"], document.row["title"])
            if wanted.startswith(f"{lead}{HEADING_SEPARATOR}")
        ),
    ]
    listed = [heading_path(_listed(section, name)) for section, name in zip(sections, names)]
    for candidates, matches in (
        (named, str.__eq__),
        (named, lambda heading, form: heading.casefold() == form.casefold()),
        (
            named,
            lambda heading, form: f"{HEADING_SEPARATOR}{heading}".casefold().endswith(
                f"{HEADING_SEPARATOR}{form}".casefold()
            ),
        ),
        (listed, str.__eq__),
    ):  # a long one, clipped as the outline lists it
        found = [index for index, heading in enumerate(candidates) for form in forms if matches(heading, form)]
        if found:
            return found[0]
    some = "; ".join(names[:_SECTIONS_NAMED])
    more = (
        f" (and {len(sections) - _SECTIONS_NAMED} more: {LIST_TOOL} with outline lists them)"
        if len(sections) > _SECTIONS_NAMED
        else ""
    )
    has = f"its sections: {clipped(some, 2_000)}{more}" if sections else "it has no headings; read it by lines"
    raise SearchError(f"{document.row['path']} has no section {_shown(asked)}; {has}")


def _page_span(document: _Document, asked: str) -> tuple[int, int]:
    pages = document.pages
    if not pages:
        raise SearchError(f"{document.row['path']} has no pages (it is not a PDF): read it by section or lines")
    first, last = _range(asked, "pages")
    numbers = [page for page, _ in pages]
    if not any(first <= page <= last for page in numbers):
        raise SearchError(
            f"{document.row['path']} has no text on page{'s' if last > first else ''} "
            f"{asked.strip()} (its pages with text: {_page_list(numbers)})"
        )
    start = next(offset for page, offset in pages if page >= first)
    end = next((offset for page, offset in pages if page > last), len(document.text) + len("\n\n"))
    return start, end - len("\n\n")


def _page_list(numbers: list[int]) -> str:
    """Page numbers as ranges: 1-3, 5, 7-9."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _range(asked: str, what: str) -> tuple[int, int]:
    numbers = [int(part) for part in asked.split("-")]
    first, last = numbers[0], numbers[-1]
    if first < 1 or last < first:
        raise SearchError(f"{what} {asked.strip()!r}: give a number from 1, or a range like 3-5")
    return first, last


def _line_offset(text: str, line: int) -> int:
    """Where a line (1-based) begins; past the last line, the end."""
    offset = 0
    for _ in range(line - 1):
        offset = text.find("\n", offset) + 1
        if offset == 0:
            return len(text)
    return offset


def _line_end(text: str, line: int) -> int:
    end = text.find("\n", _line_offset(text, line))
    return len(text) if end < 0 else end


def _shown(value: str) -> str:
    return repr(clipped(value, 200))
