"""Metadata filters → a safe SQL predicate for LanceDB (filters written as text are read in requests.py).

A filter maps a field to a condition:
    {"doc_type": "policy"}                       equality
    {"doc_type": ["policy", "faq"]}              one of
    {"year": {"gte": 2020, "lt": 2025}}          numeric or date range (gt, gte, lt, lte)
    {"path": {"prefix": "hr/"}} / {"path": {"glob": "hr/**/*.md"}}
    {"path": {"prefix": "/tutorial/"}}          a leading "/": web pages by URL path, on any host (the
                                                 sources' rooted id patterns: what an id's root looks like)
    {"tags": "remote"} / {"tags": ["a", "b"]}    string[] fields: has any of
Field names are checked against the KB's known fields; values are always bound as literals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import SearchError
from ..requests import unknown_filter_field
from ..slices import sliced
from ..schema import FIELD_TYPES, INT64_MAX, INT64_MIN, RANGE_OPERATORS, TEXT_OPERATORS, FieldType

# Limits on what a caller may send: values beyond them are errors, never queries the engine chokes on.
MAX_TEXT_LENGTH = 1_000  # characters of one text value (a prefix, a glob, a title)
MAX_LIST_VALUES = 200  # values of one one-of list
_RANGE_OPERATORS = dict(zip(RANGE_OPERATORS, (">", ">=", "<", "<=")))  # as SQL writes them
_TEXT_OPERATORS = set(TEXT_OPERATORS)
_REGEX_META = set(".^$*+?()[]{}|\\")
_IN_LIST_BATCH = 500  # values in one `IN (...)` predicate (deletes and look-ups by path or content hash)


def build_where(filters: Mapping[str, object] | None, types: dict[str, str], rooted: Iterable[str] = ()) -> str | None:
    """AND of one predicate per field (`filters`: a request's JSON, a value or an operator object per field), or
    None when there is nothing to filter. `rooted`: regular
    expressions of what may come before a `path` pattern that starts with "/" (a web page's origin)."""
    if not filters:
        return None
    if not isinstance(filters, dict):
        raise SearchError("filters must be an object mapping field names to values")
    if not all(isinstance(field, str) for field in filters):
        raise SearchError("filter field names must be text")
    rooted = list(rooted)
    clauses = [_clause(field, condition, types, rooted) for field, condition in filters.items()]
    return " AND ".join(f"({clause})" for clause in clauses)


def and_where(*predicates: str | None) -> str | None:
    """AND-merge predicates (a KB's static filter and the caller's), skipping empty ones."""
    present = [p for p in predicates if p]
    return " AND ".join(f"({p})" for p in present) if present else None


def _clause(field: str, condition: Any, types: dict[str, str], rooted: Iterable[str]) -> str:
    if field not in types:
        raise SearchError(unknown_filter_field(field, types))
    kind = FIELD_TYPES[types[field]]
    if isinstance(condition, dict):
        return _operator_clause(field, types[field], condition, rooted)
    if isinstance(condition, list):
        if not condition:
            raise SearchError(f"filter {field!r}: an empty list matches nothing; give at least one value")
        if len(condition) > MAX_LIST_VALUES:
            raise SearchError(f"filter {field!r}: {len(condition)} values are too many (at most {MAX_LIST_VALUES})")
        values = ", ".join(_literal(v, kind, field) for v in condition)
        return f"array_has_any({field}, [{values}])" if kind.many else f"{field} IN ({values})"
    if kind.many:
        return f"array_has({field}, {_literal(condition, kind, field)})"
    return f"{field} = {_literal(condition, kind, field)}"


def _operator_clause(field: str, type_name: str, condition: Mapping[str, object], rooted: Iterable[str]) -> str:
    kind = FIELD_TYPES[type_name]
    unknown = set(condition) - set(_RANGE_OPERATORS) - _TEXT_OPERATORS
    if unknown or not condition:
        raise SearchError(
            f"filter {field!r}: unknown operator(s) {sorted(unknown)}; "
            f"use gt, gte, lt, lte (numbers, dates) or prefix, glob (text)"
        )
    clauses = []
    for operator, value in condition.items():
        if operator in _RANGE_OPERATORS:
            if not kind.ranges:
                raise SearchError(f"filter {field!r}: {operator} needs a number or date field, {field} is {type_name}")
            clauses.append(f"{field} {_RANGE_OPERATORS[operator]} {_literal(value, kind, field)}")
        elif not kind.text_match:
            raise SearchError(f"filter {field!r}: {operator} works on text fields only")
        else:
            clauses.append(_text_clause(field, operator, value, kind, rooted))
    return " AND ".join(clauses)


def _text_clause(field: str, operator: str, value: Any, kind: FieldType, rooted: Iterable[str]) -> str:
    literal = _literal(value, kind, field)  # checks the value's type and size
    if field == "path" and str(value).startswith("/") and rooted:  # below an id's root (file ids never start with "/")
        pattern = _escaped(str(value)) + ".*$" if operator == "prefix" else glob_to_regex(str(value))[1:]
        roots = "|".join(f"(?:{root.removeprefix('^')})" for root in rooted)
        return f"regexp_like(path, {sql_string(f'^(?:{roots})' + pattern)})"
    if operator == "prefix":
        return f"starts_with({field}, {literal})"
    return f"regexp_like({field}, {_literal(glob_to_regex(str(value)), kind, field)})"


def _literal(value: Any, kind: FieldType, field: str) -> str:
    """A SQL literal of the field's type; anything that does not fit is an error, never SQL."""
    if kind.python is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _is_whole(value):
            raise SearchError(f"filter {field!r}: expected a whole number, got {_shown(value)}")
        if not INT64_MIN <= int(value) <= INT64_MAX:
            raise SearchError(f"filter {field!r}: {_shown(value)} is out of range ({INT64_MIN}..{INT64_MAX})")
        return str(int(value))
    if kind.python is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _is_finite(value):
            raise SearchError(f"filter {field!r}: expected a finite number, got {_shown(value)}")
        return repr(float(value))
    if kind.python is bool:
        if not isinstance(value, bool):
            raise SearchError(f"filter {field!r}: expected true or false, got {_shown(value)}")
        return "true" if value else "false"
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise SearchError(f"filter {field!r}: expected text, got {_shown(value)}")
    text = str(value)
    if len(text) > MAX_TEXT_LENGTH:
        raise SearchError(
            f"filter {field!r}: a value of {len(text)} characters is too long (at most {MAX_TEXT_LENGTH})"
        )
    if "\x00" in text:
        raise SearchError(f"filter {field!r}: a value may not contain NUL characters")
    if kind.pattern and not re.fullmatch(kind.pattern, text):
        raise SearchError(f"filter {field!r}: expected {kind.hint}, got {_shown(value)}")
    return sql_string(text)


def sql_string(value: str) -> str:
    """A SQL text literal; the value can never end the literal early. The one place SQL text is quoted."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')` with values quoted safely."""
    return f"{column} IN ({', '.join(sql_string(v) for v in values)})"


def sql_in_batches(column: str, values: Sequence[str]) -> list[str]:
    """`column IN (...)` predicates of at most _IN_LIST_BATCH values each, which together name every value."""
    return [sql_in(column, some) for some in sliced(values, _IN_LIST_BATCH)]


def sql_any(predicates: Iterable[str]) -> str:
    """OR of predicates: one condition for what was built in batches (a commit deletes by one)."""
    return " OR ".join(f"({predicate})" for predicate in predicates)


def sql_equals(column: str, value: str | int) -> str:
    return f"{column} = {int(value) if isinstance(value, int) else sql_string(value)}"


def sql_near(spots: list[tuple[str, int]], n: int) -> str:
    """Chunks within `n` positions of each (path, chunk_index)."""
    return " OR ".join(
        f"({sql_equals('path', path)} AND chunk_index BETWEEN {int(index) - n} AND {int(index) + n})"
        for path, index in spots
    )


def sql_lapsed_lease(cutoff: float) -> str:
    """A lease row no one holds, or whose holder's last heartbeat is older than `cutoff` (epoch seconds)."""
    return f"holder = '' OR heartbeat < {float(cutoff)!r}"


def _is_finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _is_whole(value: int | float) -> bool:
    return isinstance(value, int) or (_is_finite(value) and float(value).is_integer())


def _shown(value: Any) -> str:
    """The value for an error message, cut short: a caller may send megabytes."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def glob_to_regex(pattern: str) -> str:
    """`**` any folders, `*` within one folder, `?` one character; anchored at both ends."""
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else _escaped(char))
        index += 1
    return "^" + "".join(out) + "$"


def _escaped(text: str) -> str:
    """Text as a regular expression matching itself."""
    return "".join("\\" + char if char in _REGEX_META else char for char in text)
