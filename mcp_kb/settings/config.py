"""The whole kb.toml as one model: its sections, the rules across them (unique names, grants that
match KBs), `serve`'s overrides, and finding a KB by name."""

from __future__ import annotations

import secrets

from pathlib import Path
from typing import Any

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from ..errors import ConfigError
from ..vocabulary import SYNC_TOOL, WORKBENCH_TOOLS
from .kb import KBConfig
from .providers import (
    DEFAULT_PROVIDER,
    EMBEDDING_PROVIDERS,
    RERANK_PROVIDERS,
    EmbeddingConfig,
    FastembedRerankSettings,
    FastembedSettings,
    RerankConfig,
)
from .server import AUTO_EACH_UP_TO, ServerConfig, granted
from .variables import default_storage
from .storage import StorageConfig
from .sync import SyncEngineConfig
from .values import Strict

_SHORTEST_PLACE = 6  # characters: "auto" (a Ray address) or a path like "/idx" is no place to hide in text


class Config(Strict):
    """The whole kb.toml."""

    storage: StorageConfig = Field(default_factory=StorageConfig)
    """Where the index lives: its table (below), or a string, short for its `uri`."""
    embedding: SerializeAsAny[EmbeddingConfig] = FastembedSettings()
    """The embedding model."""
    rerank: SerializeAsAny[RerankConfig] = FastembedRerankSettings()
    """Optional reranking."""
    server: ServerConfig = ServerConfig()
    """How `mcp-kb serve` listens, and who may use which KB."""
    sync: SyncEngineConfig = SyncEngineConfig()
    """How syncs run on this machine."""
    kb: list[KBConfig] = Field(default_factory=list)
    """The knowledge bases."""
    source: Path | None = None
    """The file this configuration came from (set by the loader, for messages)."""

    @property
    def owner(self) -> str:
        """Which project the KBs a sync builds belong to, when that can be mistaken: its kb.toml, if it keeps its
        index in the per-user default one that every config naming no storage shares ("" otherwise: an index named
        on purpose is shared on purpose, by a team's configs wherever they are)."""
        return str(self.source.resolve()) if self.source and self.storage.uri == default_storage() else ""

    @field_validator("embedding", mode="before")
    @classmethod
    def _embedding_provider(cls, value: Any) -> Any:
        return EMBEDDING_PROVIDERS.validate(value, DEFAULT_PROVIDER)

    @field_validator("rerank", mode="before")
    @classmethod
    def _rerank_provider(cls, value: Any) -> Any:
        return RERANK_PROVIDERS.validate(value, DEFAULT_PROVIDER)

    @field_validator("storage", mode="before")
    @classmethod
    def _storage_shorthand(cls, value: Any) -> Any:
        return {"uri": value} if isinstance(value, str) else value

    @field_validator("kb", mode="before")
    @classmethod
    def _kb_tables(cls, value: Any) -> Any:
        if isinstance(value, dict):  # `[kb]` where `[[kb]]` was meant
            raise ValueError(
                "written as one table [kb]; each knowledge base is an array table: write [[kb]] (two brackets)"
            )
        return value

    def tools_of_each_kb(self, seen: int) -> bool:
        """Whether a caller who sees `seen` knowledge bases is listed a search tool per KB (`[server] search_tools`).
        Counted over what the caller sees: the shape of its tool list tells nothing of the KBs beyond it."""
        tools = self.server.search_tools
        return tools in ("each", "both") or (tools == "auto" and seen <= AUTO_EACH_UP_TO)

    def tool_across_kbs(self, seen: int) -> bool:
        """Whether a caller who sees `seen` knowledge bases is listed one search tool across them (auto: whenever
        it sees several)."""
        tools = self.server.search_tools
        return tools in ("across", "both") or (tools == "auto" and seen > 1)

    @model_validator(mode="after")
    def _names_are_unique(self) -> Config:
        for what, names in (
            ("KB name", [k.name for k in self.kb]),
            ("tool name", [k.search_tool_name for k in self.kb] + [SYNC_TOOL, *WORKBENCH_TOOLS]),
        ):
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
                    raise ValueError(
                        f"{where}: kbs entry {pattern!r} matches no knowledge base (configured: {', '.join(names)})"
                    )
        return self

    def serving(  # noqa: PLR0913  # one per option
        self,
        transport: str | None = None,
        host: str | None = None,
        port: int | None = None,
        read_only: bool | None = None,
        stateless: bool | None = None,
        workers: int | None = None,
    ) -> Config:
        """This config with `serve`'s options in place of the [server] settings they override."""
        chosen = transport or self.server.transport
        if chosen == "stdio" and (host or port is not None):
            option = "--port" if port is not None else "--host"
            raise ConfigError(
                f"{option} is for the HTTP transports, and this server speaks stdio: add --transport "
                f"http (or sse), or set [server] transport"
            )
        given = {
            "transport": chosen,
            "host": host,
            "port": port,
            "read_only": read_only,
            "stateless": stateless,
            "workers": workers,
        }
        server = self.server.model_copy(update={key: value for key, value in given.items() if value is not None})
        if server.stateless and chosen != "http":
            raise ConfigError(
                f"stateless serving is a mode of the streamable HTTP transport, and this server "
                f"speaks {chosen}: add --transport http"
            )
        if server.workers > 1 and not server.stateless:
            raise ConfigError(
                f"{server.workers} workers serve from several processes, and a session, an SSE stream "
                f"or a sync task lives in one: serve stateless streamable HTTP (--transport http "
                f"--stateless), or one worker"
            )
        if server.workers > 1 and not server.cursor_secret:  # a cursor one worker gives, another takes
            server = server.model_copy(update={"cursor_secret": secrets.token_urlsafe(32)})
        return self.model_copy(update={"server": server})

    def get_kb(self, name: str) -> KBConfig:
        for kb in self.kb:
            if kb.name == name:
                return kb
        raise unknown_kb(name, [k.name for k in self.kb])

    def select(self, name: str | None) -> list[KBConfig]:
        """One KB by name, or all when name is None."""
        return list(self.kb) if name is None else [self.get_kb(name)]

    def unlocated(self, text: str) -> str:
        """`text` (an error, a sync's record) with the places behind the KBs named by what they are: where the
        index is stored, the config file, the model's folder and the Ray cluster a sync runs on are the owner's
        business, not a remote caller's. A path is also matched as libraries print it (no scheme, no leading slash)."""
        spelled: dict[str, str] = {}
        for place, what in self._places().items():
            for form in (place, place.split("://", 1)[-1], place.lstrip("/")):
                if len(form) >= _SHORTEST_PLACE:
                    spelled.setdefault(form.rstrip("/"), what)
        for form in sorted(spelled, key=len, reverse=True):  # a URI before the host it contains
            text = text.replace(form, spelled[form])
        return text

    def located(self, text: str) -> str:
        """`text` as unlocated left it, with the places put back: what the owner reads (`mcp-kb status`)."""
        for place, what in self._places().items():  # the storage's URI comes after its endpoints: it wins
            text = text.replace(what, place)
        return text

    def _places(self) -> dict[str, str]:
        """The owner's places, and what a remote caller reads instead (a remedy quotes the config file's path)."""
        endpoints = {value: "<storage>" for name, value in self.storage.options.items() if "endpoint" in name}
        return {
            **endpoints,
            self.storage.uri: "<storage>",
            **({str(self.source): "<kb.toml>"} if self.source else {}),
            **({self.sync.ray_address: "<Ray cluster>"} if self.sync.ray_address else {}),
            **(
                {str(model_path): "<model folder>"}
                if (model_path := getattr(self.embedding, "model_path", None))
                else {}
            ),
        }


def unknown_kb(name: str, known: list[str]) -> ConfigError:
    """The error for a KB name that is not configured (or, for a scoped caller, not granted: the same words)."""
    return ConfigError(f"unknown knowledge base {name!r}; configured: {', '.join(known) or '(none)'}")
