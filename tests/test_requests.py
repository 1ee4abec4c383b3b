"""The requests faces make of the core: bounds and wording written once, the same on every face."""

from typing import Any
from pathlib import Path

import click
import pytest

from mcp_kb.errors import SearchError
from mcp_kb.requests import SearchRequest, SyncRequest, bounds, option_help, parse_filters, parse_search
from helpers import MakeApp


def test_filters_written_as_text_parse_into_filter_objects() -> None:
    assert parse_filters(("doc_type=policy", "year>=2020", "year<2025", "page=1,2", "path^=hr/", "draft=true")) == {
        "doc_type": "policy",
        "year": {"gte": 2020, "lt": 2025},
        "page": [1, 2],
        "path": {"prefix": "hr/"},
        "draft": True,
    }
    with pytest.raises(SearchError, match="expected FIELD=VALUE"):
        parse_filters(("no operator",))


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"top_k": 500}, "top_k must be between 1 and 100, got 500"),
        (
            {"max_tokens": "12"},
            "max_tokens must be between 100 and 100000, got '12'",
        ),  # a form's text, read as a number
        ({"context": 9}, "context must be between 0 and 5, got 9"),
        ({"mode": "fuzzy"}, "unknown mode 'fuzzy'; use one of hybrid, vector, keyword, filter"),
        ({"min_score": float("nan")}, "min_score must be a finite number"),
        ({"colour": "red"}, "unknown argument 'colour'"),
        ({"top_k": "many"}, "top_k: Input should be a valid integer"),
    ],
)
def test_a_rejected_search_says_what_to_send_instead(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(SearchError) as rejected:
        parse_search({"query": "leave", **arguments})
    assert str(rejected.value).startswith(message)


def test_a_forms_text_numbers_are_read_as_numbers() -> None:
    assert parse_search({"query": "q", "top_k": "7", "max_tokens": "800"}).top_k == 7


def test_cli_help_states_the_same_bounds_as_the_tools() -> None:
    assert (
        option_help(SearchRequest, "top_k", "the KB's") == "Number of passages to return (1 to 100; default: the KB's)."
    )
    assert option_help(SyncRequest, "full").startswith("Rebuild from scratch")


# ---- every face's inputs come from the request models ---------------------------------------------------------

_SEARCH_OPTIONS = {
    "top_k": "--top-k",
    "mode": "--mode",
    "min_score": "--min-score",
    "context": "--context",
    "max_per_document": "--max-per-document",
    "max_tokens": "--max-tokens",
}


def _option(command: str, flag: str) -> click.Option:
    from mcp_kb.cli import main

    option = next(param for param in main.commands[command].params if flag in param.opts)
    assert isinstance(option, click.Option)
    return option


@pytest.mark.parametrize("field", sorted(_SEARCH_OPTIONS))
def test_a_cli_search_option_says_what_the_request_says(field: str) -> None:
    option = _option("search", _SEARCH_OPTIONS[field])
    description = SearchRequest.model_fields[field].description
    assert option.help and description and option.help.startswith(description)
    low, high = bounds(SearchRequest, field)
    if low is not None:
        assert f"({low} to {high}" in option.help


@pytest.mark.parametrize("field", ["full", "reembed", "allow_mass_delete", "wait"])
def test_a_cli_sync_option_has_the_requests_help_and_default(field: str) -> None:
    option = _option("sync", f"--{field.replace('_', '-')}")
    assert option.help == option_help(SyncRequest, field)
    assert option.default == SyncRequest.model_fields[field].default


@pytest.mark.anyio
async def test_the_mcp_tools_parameters_are_the_requests_fields_with_their_bounds_and_defaults(
    make_app: MakeApp, tmp_path: Path
) -> None:
    from mcp import Client

    from mcp_kb.mcp.server import build_server

    (tmp_path / "docs").mkdir()
    app = make_app({"name": "docs", "description": "Docs", "paths": [str(tmp_path / "docs")]})
    async with Client(build_server(app)) as client:
        tools = {tool.name: tool.input_schema["properties"] for tool in (await client.list_tools()).tools}
    search, sync = tools["search_docs"], tools["sync_knowledge_base"]
    for field in ("query", *_SEARCH_OPTIONS):
        assert search[field]["description"] == SearchRequest.model_fields[field].description, field
        low, high = bounds(SearchRequest, field)
        if low is not None:
            assert (search[field]["minimum"], search[field]["maximum"]) == (low, high), field
    assert search["context"]["default"] == SearchRequest.model_fields["context"].default
    declared_fields = {name: field for name, field in SyncRequest.model_fields.items() if not field.exclude}
    assert set(sync) == set(declared_fields)  # `by` (who asked) is the face's to set, never an argument
    for field, declared in declared_fields.items():
        assert sync[field]["description"] == declared.description and sync[field].get("default") == declared.default


@pytest.mark.parametrize("asked", ["²", "٣", "３", "1-²", "٣-٥"])
def test_pages_and_lines_are_ascii_digits_only(asked: str) -> None:
    """A superscript passed the range's pattern (`\\d` is any script's digit) and failed in int(): an internal error."""
    from pydantic import ValidationError

    from mcp_kb.requests import ReadRequest

    for field in ("pages", "lines"):
        with pytest.raises(ValidationError, match="should match pattern"):
            ReadRequest(kb="docs", path="a.md", **{field: asked})
    assert ReadRequest(kb="docs", path="a.md", pages=" 3 - 5 ").pages == " 3 - 5 "


@pytest.mark.parametrize("query", ["\udc80 text", "alpha \udcff", "annual leave \ud83d"])
def test_a_query_holding_a_lone_surrogate_is_one_clear_error(query: str) -> None:
    """JSON's "\\udc80" over HTTP, or a shell's undecodable byte on the command line, reached the tokenizer: an
    internal error (TypeError: TextInputSequence must be str), a traceback in the CLI."""
    from mcp_kb.settings import SearchConfig

    with pytest.raises(SearchError, match="^query holds a character that is not text .*send the words as Unicode"):
        SearchRequest(query=query).resolved(SearchConfig())


def test_numbers_on_the_command_line_are_ascii_digits_as_everywhere(tmp_path: Path) -> None:
    """click's integers took "１", "٣" and "1_0" (`mcp-kb tag --version １` tagged version 1)."""
    from click.testing import CliRunner

    from mcp_kb.cli import main

    runner = CliRunner()
    for given in ("１", "٣", "1_0", "²"):
        answer = runner.invoke(main, ["tag", "docs", "v1", "--version", given, "-c", str(tmp_path / "kb.toml")])
        assert answer.exit_code == 2 and "is not a number (digits 0-9)" in answer.output, answer.output
    answer = runner.invoke(main, ["search", "docs", "leave", "--top-k", "-1", "-c", str(tmp_path / "kb.toml")])
    assert "is not a number" not in answer.output  # a sign is left for the request's bounds to speak of
