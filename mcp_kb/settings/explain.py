"""Validation errors in words: pydantic's errors become one line each naming the file, the key (with a
KB's name), the fix or the nearest valid key, and the offending value unless it could be a secret."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..registry import Registry
from .config import Config
from .kb import SOURCE_KINDS, SourceSettings
from .values import redact_url
from .providers import DEFAULT_PROVIDER, EMBEDDING_PROVIDERS, RERANK_PROVIDERS, EmbeddingConfig, RerankConfig

# Keys whose values may be secrets (tokens, credentials, request headers): never echoed in an error.
_SECRET_BEARING = re.compile(r"token|secret|password|credential|key|options|headers", re.I)
_PICKED_BY_NAME = {
    EmbeddingConfig: (EMBEDDING_PROVIDERS, DEFAULT_PROVIDER),
    RerankConfig: (RERANK_PROVIDERS, DEFAULT_PROVIDER),
    SourceSettings: (SOURCE_KINDS, ""),
}


def chosen_settings(registry: Registry, default: str, section: Any) -> type[BaseModel] | None:
    """The settings model a table's provider (or kind) names, None when it names no known one."""
    name = section.get(registry.key, default) if isinstance(section, dict) else default
    try:
        return registry.settings(name)
    except ValueError:
        return None


def explain(exc: ValidationError, raw: Mapping[str, object], where: str) -> str:
    """Turn pydantic's errors into lines that name the key and the fix."""
    lines = []
    for error in exc.errors():
        location = [part for part in error["loc"] if not str(part).startswith("function-after")]
        key = _key_name(location, raw)
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key {key!r}{_did_you_mean(location, raw)}")
        elif error["type"] == "missing":
            lines.append(f"{where}: missing required key {key!r}")
        elif error["type"] == "list_type" and isinstance(error.get("input"), str) and not _SECRET_BEARING.search(key):
            name = key.rsplit(".", 1)[-1]  # the line to write: `paths = ["./docs"]`
            lines.append(
                f"{where}: {key}: a list is wanted, even of one: write "
                f"{name} = [{json.dumps(error['input'], ensure_ascii=False)}]"
            )
        else:
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {key + ': ' if key else ''}{message}{_shown_value(error.get('input'), key)}")
    return "\n".join(lines)


def _shown_value(value: Any, key: str) -> str:
    """The offending value, when it is one plain value of a key that cannot hold a secret: a whole
    table may hold a token or credentials, and so may any key named like one."""
    if isinstance(value, (dict, list, tuple, set)) or _SECRET_BEARING.search(key):
        return ""
    shown = redact_url(value) if isinstance(value, str) else value  # a repository address may hold a password
    return f" (got {shown!r})"


def _key_name(location: list[Any], raw: Mapping[str, object]) -> str:
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


def _did_you_mean(location: list[Any], raw: Mapping[str, object]) -> str:
    model: type[BaseModel] | None = Config
    node: Any = raw
    for index, part in enumerate(location[:-1]):
        node = node[part] if isinstance(node, (dict, list)) and _has(node, part) else None
        if isinstance(part, int) or model is None or str(part) not in model.model_fields:
            continue  # a list index, or a key of a mapping (e.g. a filterable field's name): same model
        model = _model_in(model.model_fields[str(part)].annotation)
        if model in _PICKED_BY_NAME:  # the settings of the provider (or kind) the table names
            item = node[location[index + 1]] if isinstance(node, list) and _has(node, location[index + 1]) else node
            model = chosen_settings(*_PICKED_BY_NAME[model], section=item)
    if model is None:
        return ""
    keys = [key for key in model.model_fields if key != "source"]  # `source` is set by the loader
    match = difflib.get_close_matches(str(location[-1]), keys, n=1)
    return f"; did you mean {match[0]!r}?" if match else f"; valid keys: {', '.join(keys)}"


def _has(node: Mapping[str, object] | list[object], part: object) -> bool:
    return part in node if isinstance(node, dict) else isinstance(part, int) and part < len(node)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found:
            return found
    return None
