"""The configuration reference, written from the settings models themselves into docs/configuration.md
(`python -m mcp_kb.settings.reference` writes it again; a test fails while the page is not current): every key
of kb.toml with its default, its bounds, the variable that overrides it, and its description, the text under its
declaration. A setting without a description stops it."""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .config import Config
from .kb import (
    ChunkingConfig,
    FilterableField,
    HistoryConfig,
    KBConfig,
    LibraryVersion,
    RepoConfig,
    SearchConfig,
    SourceSettings,
    SyncConfig,
    WebSourceConfig,
)
from .providers import EMBEDDING_PROVIDERS, RERANK_PROVIDERS, EmbeddingConfig, RerankConfig
from .server import GroupGrant, OAuthConfig, ServerConfig, TokenGrant
from .storage import StorageConfig
from .sync import SyncEngineConfig

_NOT_IN_KB_TOML = {(Config, "source")}  # set by the loader
# Each table of kb.toml and the model of its keys, in the order the reference shows them.
_TABLES: list[tuple[str, type[BaseModel]]] = [
    ("[storage]", StorageConfig),
    ("[sync]", SyncEngineConfig),
    ("[server]", ServerConfig),
    ("[[server.tokens]]", TokenGrant),
    ("[server.oauth]", OAuthConfig),
    ("[[server.oauth.groups]]", GroupGrant),
    ("[[kb]]", KBConfig),
    ("[kb.chunking]", ChunkingConfig),
    ("[kb.search]", SearchConfig),
    ("[kb.sync]", SyncConfig),
    ("[kb.history]", HistoryConfig),
    ("[[kb.versions]]", LibraryVersion),
    ("[[kb.urls]]", WebSourceConfig),
    ("[[kb.repos]]", RepoConfig),
    ("[kb.filterable.FIELD]", FilterableField),
    ("[[kb.sources]]", SourceSettings),
]
_NESTED = (BaseModel,)
# Keys a provider declares again with its own default or meaning: listed with the provider too.
_OVERRIDDEN: dict[type[BaseModel], set[str]] = {}  # a key whose value is a table of its own is listed with that table


# Where the reference stands in docs/configuration.md: between these two lines.
BEGIN = "<!-- the settings reference: written by `python -m mcp_kb.settings.reference` from the settings models -->"
END = "<!-- end of the settings reference -->"


class MissingDescription(ValueError):
    """A setting without a description: the reference would not say what it does."""


def reference_markdown() -> str:
    """The reference as Markdown: a table per kb.toml table (the providers' own keys apart)."""
    parts = [_table("Top level: the tables", Config)]
    parts += [_table(title, model) for title, model in _TABLES[:3]]
    parts += [
        _provider_tables("[embedding]", EmbeddingConfig, EMBEDDING_PROVIDERS),
        _provider_tables("[rerank]", RerankConfig, RERANK_PROVIDERS),
    ]
    parts += [_table(title, model) for title, model in _TABLES[3:]]
    return "\n\n".join(parts) + "\n"


def _provider_tables(title: str, base: type[BaseModel], registry: Any) -> str:
    """The keys every provider has alike (`provider` among them), then each provider's own and those it
    declares with another default or meaning."""
    providers = {name: registry.settings(name) for name in registry.names()}
    alike = {
        name
        for name in base.model_fields
        if name == "provider" or all(_same(model, base, name) for model in providers.values())
    }
    tables = [_table(f"{title}, every provider", base, skip=set(base.model_fields) - alike)]
    tables += [_table(f'{title} with provider = "{name}"', model, skip=alike) for name, model in providers.items()]
    return "\n\n".join(tables)


def description(model: type[BaseModel], name: str) -> str:
    """What a setting does: its `Field(description=...)`, else the text under its declaration in the class that
    declares it ("" when there is none)."""
    declared_in = next((cls for cls in model.__mro__ if name in cls.__dict__.get("__annotations__", {})), model)
    return model.model_fields[name].description or _attribute_docstrings(declared_in).get(name, "")


@functools.cache
def _attribute_docstrings(cls: type) -> dict[str, str]:
    """The text under each annotated attribute in a class's own body."""
    try:
        [node] = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    except (OSError, TypeError, ValueError):  # no source to read
        return {}
    if not isinstance(node, ast.ClassDef):
        return {}
    return {
        statement.target.id: inspect.cleandoc(text.value.value)
        for statement, text in zip(node.body, node.body[1:])
        if isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and isinstance(text, ast.Expr)
        and isinstance(text.value, ast.Constant)
        and isinstance(text.value.value, str)
    }


def _same(model: type[BaseModel], other: type[BaseModel], name: str) -> bool:
    return (
        description(model, name) == description(other, name)
        and model.model_fields[name].default == other.model_fields[name].default
    )


def _table(title: str, model: type[BaseModel], skip: set[str] | None = None) -> str:
    rows = ["| key | default | description |", "|---|---|---|"]
    rows += [_row(name, field, text) for name, field, text in _fields(model) if name not in (skip or set())]
    return f"## {title}\n\n{(model.__doc__ or '').strip().splitlines()[0]}\n\n" + "\n".join(rows)


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo, str]]:
    for name, field in model.model_fields.items():
        if (model, name) in _NOT_IN_KB_TOML:
            continue
        text = description(model, name)
        if not text:
            raise MissingDescription(
                f"{model.__name__}.{name} has no description: write one under its declaration "
                f"(the configuration reference shows it)"
            )
        yield name, field, text


def _row(name: str, field: FieldInfo, text: str) -> str:
    notes = [" ".join(text.split())]
    bounds = _bounds(field)
    if bounds:
        notes.append(f"({bounds})")
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if extra.get("env"):
        notes.append(f"Env: `{extra['env']}`.")
    return f"| `{name}` | {_default(field)} | {' '.join(notes).replace('|', '&#124;')} |"


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default is PydanticUndefined:  # made when needed: its description says what it is
        factory = field.default_factory
        return "none" if factory in (dict, list) else "see description"
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "its table's defaults"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _bounds(field: FieldInfo) -> str:
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(
        f"{word} {getattr(item, bound)}"
        for item in field.metadata
        for bound, word in words.items()
        if getattr(item, bound, None) is not None
    )


def page_with_reference(page: str) -> str:
    """The docs page with the reference between its markers written anew."""
    pattern = re.compile(f"{re.escape(BEGIN)}\n.*?{re.escape(END)}", re.DOTALL)
    if not pattern.search(page):
        raise ValueError(f"the page has no place for the reference (a line {BEGIN!r}, then one {END!r})")
    return pattern.sub(lambda _: f"{BEGIN}\n\n{reference_markdown()}\n{END}", page)


if __name__ == "__main__":  # python -m mcp_kb.settings.reference [PAGE]: the page, with the reference current
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/configuration.md")
    target.write_text(page_with_reference(target.read_text(encoding="utf-8")), encoding="utf-8")
