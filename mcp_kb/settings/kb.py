"""`[[kb]]`: one knowledge base: its sources, chunking, search defaults, sync triggers and metadata."""

from __future__ import annotations

import re
import string
from pathlib import Path
from urllib.parse import urlsplit
from typing import Annotated, Any, Literal

from anyascii import anyascii
from pydantic import BeforeValidator, Field, PrivateAttr, SerializeAsAny, field_validator, model_validator

from ..registry import Registry
from ..schema import BUILTIN_FILTER_FIELDS, RESERVED_FIELDS, FieldTypeName, field_type_of_value
from .variables import checked_headers, environment, header_value
from .values import (
    DEFAULT_MODE,
    IDENTIFIER,
    KB_NAME_LENGTH,
    KB_NAME_PATTERN,
    LIBRARY_VERSION_PATTERN,
    MAX_TOKENS_MAX,
    MAX_TOKENS_MIN,
    TOOL_NAME_PATTERN,
    TOP_K_MAX,
    in_name_chars,
    TOP_K_MIN,
    PathValue,
    SearchMode,
    Strict,
    megabytes,
)


class SourceSettings(Strict):
    """A `[[kb.sources]]` table: a source of a registered kind (folders and web sites are `paths` and `urls`)."""

    kind: str
    """The kind a plugin registered (`SOURCE_KINDS.register(kind, Settings, SourceClass)`), with that kind's keys."""


SOURCE_KINDS = Registry("source kind", "kind")  # built-in kinds: ingest/sources.py
# A [[kb.sources]] table, validated as the settings of the kind it names.
_RegisteredSource = Annotated[
    SerializeAsAny[SourceSettings], BeforeValidator(lambda value: SOURCE_KINDS.validate(value, ""))
]


class ChunkingConfig(Strict):
    """How documents are cut into chunks; sizes are in the embedding model's tokens."""

    strategy: Literal["auto", "markdown", "recursive", "fixed"] = "auto"
    """`auto` (by heading where a document has them, else by paragraph), `markdown`, `recursive` or `fixed`."""
    max_tokens: int = Field(256, ge=16, le=8192)
    """Tokens of the embedding model per chunk at most (capped at what the model reads)."""
    overlap: int = Field(32, ge=0)
    """Tokens a chunk repeats of the one before it (less than half of `max_tokens`)."""
    # merges "FAQ › One\nYes." but keeps "Errors\nE002: auth failed"
    min_tokens: int = Field(12, ge=0)
    """A smaller piece joins its neighbour instead of becoming a chunk of its own."""

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
    """`hybrid`, `vector`, `keyword` or `filter` (filters alone, no query ranking)."""
    top_k: int = Field(5, ge=TOP_K_MIN, le=TOP_K_MAX)
    """Passages an answer gives."""
    min_score: float = Field(0.0, ge=0.0)
    """Passages scoring lower are left out."""
    candidates: int = Field(50, ge=1, le=1000)
    """Chunks each side (vector, keyword) brings before fusion."""
    max_per_document: int = Field(2, ge=TOP_K_MIN, le=TOP_K_MAX)
    """Passages one document may give to an answer."""
    max_tokens: int = Field(4000, ge=MAX_TOKENS_MIN, le=MAX_TOKENS_MAX)
    """The token budget of all passages of an answer, context included."""
    title_weight: float = Field(0.0, ge=0.0, le=20.0)
    """Keyword side: a match in the title or heading path adds this many times its BM25 there (0: they count like
    any word of the text, as they always do); applied at query time, no re-index."""
    query_log: bool = False
    """Write one JSON line per search (time, query, mode, filters, top hits with scores, latency) to
    `<kb>.queries.jsonl` next to the index: **it holds what users asked**."""
    query_log_max_mb: float = Field(10, gt=0)
    """MB of query log before it is rotated to `.1`."""
    filter: dict[str, Any] = Field(default_factory=dict)  # pydantic's field: Any keeps its JSON schema
    """A filter applied to every search, AND-ed with the caller's."""


class HistoryConfig(Strict):
    """How long a KB's versions are kept (to search as of and to roll back to)."""

    keep: int = Field(20, ge=1, le=10_000)
    """Keep at least the newest this many versions."""
    keep_days: float = Field(1, ge=0, le=3650)
    """Also keep every version younger than this many days (0: by count alone). Each compaction within the kept
    span keeps a copy of what it rewrote (docs/versions.md): count, not days, bounds that."""


WATCH_POLL_SECONDS = 3600.0  # how often `watch` asks a source it cannot watch again (a web site), without `interval`


class SyncConfig(Strict):
    """When a served KB syncs by itself."""

    on_start: bool = False
    """Sync when the server starts."""
    interval: float = Field(0, ge=0)
    """Seconds between scheduled syncs (0: none)."""
    watch: bool = False
    """Sync when a file changes (local folders, and a new commit of a repository given as a local path; web sources
    are polled by `interval`)."""
    debounce: float = Field(1.0, ge=0.05, le=60)
    """Seconds of quiet after a file change before its sync starts (a burst of saves is one sync)."""
    max_delete_share: float = Field(0.5, ge=0, le=1)
    """A sync that would delete more than this share of the KB (and at least 20 documents) is refused without
    `--allow-mass-delete` (an unmounted drive looks like deleted files)."""
    self_check_sample: int = Field(0, ge=0, le=10_000)
    """After a rebuild, measure the label-free hit rate (hybrid) on this many chunks; `status` and `stats` show it
    (0: off)."""

    @property
    def asks_again_every(self) -> float | None:
        """Seconds between the syncs a served KB makes by itself of sources it cannot watch (a web site, a remote
        repository): `interval`, else an hour when `watch` is on; None: it makes none."""
        return self.interval or (WATCH_POLL_SECONDS if self.watch else None)

    @property
    def has_triggers(self) -> bool:
        """Whether a served KB syncs by itself (at start, on a schedule or on file changes)."""
        return self.on_start or self.watch or bool(self.interval)


class WebSourceConfig(Strict):
    """A documentation site (or part of one) crawled into a KB; `urls = ["https://…"]` is short for
    `urls = [{url = "https://…"}]`."""

    url: str
    """The start page; the crawl stays on its host, below its folder (`https://x.org/docs/intro` →
    `https://x.org/docs/`)."""
    include: list[str] = Field(default_factory=list)
    """URL globs a page must match (the whole normalized URL; `*` crosses `/`); empty: every page in scope."""
    exclude: list[str] = Field(default_factory=list)
    """URL globs of pages to leave out, e.g. `"*/changelog/*"`."""
    max_pages: int = Field(1000, ge=1, le=1_000_000)
    """Pages per crawl (the report says when it stopped there)."""
    max_depth: int = Field(10, ge=0, le=100)
    """Links followed from the start page (sitemap entries are depth 0)."""
    sitemap: Literal["auto", "off"] = "auto"
    """`auto`: read the sitemaps robots.txt names, else `/sitemap.xml`; `off`."""
    keep_query: list[str] = Field(default_factory=list)
    """Query parameters that name a page (`["title"]` for a MediaWiki); all others are dropped, `["*"]` keeps all."""
    concurrency: int = Field(2, ge=1, le=16)
    """Requests at once."""
    delay: float = Field(0.1, ge=0, le=60)
    """Seconds each worker waits before a request (robots.txt's `Crawl-delay` wins when longer)."""
    user_agent: str = "mcp-kb (knowledge-base indexer)"
    """The User-Agent header (and the name robots.txt rules are read for)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers; `${NAME}` in a value is read from the environment at crawl time
    (`Authorization = "Bearer ${WIKI_TOKEN}"`), so tokens stay out of kb.toml and the index."""
    timeout: float = Field(20, gt=0, le=600)
    """Seconds for a whole page, body included."""
    max_page_mb: float = Field(10, gt=0)
    """The largest page (after decompression); larger ones are skipped and reported."""

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


def _urls_as_tables(value: Any) -> Any:
    """A URL given as text is the table `{url = ...}`."""
    if isinstance(value, list):
        return [{"url": item} if isinstance(item, str) else item for item in value]
    return value


WebSources = Annotated[list[WebSourceConfig], BeforeValidator(_urls_as_tables)]  # a KB's or a version's `urls`


# Committed files a repository KB leaves out unless its `exclude` says otherwise: vendored code, build output,
# lock files and generated sources, which answer no question and crowd out the code that does.
REPO_EXCLUDE_DEFAULT = [
    "vendor/",
    "third_party/",
    "node_modules/",
    "dist/",
    "build/",
    "*.min.js",
    "*.min.css",
    "*.map",
    "*.lock",
    "package-lock.json",
    "*_pb2.py",
    "*_pb2_grpc.py",
    "*.pb.go",
    "*.generated.*",
    "*.g.cs",
]
# A repository: https/http/ssh/git/file URLs, scp-like `user@host:path`, or a local path; never an option ("-…") or
# a helper transport (`ext::`, `fd::`), which would run a command.
_REMOTE_URL = re.compile(r"^(?:(?:https?|ssh|git|file)://\S+|[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:\S+)\Z")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:")
_LOCAL_PATH = re.compile(r"^(?:[^\s:-][^:]*|[A-Za-z]:[\\/].*)\Z", re.DOTALL)
# A branch, tag or commit by git's ref-name rules (no "..", "@{", "//", component starting with "." or ending in
# ".lock"), and never an option ("-…") a command line would take as a flag.
_REF = re.compile(
    r"^(?!-)(?!.*\.\.)(?!.*@\{)(?!.*//)(?!\.)(?!.*/\.)(?!.*\.lock(?:/|\Z))"
    r"[A-Za-z0-9._/+-]{1,200}(?<![./])\Z"
)


_TEMPLATE_FIELDS = {"repo", "commit", "path", "start", "end"}  # what a repository's `url_template` may name


class RepoConfig(Strict):
    """A git repository whose committed files a KB indexes, at one ref.

    Each sync fetches the ref and indexes what changed since the commit the index holds."""

    url: str
    """`https://…`, `ssh://…`, `git@host:path`, `file://…` or a local path to a repository."""
    ref: str = "HEAD"
    """The branch, tag or commit to index (`HEAD`: the repository's default branch)."""
    name: str = ""
    """Leads its documents' paths (`NAME/path`) when the KB has other sources; default: the repository's name."""
    paths: list[str] = Field(default_factory=list)
    """Gitignore-style globs inside the repository a file must match (empty: every supported file)."""
    exclude: list[str] = Field(default_factory=lambda: list(REPO_EXCLUDE_DEFAULT))
    """Gitignore-style globs of committed files to leave out (default: vendored, built, lock and generated files)."""
    token_env: str = ""
    """An environment variable holding a token for an https repository (sent as HTTP Basic auth with `username`);
    without it, git's own credential helper or ssh agent is asked. The token is never stored or shown."""
    username: str = "x-access-token"
    """The user name sent with `token_env`'s token."""
    url_template: str = ""
    """A permalink per hit: `{repo}`, `{commit}`, `{path}`, `{start}` and `{end}` are filled in, e.g.
    `https://git.example.com/{repo}/blob/{commit}/{path}#L{start}-L{end}`."""
    timeout: float = Field(600, gt=0, le=86_400)
    """Seconds a fetch may take; a server that drips is cut off when it sends under 1 KB/s for 30 s."""
    max_fetch_mb: float = Field(2048, gt=0)
    """The most a fetch may add to this machine's copy of the repository (a pack that unpacks past it is stopped)."""
    webhook_secret_env: str = ""
    """An environment variable holding the secret of this repository's push webhook: an HTTP server then takes
    signed pushes at `/hooks/git/KB/NAME` and syncs the KB when the ref moves (empty: no webhook). The secret is
    never stored or shown."""

    @field_validator("url")
    @classmethod
    def _url_is_a_repository(cls, value: str) -> str:
        unprintable = any(not char.isprintable() for char in value)
        if "://" in value and (urlsplit(value).query or urlsplit(value).fragment):
            raise ValueError(
                "must not carry a query or a fragment (a token there would be shown): name a variable "
                "holding it in `token_env`"
            )
        if unprintable or not (_REMOTE_URL.match(value) or _LOCAL_PATH.match(value)):
            raise ValueError(
                "must be an https://, http://, ssh://, git:// or file:// URL, `user@host:path`, or a "
                "local path (never an option, a `helper::` transport or a control character)"
            )
        return value

    @property
    def local_path(self) -> Path | None:
        """The repository's folder when `url` is a local path (relative ones are resolved against kb.toml's folder
        when the config loads), else None."""
        if "://" in self.url or _SCP_LIKE.match(self.url):
            return None
        return Path(self.url)

    @field_validator("ref")
    @classmethod
    def _ref_is_a_name(cls, value: str) -> str:
        if not _REF.match(value):
            raise ValueError(f"{value[:80]!r} is not a branch, tag or commit name")
        return value

    @field_validator("name")
    @classmethod
    def _name_leads_paths(cls, value: str) -> str:
        if value and not LIBRARY_VERSION_PATTERN.match(value):
            raise ValueError(f"{value[:80]!r} must be 1-64 letters, digits, '.', '_', '+' or '-'")
        return value

    @field_validator("url_template")
    @classmethod
    def _template_names_known_fields(cls, value: str) -> str:
        try:
            fields = [
                (name, spec, conversion)
                for _, name, spec, conversion in string.Formatter().parse(value)
                if name is not None
            ]
        except ValueError as exc:
            raise ValueError(f"is not a template: {exc}") from exc
        for name, spec, conversion in fields:
            if name not in _TEMPLATE_FIELDS or spec or conversion:  # a spec can ask for a link of a billion spaces
                raise ValueError(
                    f"knows {{{'}, {'.join(sorted(_TEMPLATE_FIELDS))}}}, each as it is, not "
                    f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                )
        return value

    @field_validator("token_env", "webhook_secret_env")
    @classmethod
    def _env_is_a_variable(cls, value: str) -> str:
        if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value):
            raise ValueError(f"{value[:80]!r} is not an environment variable's name")
        return value

    def token(self) -> str:
        """The token `token_env` names, read from the environment now ("" without `token_env`); an unset variable is
        an error naming it (an anonymous fetch would fail later, and less clearly)."""
        if not self.token_env:
            return ""
        value = environment(self.token_env)
        if value is None:
            raise ValueError(
                f"repository {self.label}: the environment variable {self.token_env} (its `token_env`) is not set"
            )
        return value

    def webhook_secret(self) -> str | None:
        """The secret `webhook_secret_env` names, read from the environment now; None without one (no variable named,
        or it is unset or empty): then the repository takes no webhook."""
        return environment(self.webhook_secret_env) if self.webhook_secret_env else None

    @property
    def label(self) -> str:
        """Its name: `name`, else the last part of the repository's path without `.git` (never its host, user,
        password or query)."""
        if self.name:
            return self.name
        if "://" in self.url:
            path = urlsplit(self.url).path
        else:
            path = _SCP_LIKE.sub("", self.url) if _SCP_LIKE.match(self.url) else self.url
        tail = re.split(r"[/\\]", path.rstrip("/\\"))[-1].removesuffix(".git")
        return re.sub(r"[^A-Za-z0-9._+-]", "-", tail).lstrip(".-")[:64] or "repo"


def _check_repo_names(repos: list[RepoConfig]) -> None:
    """A KB's (or a version's) repositories lead their files' paths with their names: two alike would mix them."""
    labels = [repo.label for repo in repos]
    if len(set(labels)) < len(labels):
        raise ValueError(f"repositories need different names (their `name`), not {labels}")


class LibraryVersion(Strict):
    """One version of a documentation set a KB holds beside others (`[[kb.versions]]`), with its own sources."""

    name: str
    """How callers name it (`0.110`, `v2`, `2024-lts`); its documents' paths begin with `NAME/`."""
    paths: list[PathValue] = Field(default_factory=list)
    """Its folders or files."""
    urls: WebSources = Field(default_factory=list)
    """Its web sites to crawl."""
    repos: list[RepoConfig] = Field(default_factory=list)
    """Its git repositories (a ref each)."""
    current: bool = False
    """The version searched when a caller names none (default: the last one listed)."""

    @field_validator("name")
    @classmethod
    def _name_leads_paths(cls, value: str) -> str:
        if not LIBRARY_VERSION_PATTERN.match(value):
            raise ValueError(
                f"{value[:80]!r} must be 1-64 letters, digits, '.', '_', '+' or '-', the first a letter or "
                "digit (it leads its documents' paths)"
            )
        return value

    @model_validator(mode="after")
    def _has_sources(self) -> LibraryVersion:
        if not self.paths and not self.urls and not self.repos:
            raise ValueError(
                f"version {self.name!r} needs `paths` (folders or files), `urls` (web sites) or `repos` "
                "(git repositories)"
            )
        _check_repo_names(self.repos)
        return self


class FilterableField(Strict):
    """A metadata field callers may filter on."""

    type: FieldTypeName = "string"
    """`string`, `integer`, `number`, `boolean`, `date` (YYYY-MM-DD) or `string[]`."""
    description: str = ""
    """What the field means, shown to the LLM in the search tool's schema."""


class KBConfig(Strict):
    """One knowledge base."""

    name: str
    """The KB's name (letters, digits, `_`, `-`); its tool is `search_<name>`."""
    description: str
    """Shown to the LLM: say what the KB holds and when to use it."""
    paths: list[PathValue] = Field(default_factory=list)
    """Folders or files (at least one of `paths`, `urls`, `repos` and `sources`)."""
    urls: WebSources = Field(default_factory=list)
    """Web sites to crawl: a URL, or a table with the keys of `[[kb.urls]]`."""
    repos: list[RepoConfig] = Field(default_factory=list)
    """Git repositories: a URL or path, a ref, globs inside it (see `[[kb.repos]]`)."""
    sources: list[_RegisteredSource] = Field(default_factory=list)
    """Sources of kinds plugins registered."""
    versions: list[LibraryVersion] = Field(default_factory=list)
    """Versions of a documentation set, each with its own `paths`/`urls` (instead of the KB's own); searches take
    a `version` (default: the one marked `current`, else the last listed)."""
    include: list[str] = Field(default_factory=list)
    """Gitignore-style globs relative to the KB root a file must match (empty: every supported type)."""
    exclude: list[str] = Field(default_factory=list)
    """Gitignore-style globs of files to leave out."""
    respect_gitignore: bool = True
    """Honour `.gitignore` files, nested ones too."""
    max_file_size_mb: float = Field(50, gt=0)
    """Larger files are skipped and reported."""
    ocr: Literal["auto", "off"] = "auto"
    """Read images and scanned PDF pages by OCR: `auto` (when the `ocr` extra is installed) or `off`."""
    tool_name: str | None = None
    """A search tool name of your own instead of `search_<name>`."""
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Static fields stored on every chunk (filterable; a document's front matter overrides them)."""
    # Folders mcp-kb itself writes (the index, caches, logs): set by the loader, never documents.
    _written_folders: tuple[Path, ...] = PrivateAttr(default=())
    filterable: dict[str, FilterableField] = Field(default_factory=dict)
    """Front-matter fields callers may filter on, each with its type and description."""
    chunking: ChunkingConfig = ChunkingConfig()
    """How documents are cut into chunks."""
    search: SearchConfig = SearchConfig()
    """Search defaults."""
    sync: SyncConfig = SyncConfig()
    """When a served KB syncs by itself."""
    history: HistoryConfig = HistoryConfig()
    """How long its versions are kept (`mcp-kb versions`, `as_of`, `mcp-kb rollback`)."""

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        if not KB_NAME_PATTERN.match(value):
            like = in_name_chars(anyascii(value)).strip("_")[:KB_NAME_LENGTH]
            raise ValueError(f"{value!r} must be 1-64 letters, digits, '_' or '-'{f' (e.g. {like!r})' if like else ''}")
        return value

    @field_validator("tool_name")
    @classmethod
    def _tool_name_is_valid(cls, value: str | None) -> str | None:
        if value is not None and not TOOL_NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} breaks MCP's tool-name rule: 1-128 of A-Z a-z 0-9 _ - .")
        return value

    @model_validator(mode="after")
    def _has_sources(self) -> KBConfig:
        if self.versions:
            if self.paths or self.urls or self.repos or self.sources:
                raise ValueError(
                    "a knowledge base with [[kb.versions]] gives each version its own `paths`/`urls`/"
                    "`repos`; move the knowledge base's own into a version"
                )
            names = [version.name for version in self.versions]
            if len(set(names)) < len(names):
                raise ValueError(f"versions must have different names, not {names}")
            if sum(version.current for version in self.versions) > 1:
                raise ValueError("mark at most one version `current = true`")
        elif not self.paths and not self.urls and not self.repos and not self.sources:
            raise ValueError(
                "a knowledge base needs `paths` (folders or files), `urls` (web sites) or `repos` (git repositories)"
            )
        _check_repo_names(self.repos)
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
    def default_version(self) -> str | None:
        """The library version a search reads when it names none: the `current` one, else the last listed (never a
        guess from the names); None for a KB without versions."""
        if not self.versions:
            return None
        return next((version.name for version in self.versions if version.current), self.versions[-1].name)

    def of_version(self, version: LibraryVersion) -> KBConfig:
        """This KB as one of its versions alone (its sources), as the sources of a version are read."""
        return self.model_copy(
            update={"paths": version.paths, "urls": version.urls, "repos": version.repos, "versions": []}
        )

    @property
    def pushed_repos(self) -> list[tuple[str, RepoConfig]]:
        """Its repositories that name a webhook secret, each by the path its webhook URL ends with (`NAME`, or
        `VERSION/NAME` for a version's)."""
        repos = [(repo.label, repo) for repo in self.repos]
        repos += [(f"{version.name}/{repo.label}", repo) for version in self.versions for repo in version.repos]
        return [(name, repo) for name, repo in repos if repo.webhook_secret_env]

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
