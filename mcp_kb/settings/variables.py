"""The environment: every variable mcp-kb reads is named and read here (docs/operations.md lists them),
`${NAME}` in a setting's value, request header values, and this user's data and cache folders."""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs
from pydantic import JsonValue

from ..errors import ConfigError

ENV_CONFIG = "MCP_KB_CONFIG"  # the kb.toml (or folder) commands use when -c is not given
ENV_MODEL = "MCP_KB_EMBEDDING_MODEL"
ENV_MODEL_PATH = "MCP_KB_EMBEDDING_MODEL_PATH"
ENV_STORAGE = "MCP_KB_STORAGE"
ENV_TOKEN = "MCP_KB_TOKEN"
ENV_CURSOR_SECRET = "MCP_KB_CURSOR_SECRET"
ENV_RAY_ADDRESS = "RAY_ADDRESS"  # Ray's own variable for the cluster to join: `[sync] ray_address` when set
# fastembed's own model cache, which fastembed reads; mcp-kb reads it to know a remembered model identity's cache.
ENV_FASTEMBED_CACHE = "FASTEMBED_CACHE_PATH"
# The S3 variables LanceDB reads too; mcp-kb reads them for the read cache of an s3:// store.
ENV_AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"
ENV_AWS_REGION = "AWS_REGION"
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
ENV_AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # "${NAME}" in header and storage option values
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110's token
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what no header value may hold (tab is allowed)


def from_environment(variable: str) -> dict[str, JsonValue]:
    """Marks the setting an environment variable overrides: each names its variable in its declaration."""
    return {"env": variable}


def environment(variable: str) -> str | None:
    """An environment variable's value (None when unset or empty): the one reader of the environment."""
    return os.environ.get(variable) or None


def child_environment(**defaults: str) -> dict[str, str]:
    """The environment for a child process of mcp-kb: this one's, with `defaults` for variables it lacks."""
    return {**defaults, **os.environ}


def data_root() -> Path:
    """This user's data folder for mcp-kb, e.g. ~/.local/share/mcp-kb on Linux: the default indexes."""
    return Path(platformdirs.user_data_dir("mcp-kb", appauthor=False))


def default_storage() -> str:
    """The index of a config that names none."""
    return str(data_root() / "index")


def cache_root() -> Path:
    """This machine's per-user cache for mcp-kb: records about remote and read-only indexes, crawled pages."""
    return Path(platformdirs.user_cache_dir("mcp-kb", appauthor=False))


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
        raise ConfigError(
            f"{where}: {source} holds a control character (a stray line break or carriage return?), "
            f"which no HTTP header may carry; remove it"
        )
    return value


def checked_headers(headers: dict[str, str], where: str) -> dict[str, str]:
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
