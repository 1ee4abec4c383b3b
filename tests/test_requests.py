"""The requests faces make of the core: bounds and wording written once, the same on every face."""

import pytest

from mcp_kb.errors import SearchError
from mcp_kb.requests import SearchRequest, SyncRequest, option_help, parse_filters, parse_search


def test_filters_written_as_text_parse_into_filter_objects():
    assert parse_filters(("doc_type=policy", "year>=2020", "year<2025", "page=1,2", "path^=hr/", "draft=true")) == {
        "doc_type": "policy", "year": {"gte": 2020, "lt": 2025}, "page": [1, 2], "path": {"prefix": "hr/"},
        "draft": True}
    with pytest.raises(SearchError, match="expected FIELD=VALUE"):
        parse_filters(("no operator",))


@pytest.mark.parametrize("arguments, message", [
    ({"top_k": 500}, "top_k must be between 1 and 100, got 500"),
    ({"max_tokens": "12"}, "max_tokens must be between 100 and 100000, got '12'"),  # a form's text, read as a number
    ({"context": 9}, "context must be between 0 and 5, got 9"),
    ({"mode": "fuzzy"}, "unknown mode 'fuzzy'; use one of hybrid, vector, keyword, filter"),
    ({"min_score": float("nan")}, "min_score must be a finite number"),
    ({"colour": "red"}, "unknown argument 'colour'"),
    ({"top_k": "many"}, "top_k: Input should be a valid integer"),
])
def test_a_rejected_search_says_what_to_send_instead(arguments, message):
    with pytest.raises(SearchError) as rejected:
        parse_search({"query": "leave", **arguments})
    assert str(rejected.value).startswith(message)


def test_a_forms_text_numbers_are_read_as_numbers():
    assert parse_search({"query": "q", "top_k": "7", "max_tokens": "800"}).top_k == 7


def test_cli_help_states_the_same_bounds_as_the_tools():
    assert option_help(SearchRequest, "top_k", "the KB's") == "Number of passages to return (1 to 100; default: the KB's)."
    assert option_help(SyncRequest, "full").startswith("Rebuild from scratch")
