import pytest

from mcp_kb.errors import SearchError
from mcp_kb.filters import and_where, build_where, glob_to_regex

TYPES = {"path": "string", "page": "integer", "doc_type": "string", "year": "integer", "score": "number",
         "draft": "boolean", "tags": "string[]", "published": "date"}


def test_equality_one_of_and_range():
    where = build_where({"doc_type": "policy", "year": {"gte": 2020, "lt": 2025}, "page": [1, 2]}, TYPES)
    assert where == "(doc_type = 'policy') AND (year >= 2020 AND year < 2025) AND (page IN (1, 2))"


def test_injection_string_is_bound_as_a_value():
    where = build_where({"doc_type": "x' OR 1=1 --"}, TYPES)
    assert where == "(doc_type = 'x'' OR 1=1 --')"


def test_unknown_field_lists_the_valid_ones():
    with pytest.raises(SearchError, match="unknown filter field 'colour'; valid fields: doc_type, draft"):
        build_where({"colour": "red"}, TYPES)


def test_wrong_value_type_is_an_error_not_sql():
    with pytest.raises(SearchError, match="expected a whole number"):
        build_where({"year": "2020; DROP TABLE"}, TYPES)
    with pytest.raises(SearchError, match="expected true or false"):
        build_where({"draft": "yes"}, TYPES)
    with pytest.raises(SearchError, match="YYYY-MM-DD"):
        build_where({"published": {"gte": "last week"}}, TYPES)


def test_path_prefix_and_glob():
    assert build_where({"path": {"prefix": "hr/"}}, TYPES) == "(starts_with(path, 'hr/'))"
    assert build_where({"path": {"glob": "hr/**/*.md"}}, TYPES) == r"(regexp_like(path, '^hr/(?:.*/)?[^/]*\.md$'))"


def test_list_fields_match_any_value():
    assert build_where({"tags": ["a", "b"]}, TYPES) == "(array_has_any(tags, ['a', 'b']))"
    assert build_where({"tags": "a"}, TYPES) == "(array_has(tags, 'a'))"


def test_range_on_text_field_is_refused():
    with pytest.raises(SearchError, match="needs a number or date field"):
        build_where({"doc_type": {"gt": 3}}, TYPES)


def test_static_and_caller_filters_are_and_merged():
    assert and_where("(a = 1)", None, "(b = 2)") == "((a = 1)) AND ((b = 2))"
    assert and_where(None, None) is None


def test_glob_regex_semantics():
    import re

    pattern = re.compile(glob_to_regex("docs/**/*.md"))
    assert pattern.match("docs/a.md") and pattern.match("docs/x/y/a.md")
    assert not pattern.match("docs/a.txt") and not pattern.match("other/docs/a.md")
