"""Settings: kb.toml and the environment, validated into frozen models, one module per concern:

values.py (the strict base model, units, name rules, search limits), variables.py (every variable
read, `${NAME}`, header values, per-user folders), storage.py, providers.py (embedding and rerank
providers and their registries), server.py (serving and access grants), sync.py (how syncs run:
worker processes, per-file limits), kb.py (one knowledge base), config.py (the whole file),
loading.py (files, folders, the starter, paths) and explain.py (validation errors in words).
The names below are the package's public face.
"""

from .config import Config, unknown_kb
from .variables import ENV_CONFIG, ENV_CURSOR_SECRET, ENV_FASTEMBED_CACHE, ENV_MODEL, ENV_MODEL_PATH, ENV_STORAGE, ENV_TOKEN, cache_root, \
    child_environment, environment, header_value
from .kb import SOURCE_KINDS, WATCH_POLL_SECONDS, ChunkingConfig, FilterableField, KBConfig, RepoConfig, SearchConfig, \
    SourceSettings, SyncConfig, WebSourceConfig
from .loading import build_config, config_for_folder, config_target, load_config, write_starter
from .providers import (EMBEDDING_PROVIDERS, RERANK_PROVIDERS, EmbeddingConfig, FastembedRerankSettings,
                        FastembedSettings, OpenAISettings, RerankConfig, ServiceRerankSettings)
from .server import GroupGrant, OAuthConfig, ServerConfig, TokenGrant, granted
from .storage import StorageConfig
from .sync import FILE_MEMORY_MB, FILE_SECONDS, SyncEngineConfig, usable_cores
from .values import (CONTEXT_MAX, DEFAULT_MODE, DEFAULT_MODEL, HEALTHY_HIT_RATE, IDENTIFIER, KB_NAME_CHARS, KB_NAME_PATTERN, MAX_QUERY_LENGTH,
                     MAX_TOKENS_MAX, MAX_TOKENS_MIN, MODES, MODES_TEXT, RANKED_MODES, TOP_K_MAX, TOP_K_MIN, TRANSPORTS,
                     SearchMode, Transport, is_loopback, is_remote_uri, megabytes)

__all__ = [
    "Config", "unknown_kb",
    "ENV_CONFIG", "ENV_CURSOR_SECRET", "ENV_FASTEMBED_CACHE", "ENV_MODEL", "ENV_MODEL_PATH", "ENV_STORAGE", "ENV_TOKEN", "cache_root", "child_environment",
    "environment", "header_value",
    "SOURCE_KINDS", "ChunkingConfig", "FilterableField", "KBConfig", "RepoConfig", "SearchConfig", "SourceSettings",
    "SyncConfig", "WebSourceConfig", "WATCH_POLL_SECONDS",
    "build_config", "config_for_folder", "config_target", "load_config", "write_starter",
    "EMBEDDING_PROVIDERS", "RERANK_PROVIDERS", "EmbeddingConfig", "FastembedRerankSettings", "FastembedSettings",
    "OpenAISettings", "RerankConfig", "ServiceRerankSettings",
    "GroupGrant", "OAuthConfig", "ServerConfig", "TokenGrant", "granted",
    "StorageConfig",
    "FILE_MEMORY_MB", "FILE_SECONDS", "SyncEngineConfig", "usable_cores",
    "CONTEXT_MAX", "DEFAULT_MODE", "DEFAULT_MODEL", "HEALTHY_HIT_RATE", "IDENTIFIER", "KB_NAME_CHARS", "KB_NAME_PATTERN", "MAX_QUERY_LENGTH",
    "MAX_TOKENS_MAX", "MAX_TOKENS_MIN", "MODES", "MODES_TEXT", "RANKED_MODES", "TOP_K_MAX", "TOP_K_MIN", "TRANSPORTS",
    "SearchMode", "Transport", "is_loopback", "is_remote_uri", "megabytes",
]
