"""The tools' schemas: the search tool's output and per KB a filter model of exactly that KB's fields; the sync
tool's output.

Filter types come from the one schema (schema.py): what a type takes there (ranges,
prefix/glob, lists) is what the tool's JSON schema offers.
"""

# No `from __future__ import annotations`: pydantic builds these models from evaluated types.

from types import GenericAlias
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..api import BUILTIN_FILTERS, FIELD_TYPES, RANGE_OPERATORS, FieldType, request_errors, unknown_filter_field
from ..settings import KBConfig


class SyncOutput(BaseModel):
    """The sync tool's structured content (its text says the same in a sentence per knowledge base)."""

    reports: list[dict[str, Any]] = Field(  # pydantic's schema for a JSON object (Any keeps it as it is)
        description="One per knowledge base synced: files added, changed, deleted, "
        "unchanged and failed (each failure with its reason), chunks "
        "embedded and reused, seconds per stage"
    )
    summary: str = Field(description="The reports as `mcp-kb sync` prints them")


class _TextMatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: str | None = Field(None, description="Value starts with this text")
    glob: str | None = Field(None, description="Glob pattern: ** any folders, * within a folder")


def _range_model(value_type: type) -> type[BaseModel]:
    """{gt, gte, lt, lte} bounds; numbers are sent as JSON numbers of either kind."""
    bound = float if value_type in (int, float) else value_type
    # pydantic's create_model takes its field definitions so
    bounds: dict[str, Any] = {op: (bound | None, Field(None, description=f"{op} bound")) for op in RANGE_OPERATORS}
    return create_model(f"{bound.__name__.capitalize()}Range", __config__=ConfigDict(extra="forbid"), **bounds)


_RANGES = {python: _range_model(python) for python in {kind.python for kind in FIELD_TYPES.values() if kind.ranges}}


def _condition(kind: FieldType) -> Any:
    """What a caller may send for a field of this type: a value, a list (one of / any of), a range, a text match."""
    options: list[Any] = [kind.python, GenericAlias(list, (kind.python,))]  # list[kind.python], built at run time
    if kind.ranges:
        options.append(_RANGES[kind.python])
    if kind.text_match:
        options.append(_TextMatch)
    return Union[tuple(options)]  # noqa: UP007  # a union of types known at run time


def filters_model(kb: KBConfig) -> type[BaseModel]:
    """A model whose fields are exactly the KB's filterable fields, with types and the KB's descriptions."""
    described = {name: spec.description for name, spec in kb.filterable.items() if spec.description}
    return _filters_model(kb.name, kb.filter_field_types(), described)


def common_filters_model(types: dict[str, str]) -> type[BaseModel]:
    """The filters of a search across KBs: the fields all of them have, described in general words only (one KB's
    own description could speak of a KB the caller may not see)."""
    return _filters_model("common", types, {})


def _filters_model(owner: str, types: dict[str, str], described: dict[str, str]) -> type[BaseModel]:
    fields: dict[str, Any] = {}  # pydantic's create_model takes its field definitions so
    for field, kind in types.items():
        description = described.get(field) or BUILTIN_FILTERS.get(field) or f"Metadata field {field} ({kind})"
        fields[field] = (_condition(FIELD_TYPES[kind]) | None, Field(None, description=description))
    return create_model(f"{owner}_filters", __config__=ConfigDict(extra="forbid"), **fields)


def expected_condition(kind: FieldType) -> str:
    """How to write a condition on a field of this type, for error messages."""
    shapes = [kind.hint]
    if kind.python is not bool:
        shapes.append("a list of them (any of)")
    if kind.ranges:
        example = '"2024-01-01"' if kind.python is str else "2020"
        shapes.append(f'a range like {{"gte": {example}}}')
    if kind.text_match:
        shapes.append('{"prefix": "..."} or {"glob": "docs/**/*.md"}')
    return ", ".join(shapes[:-1]) + f" or {shapes[-1]}" if len(shapes) > 1 else shapes[0]


def argument_errors(error: ValidationError, model: type[BaseModel], types: dict[str, str] | None = None) -> str:
    """A tool's rejected arguments, worded as every face words them: `model` is its request, `types` the filter
    fields of a search tool."""
    if types is None:
        return request_errors(error, model)

    def filter_error(field: str) -> str:
        if field in types:
            return f"filter {field!r} expects {expected_condition(FIELD_TYPES[types[field]])}"
        return unknown_filter_field(field, types)

    return request_errors(error, model, filter_error)
