"""kb.toml: load, validate and give defaults for every setting.

Every validation problem becomes one ConfigError naming the file, the key and the fix.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import logging
import os
import re
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, get_args

import platformdirs
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, PrivateAttr,
                      SerializeAsAny, ValidationError, field_validator, model_validator)

from .errors import ConfigError
from .schema import BUILTIN_FILTER_FIELDS, RESERVED_FIELDS, FieldTypeName, field_type_of_value
from .registry import Registry
from .vocabulary import LOOPBACK, SYNC_TOOL

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

# MCP's rule for tool names (spec 2025-11-25); the SDK only warns on a bad one.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
KB_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

DEFAULT_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
# Every environment variable mcp-kb reads is read in this module (the README's table lists them).
ENV_CONFIG = "MCP_KB_CONFIG"  # the kb.toml (or folder) commands use when -c is not given
ENV_MODEL = "MCP_KB_EMBEDDING_MODEL"
ENV_MODEL_PATH = "MCP_KB_EMBEDDING_MODEL_PATH"
ENV_STORAGE = "MCP_KB_STORAGE"
ENV_TOKEN = "MCP_KB_TOKEN"
REMOTE_READ_CONSISTENCY = 5.0  # seconds between a reader's checks for a new version on object storage
# Keys whose values may be secrets (tokens, credentials, request headers): never echoed in an error.
_SECRET_BEARING = re.compile(r"token|secret|password|credential|key|options|headers", re.I)
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # "${NAME}" in header and storage option values
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110's token
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what no header value may hold (tab is allowed)

# Limits of a search request, shared by config validation, the tool schema and search.
Transport = Literal["stdio", "sse", "http"]
TRANSPORTS: tuple[str, ...] = get_args(Transport)
SearchMode = Literal["hybrid", "vector", "keyword", "filter"]
MODES: tuple[str, ...] = get_args(SearchMode)
DEFAULT_MODE: SearchMode = "hybrid"
RANKED_MODES = ("keyword", "vector", "hybrid")  # the modes that rank by relevance: what evaluations measure
_MODE_NOTES = {"keyword": "exact terms, codes, names", "filter": "list by metadata only"}
MODES_TEXT = ", ".join(f"{mode}{' (default)' if mode == DEFAULT_MODE else ''}"
                       f"{f' ({_MODE_NOTES[mode]})' if mode in _MODE_NOTES else ''}" for mode in MODES)
TOP_K_MIN, TOP_K_MAX = 1, 100
CONTEXT_MAX = 5  # neighbouring chunks on each side of a hit
MAX_TOKENS_MIN, MAX_TOKENS_MAX = 100, 100_000  # an answer's token budget
HEALTHY_HIT_RATE = 0.8  # a label-free hit rate below this means chunking or embedding is wrong
MAX_QUERY_LENGTH = 4_000  # characters; longer texts make slow searches and are never a real question


def megabytes(size_mb: float) -> int:
    """A size setting in MB (`max_file_size_mb`, `max_page_mb`, `query_log_max_mb`) in bytes."""
    return int(size_mb * 1024 * 1024)


def _env(variable: str) -> dict[str, JsonValue]:
    """Marks the setting an environment variable overrides: each names its variable in its declaration."""
    return {"env": variable}


def environment(variable: str) -> str | None:
    """An environment variable's value (None when unset or empty): the one reader of the environment."""
    return os.environ.get(variable) or None


def data_root() -> Path:
    """This user's data folder for mcp-kb, e.g. ~/.local/share/mcp-kb on Linux: the default indexes."""
    return Path(platformdirs.user_data_dir("mcp-kb", appauthor=False))


def default_storage() -> str:
    """The index of a config that names none."""
    return str(data_root() / "index")


def cache_root() -> Path:
    """This machine's per-user cache for mcp-kb: records about remote and read-only indexes, crawled pages."""
    return Path(platformdirs.user_cache_dir("mcp-kb", appauthor=False))


def is_remote_uri(storage: str) -> bool:
    """Whether an index location is a LanceDB URI (object storage, shared by machines) rather than a folder."""
    return "://" in storage


def expand_environment(text: str, where: str) -> str:
    """Replace each ${NAME} in a setting's value with that environment variable, read now."""
    def value(match: re.Match[str]) -> str:
        if match[1] not in os.environ:
            raise ConfigError(f"{where} names the environment variable {match[1]}, which is not set")
        return os.environ[match[1]]

    return _ENV_REFERENCE.sub(value, text)


def header_value(text: str, where: str) -> str:
    """A request header's value with each ${NAME} read now; a control character in it (a token read
    with a trailing carriage return) is refused naming where it came from, never the value itself."""
    value = expand_environment(text, where).strip(" \t")  # a value's edge whitespace is not part of it (RFC 9110)
    if _HEADER_CONTROL.search(value):
        names = [name for name in _ENV_REFERENCE.findall(text) if _HEADER_CONTROL.search(os.environ.get(name, ""))]
        source = f"the environment variable {', '.join(names)}" if names else "its value"
        raise ConfigError(f"{where}: {source} holds a control character (a stray line break or carriage return?), "
                          f"which no HTTP header may carry; remove it")
    return value


def _checked_headers(headers: dict[str, str], where: str) -> dict[str, str]:
    """Header names must be HTTP tokens; values are checked as far as they can be now (a variable
    that is not set yet is checked when it is read)."""
    for name, text in headers.items():
        if not _HEADER_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid HTTP header name")
        if all(variable in os.environ for variable in _ENV_REFERENCE.findall(text)):
            try:
                header_value(text, f"{where}.{name}")
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
    return headers


def _without_nul(value: Any) -> Any:
    if "\x00" in str(value):
        raise ValueError("a path may not contain a NUL character")
    return value


# A file-system path as written in kb.toml (no file system accepts NUL in a name).
PathText = Annotated[str, AfterValidator(_without_nul)]
PathValue = Annotated[Path, AfterValidator(_without_nul), Field(strict=False)]  # written as text in TOML


class _Strict(BaseModel):
    # strict: `top_k = "5"` or `watch = "yes"` is a mistake to report, not a value to guess at.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StorageConfig(_Strict):
    """Where the index lives and how LanceDB reaches it; `storage = "…"` is short for `[storage] uri = "…"`."""

    # a folder, or s3:// gs:// az:// (any LanceDB URI)
    uri: PathText = Field(default_factory=default_storage, json_schema_extra=_env(ENV_STORAGE))
    # Passed to LanceDB (endpoint, region, allow_http, credentials, ...); "${NAME}" in a value is read
    # from the environment. Credentials usually come from the store's own variables (AWS_ACCESS_KEY_ID, ...).
    options: dict[str, str] = Field(default_factory=dict)
    read_consistency: float | None = Field(None, ge=0, le=3600)  # seconds; unset: 0 for a folder, 5 for a URI
    lease_seconds: float = Field(60, ge=1, le=3600)  # a writer's lease on shared storage outlives a crash this long
    # Searches on s3:// storage keep the data and index pages they fetch in a disk cache of this many MB
    # (0: off); what says which version is current is always asked of the store (index/readcache.py).
    read_cache_mb: int = Field(1024, ge=0, le=1_048_576)
    # LanceDB's in-memory caches of index pieces and table metadata, in MB (its own default: 7 GB). A server
    # on a million chunks held 1.19 GB after 200 hybrid searches with 2048 or 7168, 1.18 GB with 512 but
    # searched 2x slower (benchmarks/shared_index.py rss): the cache is not what holds the memory there.
    memory_cache_mb: int = Field(2048, ge=1, le=1_048_576)
    read_cache_dir: PathText | None = None  # default: "read-cache" in this user's cache folder

    @property
    def is_remote(self) -> bool:
        return is_remote_uri(self.uri)

    @property
    def consistency_seconds(self) -> float:
        """How soon a reader sees a new version: every read checks on a folder; a remote store is
        asked at most every few seconds (each check is a request)."""
        if self.read_consistency is not None:
            return self.read_consistency
        return REMOTE_READ_CONSISTENCY if self.is_remote else 0.0

    def read_cache(self) -> tuple[Path, int] | None:
        """(folder, bytes) of the readers' disk cache, or None when off."""
        if not self.is_remote or self.read_cache_mb == 0:
            return None
        folder = Path(self.read_cache_dir) if self.read_cache_dir else cache_root() / "read-cache"
        return folder, self.read_cache_mb * 2**20

    def lancedb_options(self) -> dict[str, str]:
        return {key: expand_environment(value, f"storage.options.{key}") for key, value in self.options.items()}


class EmbeddingConfig(_Strict):
    """What every embedding provider's settings have; each provider adds its own (a registered subclass).

    provider "fastembed" runs an ONNX model in this process (the default); "openai" calls any
    service speaking the OpenAI embeddings API (OpenAI, Azure, Ollama, vLLM, TEI, LM Studio, LiteLLM).
    """

    provider: str = "fastembed"
    model: str = Field(DEFAULT_MODEL, json_schema_extra=_env(ENV_MODEL))
    batch_size: int = Field(32, ge=1, le=2048)

    def __hash__(self) -> int:  # a frozen model with a dict field: hash what identifies the settings
        return hash(self.model_dump_json())


class FastembedSettings(EmbeddingConfig):
    """provider = "fastembed": an ONNX model run in this process."""

    provider: Literal["fastembed"] = "fastembed"
    # Texts per model call. The call's working memory grows with it (a 200-file SciFact sync peaked at 945 MB
    # with 32, 649 MB with 16, 551 MB with 8) while its speed barely moves (texts of similar length share a
    # call, so little is padding): 8 keeps a sync beside an IDE and a browser.
    batch_size: int = Field(8, ge=1, le=2048)
    model_path: PathText | None = Field(None, json_schema_extra=_env(ENV_MODEL_PATH))  # local folder with
    # model.onnx + tokenizer files (air-gapped use)
    threads: int | None = Field(None, ge=1)  # None: onnxruntime decides
    cache_dir: PathText | None = None
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # "int8": embed with an int8 copy made (once, checked against fp32) from the model; a different model
    # for rebuild decisions. Off by default: switching re-embeds every existing index.
    quantize: Literal["none", "int8"] = "none"


class _ServiceAccess(_Strict):
    """How a model service is reached: its address, the key (from a variable) and headers it wants."""

    _section: ClassVar[str]  # the kb.toml table, for messages
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key; the key is never stored
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers_are_valid(cls, value: dict[str, str]) -> dict[str, str]:
        return _checked_headers(value, f"{cls._section}.headers")

    def request_headers(self) -> dict[str, str]:
        """`headers`, and the API key from the variable `api_key_env` names, read now."""
        headers = {key: header_value(text, f"{self._section}.headers.{key}") for key, text in self.headers.items()}
        if self.api_key_env:
            if not environment(self.api_key_env):
                raise ConfigError(f"[{self._section}] api_key_env names ${self.api_key_env}, which is not set; "
                                  f"export the service's API key in it")
            # a key pasted with a trailing newline must not reach the HTTP library (its errors quote headers)
            headers["Authorization"] = header_value(f"Bearer ${{{self.api_key_env}}}", f"[{self._section}] api_key_env")
        return headers


class OpenAISettings(EmbeddingConfig, _ServiceAccess):
    """provider = "openai": a service speaking the OpenAI embeddings API."""

    _section: ClassVar[str] = "embedding"
    provider: Literal["openai"] = "openai"
    base_url: str | None = None  # e.g. https://api.openai.com/v1 or http://localhost:11434/v1
    dimensions: int | None = Field(None, ge=1)  # ask for shortened vectors (models that support it)
    max_concurrency: int = Field(2, ge=1, le=64)
    timeout: float = Field(30.0, gt=0, le=600)  # seconds per request
    max_retries: int = Field(5, ge=0, le=20)
    tokenizer_path: PathText | None = None  # folder with the model's tokenizer.json + tokenizer_config.json
    max_input_tokens: int = Field(512, ge=16, le=1_000_000)  # what the service's model reads

    @model_validator(mode="after")
    def _names_the_service(self) -> OpenAISettings:
        if not self.base_url:
            raise ValueError('provider "openai" needs base_url, e.g. "https://api.openai.com/v1" or '
                             '"http://localhost:11434/v1" (Ollama)')
        if "model" not in self.model_fields_set:
            raise ValueError('provider "openai" needs model: the name the service knows the model by, '
                             'e.g. "text-embedding-3-small" or "nomic-embed-text"')
        return self


class RerankConfig(_Strict):
    """Optional reranking of the top candidates; each provider adds its own settings (a registered subclass)."""

    provider: str = "fastembed"
    enabled: bool = False
    candidates: int = Field(30, ge=1, le=500)


class FastembedRerankSettings(RerankConfig):
    """provider = "fastembed": a cross-encoder run in this process."""

    provider: Literal["fastembed"] = "fastembed"
    model: str = "Xenova/ms-marco-MiniLM-L-6-v2"
    model_path: PathText | None = None


class ServiceRerankSettings(RerankConfig, _ServiceAccess):
    """provider = "service": a reranking service — Hugging Face TEI's `POST /rerank` (api = "tei"), or the
    Jina / Cohere `POST /rerank` that Infinity, vLLM and the hosted APIs answer (api = "cohere")."""

    _section: ClassVar[str] = "rerank"
    provider: Literal["service"] = "service"
    base_url: str | None = None  # e.g. http://localhost:8080 (TEI) or https://api.jina.ai/v1; /rerank is added
    api: Literal["cohere", "tei"] = "cohere"
    model: str | None = None  # sent as `model` (cohere); TEI serves one model
    batch_size: int = Field(32, ge=1, le=1000)  # passages per request
    timeout: float = Field(5.0, gt=0, le=120)  # seconds per request: a search waits at most this, then keeps its order
    max_retries: int = Field(1, ge=0, le=5)  # for 429 / 5xx / dropped connections

    @model_validator(mode="after")
    def _names_the_service(self) -> ServiceRerankSettings:
        if not self.base_url:
            raise ValueError('provider "service" needs base_url, e.g. "http://localhost:8080" (TEI) or '
                             '"https://api.jina.ai/v1"')
        if self.api == "cohere" and not self.model:
            raise ValueError('api "cohere" needs model: the reranker the service knows, e.g. '
                             '"jina-reranker-v2-base-multilingual"')
        return self


class SourceSettings(_Strict):
    """A `[[kb.sources]]` table: a source of a registered kind (folders and web sites are `paths` and `urls`)."""

    kind: str


# Parts picked by name in kb.toml: the settings each takes, and its implementation (registry.py).
EMBEDDING_PROVIDERS = Registry("embedding provider", "provider")
EMBEDDING_PROVIDERS.register("fastembed", FastembedSettings, "mcp_kb.models.fastembed:FastembedProvider")
EMBEDDING_PROVIDERS.register("openai", OpenAISettings, "mcp_kb.models.openai:OpenAIProvider")
RERANK_PROVIDERS = Registry("rerank provider", "provider")
RERANK_PROVIDERS.register("fastembed", FastembedRerankSettings, "mcp_kb.models.fastembed:FastembedRerankProvider")
RERANK_PROVIDERS.register("service", ServiceRerankSettings, "mcp_kb.models.rerank_service:ServiceRerankProvider")
SOURCE_KINDS = Registry("source kind", "kind")  # built-in kinds: ingest/sources.py
# A [[kb.sources]] table, validated as the settings of the kind it names.
_RegisteredSource = Annotated[SerializeAsAny[SourceSettings],
                              BeforeValidator(lambda value: SOURCE_KINDS.validate(value, ""))]
_PICKED_BY_NAME = {EmbeddingConfig: (EMBEDDING_PROVIDERS, "fastembed"), RerankConfig: (RERANK_PROVIDERS, "fastembed"),
                   SourceSettings: (SOURCE_KINDS, "")}


def granted(patterns: list[str], names: list[str]) -> list[str]:
    """The KB names a grant's patterns (names or globs such as "hr-*") cover: the one matching rule."""
    return [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class TokenGrant(_Strict):
    """One `[[server.tokens]]` entry: a bearer token for the HTTP transports and the KBs it may use."""

    name: str = Field(pattern=KB_NAME_PATTERN.pattern)  # who the audit trail names
    secret_env: str | None = None  # the environment variable holding the token
    secret_sha256: str | None = None  # or the token's SHA-256 in hex, so kb.toml holds no secret
    kbs: list[str] = Field(min_length=1)  # names or globs
    sync: bool = False  # may call the sync tool (on these KBs)
    requests_per_minute: int = Field(0, ge=0)  # 0: no limit

    @model_validator(mode="after")
    def _one_secret(self) -> TokenGrant:
        if (self.secret_env is None) == (self.secret_sha256 is None):
            raise ValueError("give the token's secret one way: secret_env (an environment variable holding it) "
                             "or secret_sha256 (its SHA-256 in hex, e.g. from `printf %s TOKEN | sha256sum`)")
        if self.secret_sha256 is not None and not _SHA256_HEX.match(self.secret_sha256):
            raise ValueError("secret_sha256 must be 64 lowercase hex digits (`printf %s TOKEN | sha256sum`)")
        return self

    def secret_digest(self) -> str:
        """The token's SHA-256 (hex); the variable is read now, and only its name appears in errors."""
        if self.secret_sha256 is not None:
            return self.secret_sha256
        secret = environment(self.secret_env or "")
        if secret is None:
            raise ConfigError(f"[[server.tokens]] {self.name}: the environment variable {self.secret_env} "
                              f"(secret_env) is not set")
        return hashlib.sha256(secret.encode()).hexdigest()


class GroupGrant(_Strict):
    """One `[[server.oauth.groups]]` entry: members of an identity provider's group and the KBs they may use."""

    group: str
    kbs: list[str] = Field(min_length=1)
    sync: bool = False


class OAuthConfig(_Strict):
    """`[server.oauth]`: accept JWT access tokens an OAuth 2.1 authorization server issues for this server."""

    issuer: str = Field(pattern=r"^https?://")  # the authorization server (the tokens' `iss`)
    audience: str = Field(pattern=r"^https?://")  # this server's MCP URL as clients reach it (the tokens' `aud`)
    jwks_url: str | None = Field(None, pattern=r"^https?://")  # default: from the issuer's metadata
    groups_claim: str = "groups"  # a claim listing the user's groups, mapped by [[server.oauth.groups]]
    groups: list[GroupGrant] = Field(default_factory=list)
    leeway: float = Field(30, ge=0, le=300)  # seconds of clock skew allowed on exp / nbf
    keys_max_age: float = Field(3600, ge=10, le=86_400)  # seconds the issuer's keys are used without a refetch
    requests_per_minute: int = Field(0, ge=0)  # per user; 0: no limit


class ServerConfig(_Strict):
    """Defaults for `mcp-kb serve`."""

    transport: Transport = "stdio"
    host: str = LOOPBACK
    port: int = Field(8765, ge=1, le=65535)
    read_only: bool = False  # hides the sync tool
    token: str | None = Field(None, json_schema_extra=_env(ENV_TOKEN))  # bearer token for HTTP transports
    allowed_hosts: list[str] = Field(default_factory=list)  # Host names clients may use, besides loopback
    # HTTP: connections open at once (fewer when the file-descriptor limit is low), and the seconds a
    # connection has to send each request's head (a slow or silent one is closed)
    max_connections: int = Field(1000, ge=8, le=100_000)
    header_timeout: float = Field(10.0, gt=0, le=300)
    tokens: list[TokenGrant] = Field(default_factory=list)  # scoped tokens: who may use which KBs
    oauth: OAuthConfig | None = None
    # HTTP: one JSON line per request that touched a KB (who, KB, what, result, latency); queries only if asked
    audit_log: PathText | None = None
    audit_max_mb: float = Field(10, gt=0)  # then the log is rotated
    audit_queries: bool = False  # queries can hold personal data
    stateless: bool = False  # streamable HTTP without sessions, for replicas behind a load balancer

    @model_validator(mode="after")
    def _distinct_tokens(self) -> ServerConfig:
        names = [token.name for token in self.tokens]
        if len(set(names)) < len(names):
            raise ValueError("two [[server.tokens]] share a name: each needs its own (the audit trail names it)")
        hashes = [token.secret_sha256 for token in self.tokens if token.secret_sha256]
        variables = [token.secret_env for token in self.tokens if token.secret_env]
        if len(set(hashes)) < len(hashes) or len(set(variables)) < len(variables):
            raise ValueError("two [[server.tokens]] share a secret: a secret must name one caller")
        return self

    @property
    def guarded(self) -> bool:
        """Whether HTTP requests need a token (one for everything, scoped ones, or OAuth)."""
        return bool(self.token or self.tokens or self.oauth)


class ChunkingConfig(_Strict):
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


class SearchConfig(_Strict):
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


class SyncConfig(_Strict):
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


class WebSourceConfig(_Strict):
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
        return _checked_headers(value, "urls.headers")

    def request_headers(self) -> dict[str, str]:
        """`headers` with each ${NAME} read from the environment now (tokens stay out of kb.toml)."""
        return {key: header_value(text, f"urls.headers.{key} of {self.url}") for key, text in self.headers.items()}


class FilterableField(_Strict):
    """A metadata field callers may filter on."""

    type: FieldTypeName = "string"
    description: str = ""


class KBConfig(_Strict):
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
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", field):
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


class Config(_Strict):
    """The whole kb.toml."""

    storage: StorageConfig = Field(default_factory=StorageConfig)
    embedding: SerializeAsAny[EmbeddingConfig] = FastembedSettings()
    rerank: SerializeAsAny[RerankConfig] = FastembedRerankSettings()
    server: ServerConfig = ServerConfig()
    kb: list[KBConfig] = Field(default_factory=list)
    source: Path | None = None  # the file this came from, for messages

    @field_validator("embedding", mode="before")
    @classmethod
    def _embedding_provider(cls, value: Any) -> Any:
        return EMBEDDING_PROVIDERS.validate(value, "fastembed")

    @field_validator("rerank", mode="before")
    @classmethod
    def _rerank_provider(cls, value: Any) -> Any:
        return RERANK_PROVIDERS.validate(value, "fastembed")

    @field_validator("storage", mode="before")
    @classmethod
    def _storage_shorthand(cls, value: Any) -> Any:
        return {"uri": value} if isinstance(value, str) else value

    @field_validator("kb", mode="before")
    @classmethod
    def _kb_tables(cls, value: Any) -> Any:
        if isinstance(value, dict):  # `[kb]` where `[[kb]]` was meant
            raise ValueError("written as one table [kb]; each knowledge base is an array table: write [[kb]] "
                             "(two brackets)")
        return value

    @model_validator(mode="after")
    def _names_are_unique(self) -> Config:
        for what, names in (("KB name", [k.name for k in self.kb]),
                            ("tool name", [k.search_tool_name for k in self.kb] + [SYNC_TOOL])):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"duplicate {what} {name!r}: every knowledge base needs its own")
                seen.add(name)
        return self

    @model_validator(mode="after")
    def _grants_name_configured_kbs(self) -> Config:
        """A grant pattern that matches no KB is a typo (or a removed KB) the operator should hear about."""
        names = [kb.name for kb in self.kb]
        entries = [(f"[[server.tokens]] {t.name}", t.kbs) for t in self.server.tokens]
        if self.server.oauth:
            entries += [(f"[[server.oauth.groups]] {g.group}", g.kbs) for g in self.server.oauth.groups]
        for where, patterns in entries:
            for pattern in patterns:
                if names and not granted([pattern], names):
                    raise ValueError(f"{where}: kbs entry {pattern!r} matches no knowledge base "
                                     f"(configured: {', '.join(names)})")
        return self

    def serving(self, transport: str | None = None, host: str | None = None, port: int | None = None,
                read_only: bool | None = None, stateless: bool | None = None) -> Config:
        """This config with `serve`'s options in place of the [server] settings they override."""
        chosen = transport or self.server.transport
        if chosen == "stdio" and (host or port is not None):
            option = "--port" if port is not None else "--host"
            raise ConfigError(f"{option} is for the HTTP transports, and this server speaks stdio: add --transport "
                              f"http (or sse), or set [server] transport")
        given = {"transport": chosen, "host": host, "port": port, "read_only": read_only, "stateless": stateless}
        server = self.server.model_copy(update={key: value for key, value in given.items() if value is not None})
        if server.stateless and chosen != "http":
            raise ConfigError(f"stateless serving is a mode of the streamable HTTP transport, and this server "
                              f"speaks {chosen}: add --transport http")
        return self.model_copy(update={"server": server})

    def get_kb(self, name: str) -> KBConfig:
        for kb in self.kb:
            if kb.name == name:
                return kb
        raise unknown_kb(name, [k.name for k in self.kb])

    def select(self, name: str | None) -> list[KBConfig]:
        """One KB by name, or all when name is None."""
        return list(self.kb) if name is None else [self.get_kb(name)]


def unknown_kb(name: str, known: list[str]) -> ConfigError:
    """The error for a KB name that is not configured (or, for a scoped caller, not granted: the same words)."""
    return ConfigError(f"unknown knowledge base {name!r}; configured: {', '.join(known) or '(none)'}")


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a kb.toml; relative paths are relative to the file's folder."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found (`mcp-kb init` writes a starter)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    config = build_config(raw, base_dir=path.parent.resolve(), source=path)
    if not config.kb:
        raise ConfigError(f"{path}: no knowledge base: add a [[kb]] table with name, description and paths "
                          f"(`mcp-kb init` writes a commented starter)")
    return config


def config_for_folder(folder: str | os.PathLike[str]) -> Config:
    """Zero-config: one KB for a single folder, synced at start and on every change.

    Each folder gets its own index (unless MCP_KB_STORAGE names one), so two folders named
    `docs` never meet.
    """
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    name = kb_name_for(folder)
    key = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    raw = {"storage": str(data_root() / "folders" / f"{name}-{key}"),
           "kb": [{"name": name, "description": f"Documents from the folder '{folder.name}'", "paths": [str(folder)],
                   "sync": {"on_start": True, "watch": True}}]}
    return build_config(raw, base_dir=folder, source=None)


def kb_name_for(folder: Path) -> str:
    """A valid KB name made from a folder's name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", folder.name)[:64] or "docs"


def starter_config(folder: str, base_dir: Path) -> tuple[str, KBConfig]:
    """The commented starter kb.toml `mcp-kb init` writes, with one KB over `folder`, and that KB as
    loaded from it (validated before anything is written)."""
    from importlib.resources import files

    where = (base_dir / folder).resolve()
    values = {"name": kb_name_for(where), "description": f"Documents from the folder '{where.name}'", "folder": folder}
    template = files(__package__).joinpath("starter.toml").read_text(encoding="utf-8")
    text = template.format(**{key: json.dumps(value, ensure_ascii=False) for key, value in values.items()})
    [kb] = build_config(tomllib.loads(text), base_dir, None).kb
    return text, kb


def write_starter(folder: str, target: Path) -> KBConfig:
    """Write the starter kb.toml over `folder` to `target` (never over an existing file); its KB."""
    if target.exists():
        raise ConfigError(f"{target} exists and is left as it is: edit it, or pass --config OTHER.toml")
    text, kb = starter_config(folder, target.parent.resolve())
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc}") from exc
    return kb


def config_target(given: str | None) -> tuple[Path, bool]:
    """The kb.toml or folder a command uses: the one given, else $MCP_KB_CONFIG, else ./kb.toml.
    Returns the path and whether it was named (by the option or the variable)."""
    named = given or environment(ENV_CONFIG)
    return Path(named or "kb.toml").expanduser(), bool(named)


def build_config(raw: dict[str, Any], base_dir: Path, source: Path | None) -> Config:
    """Validate a parsed TOML mapping; environment variables override model and storage."""
    raw = _apply_environment(raw)
    where = str(source) if source else "config"
    try:
        config = Config.model_validate({**raw, "source": source})
    except ValidationError as exc:
        raise ConfigError(_explain(exc, raw, where)) from None
    # A path that does not exist is not an error here: an unmounted share must not stop the server
    # from serving the index it has. Syncs report it (and keep the index); `mcp-kb check` shows it.
    return _resolve_paths(config, base_dir)


def _apply_environment(raw: dict[str, Any]) -> dict[str, Any]:
    """Environment variables override the file: each setting declared with `_env(NAME)` takes NAME's value."""
    raw = dict(raw)
    if isinstance(raw.get("storage"), str):
        raw["storage"] = {"uri": raw["storage"]}
    for section, model in (("storage", StorageConfig), ("server", ServerConfig),
                           ("embedding", _chosen(EMBEDDING_PROVIDERS, "fastembed", raw.get("embedding")))):
        if model is None or not isinstance(raw.get(section, {}), dict):
            continue  # a malformed section or an unknown provider is reported by validation
        for key, declared in model.model_fields.items():
            extra = declared.json_schema_extra
            value = environment(str(extra.get("env") or "")) if isinstance(extra, dict) else ""
            if value:
                raw[section] = {**raw.get(section, {}), key: value}
    return raw


def _chosen(registry: Registry, default: str, section: Any) -> type[BaseModel] | None:
    """The settings model a table's provider (or kind) names, None when it names no known one."""
    name = section.get(registry.key, default) if isinstance(section, dict) else default
    try:
        return registry.settings(name)
    except ValueError:
        return None


def _resolve_paths(config: Config, base_dir: Path) -> Config:
    def absolute(value: str | Path, key: str) -> Path:
        try:
            return (base_dir / Path(value).expanduser()).resolve()
        except RuntimeError as exc:  # "~name" of a user this machine does not have
            raise ConfigError(f"{key} = {str(value)!r}: cannot expand '~' ({exc}); write the folder out in full") from exc

    kbs = [kb.model_copy(update={"paths": [absolute(p, f"[[kb]] {kb.name}: paths") for p in kb.paths]})
           for kb in config.kb]
    storage = config.storage
    if not storage.is_remote:
        storage = storage.model_copy(update={"uri": str(absolute(storage.uri, "storage"))})
    if storage.read_cache_dir:
        storage = storage.model_copy(update={"read_cache_dir": str(absolute(storage.read_cache_dir,
                                                                            "[storage] read_cache_dir"))})
    _keep_out_written_folders(kbs, storage)
    providers = {section: _with_absolute_paths(getattr(config, section), section, absolute)
                 for section in ("embedding", "rerank")}
    server = config.server
    if server.audit_log:
        server = server.model_copy(update={"audit_log": str(absolute(server.audit_log, "[server] audit_log"))})
    return config.model_copy(update={"kb": kbs, "storage": storage, "server": server, **providers})


def _with_absolute_paths(settings: BaseModel, section: str, absolute: Callable[[str, str], Path]) -> BaseModel:
    """A provider's settings with its local files (the settings named *_path) resolved."""
    paths = {key: str(absolute(value, f"{section}.{key}")) for key in type(settings).model_fields
             if key.endswith("_path") and (value := getattr(settings, key))}
    return settings.model_copy(update=paths)


def _keep_out_written_folders(kbs: list[KBConfig], storage: StorageConfig) -> None:
    """Tell each KB where mcp-kb writes, so its index, caches and query logs never come back as
    documents (they hold users' past queries), and warn about an index kept among the documents."""
    written = [cache_root(), data_root()] + ([] if storage.is_remote else [Path(storage.uri)]) + \
        ([Path(storage.read_cache_dir)] if storage.read_cache_dir else [])
    folders = tuple(Path(os.path.realpath(folder)) for folder in written)
    for kb in kbs:
        kb._written_folders = folders
        for root in kb.paths:
            if not storage.is_remote and Path(storage.uri).is_relative_to(root):
                log.warning("the index folder %s is inside knowledge base %r's path %s: it is never indexed, but "
                            "keeping it outside the documents is safer (a copy of the folder takes it along)",
                            storage.uri, kb.name, root)


def _explain(exc: ValidationError, raw: dict[str, Any], where: str) -> str:
    """Turn pydantic's errors into lines that name the key and the fix."""
    lines = []
    for error in exc.errors():
        location = [part for part in error["loc"] if not str(part).startswith("function-after")]
        key = _key_name(location, raw)
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key {key!r}{_did_you_mean(location, raw)}")
        elif error["type"] == "missing":
            lines.append(f"{where}: missing required key {key!r}")
        else:
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {key + ': ' if key else ''}{message}{_shown_value(error.get('input'), key)}")
    return "\n".join(lines)


def _shown_value(value: Any, key: str) -> str:
    """The offending value, when it is one plain value of a key that cannot hold a secret: a whole
    table may hold a token or credentials, and so may any key named like one."""
    if isinstance(value, (dict, list, tuple, set)) or _SECRET_BEARING.search(key):
        return ""
    return f" (got {value!r})"


def _key_name(location: list[Any], raw: dict[str, Any]) -> str:
    """Dotted key such as kb[policy].chunking.max_tokens."""
    parts: list[str] = []
    node: Any = raw
    for part in location:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            node = node[part]
            label = node.get("name", part) if isinstance(node, dict) else part
            parts[-1] = f"{parts[-1]}[{label}]"
            continue
        parts.append(str(part))
        node = node.get(part) if isinstance(node, dict) else None
    return ".".join(parts)


def _did_you_mean(location: list[Any], raw: dict[str, Any]) -> str:
    model: type[BaseModel] | None = Config
    node: Any = raw
    for index, part in enumerate(location[:-1]):
        node = node[part] if isinstance(node, (dict, list)) and _has(node, part) else None
        if isinstance(part, int) or model is None or str(part) not in model.model_fields:
            continue  # a list index, or a key of a mapping (e.g. a filterable field's name): same model
        model = _model_in(model.model_fields[str(part)].annotation)
        if model in _PICKED_BY_NAME:  # the settings of the provider (or kind) the table names
            item = node[location[index + 1]] if isinstance(node, list) and _has(node, location[index + 1]) else node
            model = _chosen(*_PICKED_BY_NAME[model], section=item)
    if model is None:
        return ""
    keys = [key for key in model.model_fields if key != "source"]  # `source` is set by the loader
    match = difflib.get_close_matches(str(location[-1]), keys, n=1)
    return f"; did you mean {match[0]!r}?" if match else f"; valid keys: {', '.join(keys)}"


def _has(node: dict[str, Any] | list[Any], part: Any) -> bool:
    return part in node if isinstance(node, dict) else isinstance(part, int) and part < len(node)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found:
            return found
    return None
