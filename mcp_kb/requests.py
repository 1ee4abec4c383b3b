"""What a face may ask of the core, with each bound, default and help text written once: a search and a sync.

The MCP tools' parameters, the CLI's options and the admin page's forms are built from these models
(`described`, `option_help`) or parsed with them (`parse_search`); a rejected request is worded once, by
`request_errors`, the same way on every face. The core takes the request itself (`App.search(kb, request)`,
`App.sync(request)`), so what a face sends is what was validated. A search request left to the KB's
settings is completed here (`SearchRequest.resolved`). Filters written as text (`year>=2020`, the CLI and
the page) are read here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from dataclasses import asdict, dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .settings import (
    CONTEXT_MAX,
    IDENTIFIER,
    MAX_QUERY_LENGTH,
    MAX_TOKENS_MAX,
    MAX_TOKENS_MIN,
    MODES,
    TOP_K_MAX,
    TOP_K_MIN,
    SearchConfig,
    SearchMode,
)
from .errors import SearchError
from .text import is_text, name_text
from .vocabulary import LIST_URI

__all__ = [
    "FILTER_SYNTAX",
    "MAX_CHUNK_INDEX",
    "BrowseRequest",
    "ListingOrder",
    "READ_TOKENS_MAX",
    "BROWSE_LIMIT_MAX",
    "ReadRequest",
    "SearchRequest",
    "SyncRequest",
    "TagRequest",
    "RollbackRequest",
    "SelfCheckRequest",
    "EvaluateRequest",
    "described",
    "option_help",
    "parse_filters",
    "parse_search",
    "parse_request",
    "request_errors",
    "unknown_filter_field",
]  # what the core's API (mcp_kb.api) offers from this module

_T = TypeVar("_T")
AS_OF_HELP = (
    "An earlier version of the knowledge base to answer from: a version number, a tag, or a time "
    "(2026-11-30 or 2026-11-30T14:00Z: the version current then); omit for the current one"
)
MAX_AS_OF_LENGTH = 64


class SearchRequest(BaseModel):
    """One search; None takes the KB's setting (`[kb.search]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field("", description="What to look for, in the user's words (any language)")
    top_k: int | None = Field(None, ge=TOP_K_MIN, le=TOP_K_MAX, description="Number of passages to return")
    mode: SearchMode | None = Field(None, description=f"How to search: {', '.join(MODES)}")
    min_score: float | None = Field(None, allow_inf_nan=False, description="Drop passages scoring below this")
    # pydantic's field: its Any keeps the JSON schema the tools declare
    filters: dict[str, Any] | None = Field(None, description="Metadata filters, all must match")
    context: int = Field(0, ge=0, le=CONTEXT_MAX, description="Neighbouring chunks to add around each passage")
    max_per_document: int | None = Field(
        None, ge=TOP_K_MIN, le=TOP_K_MAX, description="At most this many passages from one document"
    )
    max_tokens: int | None = Field(
        None,
        ge=MAX_TOKENS_MIN,
        le=MAX_TOKENS_MAX,
        description="Token budget for all passages, context included; longer passages "
        "are cut around their best-matching sentences",
    )
    as_of: str | None = Field(None, max_length=MAX_AS_OF_LENGTH, description=AS_OF_HELP)
    version: str | None = Field(
        None,
        max_length=64,
        description="Which version of the documentation to search (its documents' paths begin with it)",
    )

    def resolved(self, settings: SearchConfig) -> ResolvedSearch:
        """The search with every setting decided: the KB's `settings` where the request left one out; errors
        say how to fix the call."""
        mode = self.mode or settings.mode
        query = self.query.strip()
        if not query and mode != "filter":
            raise SearchError("query is empty; give the words to search for (or use mode 'filter' with filters)")
        if len(query) > MAX_QUERY_LENGTH:
            raise SearchError(
                f"query is {len(query)} characters long; use at most {MAX_QUERY_LENGTH} "
                f"(the key words or a sentence, not a whole document)"
            )
        if not is_text(query):  # a lone surrogate (JSON's "\udc80", a shell's undecodable byte): no model reads it
            raise SearchError(
                f"query holds a character that is not text ({name_text(query)[:80]!r}); send the words as Unicode text"
            )
        return ResolvedSearch(
            query=query,
            mode=mode,
            filters=self.filters or None,
            context=self.context,
            top_k=_given(self.top_k, settings.top_k),
            min_score=float(_given(self.min_score, settings.min_score)),
            max_per_document=_given(self.max_per_document, settings.max_per_document),
            max_tokens=_given(self.max_tokens, settings.max_tokens),
            as_of=self.as_of or None,
            version=self.version or None,
        )


@dataclass(frozen=True)
class ResolvedSearch:
    """A search with every setting decided (the KB's where the caller left one out)."""

    query: str
    top_k: int
    mode: str
    filters: dict[str, object] | None
    min_score: float
    context: int  # neighbouring chunks to add on each side of a passage
    max_per_document: int
    max_tokens: int  # for all passages of the answer, context included
    as_of: str | None = None  # an earlier version to answer from (history.py)
    version: str | None = None  # a library version of a KB of several ([[kb.versions]]); None: its default

    def cache_key(self, tables: list[tuple[str, str, int]]) -> str:
        """The key of this search's answer over these (KB, generation, version) tables."""
        return json.dumps([tables, asdict(self)], sort_keys=True, ensure_ascii=False, default=str)


def _given(value: _T | None, default: _T) -> _T:
    """What the caller asked for, or the KB's setting where it asked for nothing (0 is an answer)."""
    return default if value is None else value


class SyncRequest(BaseModel):
    """One sync: a KB (None: every KB the caller may sync) and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str | None = Field(
        None, description=f"Knowledge base to sync, by name (as listed by the {LIST_URI} resource); omit for all"
    )
    full: bool = Field(
        False, description="Rebuild from scratch instead of syncing changes (vectors of unchanged chunks are reused)"
    )
    reembed: bool = Field(False, description="Rebuild and embed every chunk again, even with an unchanged model")
    allow_mass_delete: bool = Field(
        False,
        description="Let the sync delete all or most of a knowledge base. Only "
        "when the user confirms the files were really removed: an "
        "unmounted drive or share looks the same",
    )
    # One default for every face: a sync asked for happens (the CLI, the page, the triggers and the tool alike);
    # a caller that would rather hear at once that the index is busy says so.
    wait: bool = Field(
        True,
        description="If another sync is running, wait for it to end and then sync (otherwise "
        "answer at once that one is running)",
    )
    tag: str | None = Field(
        None,
        max_length=64,
        description="Tag the version this sync makes (a name to search as of and roll back to; kept until removed)",
    )
    # Who asked, as the version this sync makes records it: set by a face from its caller (never a tool argument).
    by: str = Field("", max_length=200, exclude=True)


class TagRequest(BaseModel):
    """A tag put on a version of a KB (a name to search as of and to roll back to), or taken off it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base whose version to tag, by name")
    name: str = Field(description="The tag")
    version: int | None = Field(None, description="The version to tag (default: the current one)")
    remove: bool = Field(False, description="Remove the tag instead (its version may then age out)")


class RollbackRequest(BaseModel):
    """An earlier version of a KB made current again, as a new version (the history stays)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base to roll back, by name")
    to: str = Field(
        description="The version to make current again: its number, a tag, or a time (the version current then)"
    )
    # Who asked, as the version the rollback makes records it: set by a face from its caller.
    by: str = Field("", max_length=200, exclude=True)


class SelfCheckRequest(BaseModel):
    """A label-free check of a KB: queries made from its own chunks, asked in each mode (evaluation.py says how)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base to check, by name")
    modes: tuple[SearchMode, ...] = Field(description="The search modes to ask in")
    sample: int = Field(100, description="Chunks to make queries from")
    k: int = Field(10, description="A query's document counts as found among its first k hits")
    seed: int = Field(0, description="The sample's seed: one seed, one sample")


class EvaluateRequest(BaseModel):
    """Labelled queries asked of a KB in each mode and scored (recall@k, MRR@10, nDCG@10, latency)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base to evaluate, by name")
    queries: dict[str, str] = Field(description="Each query's text, by its id")
    judgements: dict[str, dict[str, int]] = Field(description="Each query's relevant documents and grades, by its id")
    modes: tuple[SearchMode, ...] = Field(description="The search modes to ask in")
    k: int = Field(10, description="Cut-off for recall@k")


# A read's token budget: a default a model can take in one go, and a bound that keeps any one answer modest; below
# 200 the location and cursor lines would leave too little text.
READ_TOKENS_DEFAULT, READ_TOKENS_MIN, READ_TOKENS_MAX = 2_000, 200, 20_000
BROWSE_LIMIT_DEFAULT, BROWSE_LIMIT_MAX = 50, 200
MAX_CURSOR_LENGTH = 4_000  # ours are at most ~1,500 characters (a long path goes by its digest): longer is not ours
_RANGE = r"^\s*[0-9]{1,9}\s*(-\s*[0-9]{1,9}\s*)?$"  # 3, or 3-5, in ASCII digits (text.is_number's rule)
MAX_PATH_LENGTH = 4_096  # a document's path or URL (as long as a file system allows one), or a heading path
MAX_CHUNK_INDEX = 1_000_000  # a chunk number past this names no chunk


class ReadRequest(BaseModel):
    """Read a document of a KB from its index: whole, one section, pages, lines, or from a passage on; an answer
    within `max_tokens`, with a cursor to go on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base, by name")
    path: str = Field(
        "",
        max_length=MAX_PATH_LENGTH,
        description="The document, as a search result's source names it (not needed with a cursor)",
    )
    section: str | None = Field(
        None,
        max_length=MAX_PATH_LENGTH,
        description="One section, by the heading path a citation shows, e.g. "
        "'Annual leave › How to apply' (its subsections included)",
    )
    pages: str | None = Field(None, pattern=_RANGE, description="A page or page range of a PDF, e.g. '3' or '3-5'")
    lines: str | None = Field(
        None,
        pattern=_RANGE,
        description="A line range of the document's text, e.g. '120-180' (the answer says which lines it holds)",
    )
    chunk: int | None = Field(
        None,
        ge=0,
        le=MAX_CHUNK_INDEX,
        description="Read from a passage on: a search result's chunk_index (the passage before it comes first)",
    )
    max_tokens: int = Field(
        READ_TOKENS_DEFAULT,
        ge=READ_TOKENS_MIN,
        le=READ_TOKENS_MAX,
        description="Most tokens of text in this answer; the rest is one cursor away",
    )
    cursor: str | None = Field(
        None,
        max_length=MAX_CURSOR_LENGTH,
        description="Go on where the last answer stopped (its cursor); the other arguments but "
        "kb and max_tokens are then not needed",
    )
    as_of: str | None = Field(None, max_length=MAX_AS_OF_LENGTH, description=AS_OF_HELP)

    def form(self) -> str:
        """Which part of the document is asked for: whole, section, pages, lines or chunk (one at most)."""
        asked = [name for name in ("section", "pages", "lines", "chunk") if getattr(self, name) is not None]
        if len(asked) > 1:
            raise SearchError(f"ask for one part of a document at a time, not {' and '.join(asked)}")
        if not self.cursor and not self.path.strip():
            raise SearchError("path is required: the document, as a search result's source names it")
        return asked[0] if asked else "whole"


ListingOrder = Literal["path", "changed"]


class BrowseRequest(BaseModel):
    """List a KB's documents (or one document's outline) from its index, a page at a time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb: str = Field(description="Knowledge base, by name")
    path: str = Field(
        "",
        max_length=MAX_PATH_LENGTH,
        description="Documents whose path starts with this, or matches it as a glob (* and ? within "
        "a folder, ** across folders); with outline, the one document",
    )
    outline: bool = Field(
        False,
        description="true: instead of a list, the headings of the one document `path` "
        "names, with their lines, pages and size in tokens",
    )
    sort: ListingOrder = Field("path", description="Order of the list: by path, or last changed first")
    limit: int = Field(BROWSE_LIMIT_DEFAULT, ge=1, le=BROWSE_LIMIT_MAX, description="Most entries in this answer")
    cursor: str | None = Field(
        None,
        max_length=MAX_CURSOR_LENGTH,
        description="The next page: the last answer's cursor (with the same kb and path)",
    )
    as_of: str | None = Field(None, max_length=MAX_AS_OF_LENGTH, description=AS_OF_HELP)


def described(model: type[BaseModel], name: str, strict: bool = False) -> FieldInfo:
    """A field of a request with its bounds and description, as a face's parameter declares it
    (`Annotated[int, described(...)] = the KB's default`); `strict`: no text for numbers (JSON arguments)."""
    extra = [Field(strict=True)] if strict else []
    return FieldInfo.merge_field_infos(model.model_fields[name], *extra, default=PydanticUndefined)


def option_help(model: type[BaseModel], name: str, default: str = "") -> str:
    """A CLI option's help: the field's description, its bounds, and where its default comes from."""
    low, high = bounds(model, name)
    notes = [f"{low} to {high}"] if low is not None and high is not None else []
    notes += [f"default: {default}"] if default else []
    shown = f" ({'; '.join(notes)})" if notes else ""
    return f"{model.model_fields[name].description}{shown}."


def bounds(model: type[BaseModel], name: str) -> tuple[Any, Any]:
    """The inclusive (low, high) bounds of a numeric field, None where it has none."""
    low = high = None
    for rule in model.model_fields[name].metadata:  # annotated_types' Ge(ge=…) and Le(le=…)
        low, high = getattr(rule, "ge", low), getattr(rule, "le", high)
    return low, high


def parse_search(arguments: Mapping[str, object]) -> SearchRequest:
    """A search request from a face's arguments, or a SearchError worded like every face words it."""
    return parse_request(SearchRequest, arguments)


_Request = TypeVar("_Request", bound=BaseModel)


def parse_request(model: type[_Request], arguments: Mapping[str, object]) -> _Request:
    """A request from a face's arguments (None: left out), or a SearchError worded like every face words it."""
    try:
        return model.model_validate({name: value for name, value in arguments.items() if value is not None})
    except ValidationError as exc:
        raise SearchError(request_errors(exc, model)) from None


def request_errors(error: ValidationError, model: type[BaseModel], filter_error: Any = None) -> str:
    """A request's rejected fields, said as the fix: `top_k must be between 1 and 100, got 500`.
    `filter_error(field)`: what to say of a rejected filter field (a KB's filter schema knows)."""
    messages: dict[str, str] = {}
    for item in error.errors():
        location = [str(part) for part in item["loc"]]
        name = location[0] if location else "arguments"
        low, high = bounds(model, name) if name in model.model_fields else (None, None)
        if name == "filters" and len(location) > 1 and filter_error is not None:
            messages[f"filters.{location[1]}"] = filter_error(location[1])
        elif name == "mode":
            messages[name] = f"unknown mode {item.get('input')!r}; use one of {', '.join(MODES)}"
        elif item["type"] == "missing":
            messages[name] = f"{name} is required"
        elif item["type"] == "extra_forbidden":
            messages[name] = f"unknown argument {name!r}"
        elif low is not None and high is not None and item["type"] in _OUT_OF_RANGE:
            messages[name] = f"{name} must be between {low} and {high}, got {item.get('input')!r}"
        elif item["type"] == "finite_number":
            messages[name] = f"{name} must be a finite number, got {item.get('input')!r}"
        else:
            messages.setdefault(name, f"{name}: {item['msg'].removeprefix('Value error, ')} (got {_given_shown(item)})")
    return "; ".join(messages.values())


_OUT_OF_RANGE = {"greater_than_equal", "less_than_equal"}
_SHOWN_INPUT = 80  # characters of a rejected value an error repeats: a caller may send megabytes


def _given_shown(item: Any) -> str:
    given = repr(item.get("input"))
    return given if len(given) <= _SHOWN_INPUT else f"{given[: _SHOWN_INPUT - 3]}..."


def unknown_filter_field(field: str, valid: Iterable[str]) -> str:
    return f"unknown filter field {field!r}; valid fields: {', '.join(sorted(valid))}"


# ---- filters written as text -----------------------------------------------------------------

_FILTER_PATTERN = re.compile(rf"^({IDENTIFIER})\s*(>=|<=|\^=|~=|=|>|<)\s*(.*)$", re.S)
_FILTER_OPERATORS = {">=": "gte", "<=": "lte", ">": "gt", "<": "lt", "^=": "prefix", "~=": "glob"}
FILTER_SYNTAX = "field=value, field>=n, field<=n, path^=prefix, path~=glob"


def parse_filters(items: tuple[str, ...]) -> dict[str, object] | None:
    """Filters written as text (`mcp-kb search --filter`, the admin page's playground) into the filter
    object search takes."""
    filters: dict[str, object] = {}
    for item in items:
        match = _FILTER_PATTERN.match(item)
        if not match:
            raise SearchError(f"filter {item!r}: expected FIELD=VALUE (or >=, <=, >, <, ^= prefix, ~= glob)")
        field, operator, raw = match.groups()
        value = raw if operator in ("^=", "~=") else _typed(raw)
        if operator == "=":
            filters[field] = value
        else:
            known = filters.get(field)
            existing = known if isinstance(known, dict) else {}
            filters[field] = {**existing, _FILTER_OPERATORS[operator]: value}
    return filters or None


def _typed(raw: str) -> Any:
    """Numbers and true/false as such; a,b,c as one-of; anything else as text."""
    if "," in raw:
        return [_typed(part.strip()) for part in raw.split(",")]
    try:
        value = json.loads(raw)
        return value if isinstance(value, (int, float, bool)) else raw
    except ValueError:
        return raw
