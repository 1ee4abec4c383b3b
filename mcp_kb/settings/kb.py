"""`[[kb]]`: one knowledge base: its sources, chunking, search defaults, sync triggers and metadata."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, SerializeAsAny, field_validator, model_validator

from ..registry import Registry
from ..schema import BUILTIN_FILTER_FIELDS, RESERVED_FIELDS, FieldTypeName, field_type_of_value
from .variables import checked_headers, header_value
from .values import (DEFAULT_MODE, IDENTIFIER, KB_NAME_PATTERN, MAX_TOKENS_MAX, MAX_TOKENS_MIN, TOOL_NAME_PATTERN, TOP_K_MAX,
                     TOP_K_MIN, PathValue, SearchMode, Strict, megabytes)


class SourceSettings(Strict):
    """A `[[kb.sources]]` table: a source of a registered kind (folders and web sites are `paths` and `urls`)."""

    kind: str


SOURCE_KINDS = Registry("source kind", "kind")  # built-in kinds: ingest/sources.py
# A [[kb.sources]] table, validated as the settings of the kind it names.
_RegisteredSource = Annotated[SerializeAsAny[SourceSettings],
                              BeforeValidator(lambda value: SOURCE_KINDS.validate(value, ""))]


class ChunkingConfig(Strict):
    """How documents are cut into chunks; sizes are in the embedding model's tokens."""

    strategy: Literal["auto", "markdown", "recursive", "fixed"] = "auto"
    max_tokens: int = Field(256, ge=16, le=8192)
    overlap: int = Field(32, ge=0)
    min_tokens: int = Field(12, ge=0)  # merges "FAQ › One\nYes." but keeps "Errors\nE002: auth failed"

    @model_validator(mode="after")
    def _overlap_smaller_than_chunk(self) -> ChunkingConfig:
        if self.overlap >= self.max_tokens // 2:
            raise ValueError(f"overlap ({self.overlap}) must be less than half of max_tokens ({self.max_tokens})")
        if self.min_tokens >= self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be less than max_tokens ({self.max_tokens})")
        return self


class SearchConfig(Strict):
    """Defaults for one KB's searches."""

    mode: SearchMode = DEFAULT_MODE
    top_k: int = Field(5, ge=TOP_K_MIN, le=TOP_K_MAX)
    min_score: float = Field(0.0, ge=0.0)
    candidates: int = Field(50, ge=1, le=1000)  # per side, before fusion
    max_per_document: int = Field(2, ge=TOP_K_MIN, le=TOP_K_MAX)  # passages from one document per answer
    max_tokens: int = Field(4000, ge=MAX_TOKENS_MIN, le=MAX_TOKENS_MAX)  # all passages of one answer
    # keyword side: a match in the title or heading path adds this many times its BM25 there (0: counted
    # like any word of the text); query time only, no re-index
    title_weight: float = Field(0.0, ge=0.0, le=20.0)
    query_log: bool = False  # one JSON line per search, next to the index: it holds what users asked
    query_log_max_mb: float = Field(10, gt=0)  # then the log is rotated
    filter: dict[str, Any] = Field(default_factory=dict)  # applied to every search, AND-ed with the caller's


class SyncConfig(Strict):
    """When a served KB syncs by itself."""

    on_start: bool = False
    interval: float = Field(0, ge=0)  # seconds; 0 = never
    watch: bool = False
    debounce: float = Field(1.0, ge=0.05, le=60)
    # A sync deleting more than this share of the KB (and 20+ documents) is refused without --allow-mass-delete.
    max_delete_share: float = Field(0.5, ge=0, le=1)
    # After a rebuild, measure the label-free hit rate on this many chunks (0: off); status shows it.
    self_check_sample: int = Field(0, ge=0, le=10_000)

    @property
    def has_triggers(self) -> bool:
        """Whether a served KB syncs by itself (at start, on a schedule or on file changes)."""
        return self.on_start or self.watch or bool(self.interval)


class WebSourceConfig(Strict):
    """A documentation site (or part of one) crawled into a KB; `urls = ["https://…"]` is short for
    `urls = [{url = "https://…"}]`."""

    url: str
    # URL globs (fnmatch on the whole normalized URL, `*` crosses "/"); the scope is always within
    # the start URL's folder on its host.
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    max_pages: int = Field(1000, ge=1, le=1_000_000)
    max_depth: int = Field(10, ge=0, le=100)  # links followed from the start URL (sitemap entries are depth 0)
    sitemap: Literal["auto", "off"] = "auto"  # auto: robots.txt's Sitemap lines, else /sitemap.xml
    keep_query: list[str] = Field(default_factory=list)  # query parameters that name a page; others are dropped
    concurrency: int = Field(2, ge=1, le=16)
    delay: float = Field(0.1, ge=0, le=60)  # seconds each worker waits before a request (robots' Crawl-delay wins)
    user_agent: str = "mcp-kb (knowledge-base indexer)"
    # Extra request headers; "${NAME}" in a value is read from the environment at crawl time, so a
    # wiki token is never written to kb.toml or the index.
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(20, gt=0, le=600)  # seconds for one page, body included
    max_page_mb: float = Field(10, gt=0)  # larger pages (after decompression) are skipped and reported

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str) -> str:
        if not re.match(r"^https?://[^/?#\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("headers")
    @classmethod
    def _headers_are_valid(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_headers(value, "urls.headers")

    def request_headers(self) -> dict[str, str]:
        """`headers` with each ${NAME} read from the environment now (tokens stay out of kb.toml)."""
        return {key: header_value(text, f"urls.headers.{key} of {self.url}") for key, text in self.headers.items()}


class FilterableField(Strict):
    """A metadata field callers may filter on."""

    type: FieldTypeName = "string"
    description: str = ""


class KBConfig(Strict):
    """One knowledge base."""

    name: str
    description: str
    paths: list[PathValue] = Field(default_factory=list)
    urls: list[WebSourceConfig] = Field(default_factory=list)
    sources: list[_RegisteredSource] = Field(default_factory=list)  # of registered kinds
    include: list[str] = Field(default_factory=list)  # empty: every supported file
    exclude: list[str] = Field(default_factory=list)
    respect_gitignore: bool = True
    max_file_size_mb: float = Field(50, gt=0)
    ocr: Literal["auto", "off"] = "auto"  # read images and scanned PDF pages (auto: when the ocr extra is installed)
    tool_name: str | None = None
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # Folders mcp-kb itself writes (the index, caches, logs): set by the loader, never documents.
    _written_folders: tuple[Path, ...] = PrivateAttr(default=())
    filterable: dict[str, FilterableField] = Field(default_factory=dict)
    chunking: ChunkingConfig = ChunkingConfig()
    search: SearchConfig = SearchConfig()
    sync: SyncConfig = SyncConfig()

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        if not KB_NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} must be 1-64 letters, digits, '_' or '-'")
        return value

    @field_validator("tool_name")
    @classmethod
    def _tool_name_is_valid(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} breaks MCP's tool-name rule: 1-128 of A-Z a-z 0-9 _ - .")
        return value

    @field_validator("urls", mode="before")
    @classmethod
    def _url_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"url": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _has_sources(self) -> KBConfig:
        if not self.paths and not self.urls and not self.sources:
            raise ValueError('a knowledge base needs `paths` (folders or files), `urls` (web sites), or both')
        return self

    @model_validator(mode="after")
    def _fields_do_not_shadow_columns(self) -> KBConfig:
        for field in [*self.metadata, *self.filterable]:
            if field in RESERVED_FIELDS:
                raise ValueError(f"metadata field {field!r} is reserved; rename it")
            if not re.fullmatch(IDENTIFIER, field):
                raise ValueError(f"metadata field {field!r} must be a letters/digits/_ identifier")
        return self

    @property
    def written_folders(self) -> tuple[Path, ...]:
        """Where mcp-kb writes (index, caches, logs): a scan or watch of the KB's paths never enters them."""
        return self._written_folders

    @property
    def search_tool_name(self) -> str:
        return self.tool_name or f"search_{self.name}"

    @property
    def ocr_on(self) -> bool:
        """Whether images and scanned pages are read (when the ocr extra is installed)."""
        return self.ocr != "off"

    @property
    def max_file_bytes(self) -> int:
        return megabytes(self.max_file_size_mb)

    def filter_field_types(self) -> dict[str, str]:
        """Every field a search may filter on, with its type: built-ins, static metadata, declared."""
        return {**BUILTIN_FILTER_FIELDS, **self.metadata_types()}

    def metadata_types(self) -> dict[str, str]:
        """The KB's own columns (static metadata and declared fields), with their types."""
        types = {key: field_type_of_value(value) for key, value in self.metadata.items()}
        types.update({key: spec.type for key, spec in self.filterable.items()})
        return types
