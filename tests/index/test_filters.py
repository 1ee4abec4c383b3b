from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mcp_kb.errors import SearchError
from mcp_kb.index.filters import and_where, build_where, glob_to_regex

if TYPE_CHECKING:
    from lancedb.table import Table

TYPES = {
    "path": "string",
    "page": "integer",
    "doc_type": "string",
    "year": "integer",
    "score": "number",
    "draft": "boolean",
    "tags": "string[]",
    "published": "date",
}


def test_equality_one_of_and_range() -> None:
    where = build_where({"doc_type": "policy", "year": {"gte": 2020, "lt": 2025}, "page": [1, 2]}, TYPES)
    assert where == "(doc_type = 'policy') AND (year >= 2020 AND year < 2025) AND (page IN (1, 2))"


def test_injection_string_is_bound_as_a_value() -> None:
    where = build_where({"doc_type": "x' OR 1=1 --"}, TYPES)
    assert where == "(doc_type = 'x'' OR 1=1 --')"


def test_unknown_field_lists_the_valid_ones() -> None:
    with pytest.raises(SearchError, match="unknown filter field 'colour'; valid fields: doc_type, draft"):
        build_where({"colour": "red"}, TYPES)


def test_wrong_value_type_is_an_error_not_sql() -> None:
    with pytest.raises(SearchError, match="expected a whole number"):
        build_where({"year": "2020; DROP TABLE"}, TYPES)
    with pytest.raises(SearchError, match="expected true or false"):
        build_where({"draft": "yes"}, TYPES)
    with pytest.raises(SearchError, match="YYYY-MM-DD"):
        build_where({"published": {"gte": "last week"}}, TYPES)


def test_path_prefix_and_glob() -> None:
    assert build_where({"path": {"prefix": "hr/"}}, TYPES) == "(starts_with(path, 'hr/'))"
    assert build_where({"path": {"glob": "hr/**/*.md"}}, TYPES) == r"(regexp_like(path, '^hr/(?:.*/)?[^/]*\.md$'))"


def test_list_fields_match_any_value() -> None:
    assert build_where({"tags": ["a", "b"]}, TYPES) == "(array_has_any(tags, ['a', 'b']))"
    assert build_where({"tags": "a"}, TYPES) == "(array_has(tags, 'a'))"


def test_range_on_text_field_is_refused() -> None:
    with pytest.raises(SearchError, match="needs a number or date field"):
        build_where({"doc_type": {"gt": 3}}, TYPES)


def test_static_and_caller_filters_are_and_merged() -> None:
    assert and_where("(a = 1)", None, "(b = 2)") == "((a = 1)) AND ((b = 2))"
    assert and_where(None, None) is None


def test_glob_regex_semantics() -> None:
    import re

    pattern = re.compile(glob_to_regex("docs/**/*.md"))
    assert pattern.match("docs/a.md") and pattern.match("docs/x/y/a.md")
    assert not pattern.match("docs/a.txt") and not pattern.match("other/docs/a.md")


# ---- property: any value is either a clear SearchError or a predicate the engine runs ----------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["2024-01-31", "2024", "' OR 1=1 --", "**/*.md", "\\\\", "%", "\x00"]),
)
_conditions = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=4),
    st.dictionaries(st.sampled_from(["gt", "gte", "lt", "lte", "prefix", "glob", "eq"]), _scalars, max_size=3),
)
_filters = st.dictionaries(st.sampled_from(sorted(TYPES)), _conditions, max_size=3)


@pytest.fixture(scope="module")
def typed_table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A real LanceDB table with a column of every filter type."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path_factory.mktemp("filters")))
    data = pa.table(
        {
            "path": ["hr/a.md", "b.md"],
            "page": pa.array([1, 2], pa.int64()),
            "doc_type": ["policy", "faq"],
            "year": pa.array([2020, 2024], pa.int64()),
            "score": [0.5, 1.5],
            "draft": [True, False],
            "tags": [["a"], ["b", "c"]],
            "published": ["2024-01-01", "2023-05-06"],
        }
    )
    return db.create_table("typed", data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(filters=_filters)
def test_any_filter_is_refused_clearly_or_runs(typed_table: Table, filters: dict[str, Any]) -> None:
    try:
        where = build_where(filters, TYPES)
    except SearchError as error:
        assert len(str(error)) < 400  # a message, not an echo of a huge value
        return
    if where:
        typed_table.search().where(where).limit(None).to_list()
