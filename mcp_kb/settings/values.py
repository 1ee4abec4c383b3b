"""The plain values settings are made of: the strict base model, path text, size units, name rules,
and the limits of a search request that validation, the tool schemas and search all share."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# MCP's rule for tool names (spec 2025-11-25); the SDK only warns on a bad one.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
KB_NAME_CHARS = "A-Za-z0-9_-"  # what a KB (or token) name is made of: safe in table names, URIs and tool names
KB_NAME_LENGTH = 64
KB_NAME_PATTERN = re.compile(f"^[{KB_NAME_CHARS}]{{1,{KB_NAME_LENGTH}}}$")
_NOT_IN_NAMES = re.compile(f"[^{KB_NAME_CHARS}]")


def in_name_chars(text: str) -> str:
    """`text` with every character a name may not hold as '_' (spaces, dots, quotes: `my docs` -> `my_docs`)."""
    return _NOT_IN_NAMES.sub("_", text)


# A library version's name (`0.110`, `v2`, `2024-lts`): it leads its documents' paths, so no "/" and no spaces.
LIBRARY_VERSION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"  # a metadata field's name (a column), as kb.toml and filters write it
DEFAULT_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
REMOTE_READ_CONSISTENCY = 5.0  # seconds between a reader's checks for a new version on object storage

# Limits of a search request, shared by config validation, the tool schema and search.
Transport = Literal["stdio", "sse", "http"]
TRANSPORTS: tuple[str, ...] = get_args(Transport)
SearchMode = Literal["hybrid", "vector", "keyword", "filter"]
MODES: tuple[str, ...] = get_args(SearchMode)
DEFAULT_MODE: SearchMode = "hybrid"
RANKED_MODES = ("keyword", "vector", "hybrid")  # the modes that rank by relevance: what evaluations measure
_MODE_NOTES = {"keyword": "exact terms, codes, names", "filter": "list by metadata only"}
MODES_TEXT = ", ".join(
    f"{mode}{' (default)' if mode == DEFAULT_MODE else ''}{f' ({_MODE_NOTES[mode]})' if mode in _MODE_NOTES else ''}"
    for mode in MODES
)
TOP_K_MIN, TOP_K_MAX = 1, 100
CONTEXT_MAX = 5  # neighbouring chunks on each side of a hit
MAX_TOKENS_MIN, MAX_TOKENS_MAX = 100, 100_000  # an answer's token budget
HEALTHY_HIT_RATE = 0.8  # a label-free hit rate below this means chunking or embedding is wrong
MAX_QUERY_LENGTH = 4_000  # characters; longer texts make slow searches and are never a real question


def megabytes(size_mb: float) -> int:
    """A size setting in MB (`max_file_size_mb`, `max_page_mb`, `query_log_max_mb`) in bytes."""
    return int(size_mb * _BYTES_PER_MB)


def in_megabytes(size: int) -> float:
    """A size in bytes in MB, as a message states it beside a setting in MB (`max_file_size_mb`, `max_fetch_mb`)."""
    return size / _BYTES_PER_MB


_BYTES_PER_MB = 1024 * 1024  # a setting's MB is a mebibyte


_URL_PASSWORD = re.compile(r"(?<=://)([^/@\s:]*):([^/\s]*)@")  # a password may hold "@": up to the last one


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's own (`localhost`, 127.0.0.0/8, `::1`, bracketed or not): the
    one rule for where a server may listen without a token and where plain http may carry credentials."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redact_url(text: str) -> str:
    """Text with every `scheme://user:password@` shown as `scheme://user:***@` (a repository address may hold one)."""
    return _URL_PASSWORD.sub(lambda match: f"{match.group(1)}:***@", text)


def is_remote_uri(storage: str) -> bool:
    """Whether an index location is a LanceDB URI (object storage, shared by machines) rather than a folder."""
    return "://" in storage


def _without_nul(value: Any) -> Any:
    if "\x00" in str(value):
        raise ValueError("a path may not contain a NUL character")
    return value


# A file-system path as written in kb.toml (no file system accepts NUL in a name).
PathText = Annotated[str, AfterValidator(_without_nul)]
PathValue = Annotated[Path, AfterValidator(_without_nul), Field(strict=False)]  # written as text in TOML


class Strict(BaseModel):
    # strict: `top_k = "5"` or `watch = "yes"` is a mistake to report, not a value to guess at.
    # The text under each setting is its description, which the configuration reference (reference.py, docs/)
    # reads from the source: pydantic's use_attribute_docstrings would read it in every process (0.04 s of CPU).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
