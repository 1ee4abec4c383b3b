"""Versions through a real MCP session (a stdio subprocess): a KB of two library versions answers each version's own
text, names its versions as the `version` enum and in its description, cites the version; a KB of one version has
no such argument; a search, a read and a listing as of an earlier version say which version answered."""

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from helpers import write, text_of
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def served_config(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Path:
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    base = tmp_path_factory.mktemp("versions")
    for version, flag in (("0.110", "response_model_exclude"), ("0.116", "response_model_skip")):
        write(
            base / version / "tutorial" / "response.md",
            f"# Response model\n\nTo leave fields out of the answer, pass `{flag}` to the path operation.\n",
        )
        write(
            base / version / "tutorial" / "first-steps.md",
            "# First steps\n\nCreate an app with `FastAPI()` and run it with uvicorn.\n",
        )
    write(base / "handbook" / "leave.md", "# Leave\n\nAnnual leave is twenty days.\n")
    config = base / "kb.toml"
    config.write_text(
        f'storage = "{base / "index"}"\n'
        f'[[kb]]\nname = "fastapi"\ndescription = "FastAPI documentation"\n'
        f'[[kb.versions]]\nname = "0.110"\npaths = ["{base / "0.110"}"]\n'
        f'[[kb.versions]]\nname = "0.116"\npaths = ["{base / "0.116"}"]\n'
        f'[[kb]]\nname = "handbook"\ndescription = "Staff handbook"\npaths = ["{base / "handbook"}"]\n',
        encoding="utf-8",
    )
    app = App(load_config(config), embedder=embedder)
    app.sync()
    write(base / "handbook" / "leave.md", "# Leave\n\nAnnual leave is thirty days.\n")
    app.sync()
    return config


def _params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
    )


async def test_a_kb_of_two_versions_answers_each_versions_own_text_and_names_them(served_config: Path) -> None:
    async with Client(_params(served_config)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["search_fastapi"].input_schema["properties"]["version"]
        assert schema["enum"] == ["0.110", "0.116"] and schema["default"] == "0.116"
        assert "Versions: 0.110, 0.116" in (tools["search_fastapi"].description or "")
        assert "version" not in tools["search_handbook"].input_schema["properties"]
        old = await client.call_tool("search_fastapi", {"query": "leave fields out of the answer", "version": "0.110"})
        new = await client.call_tool("search_fastapi", {"query": "leave fields out of the answer"})
        wrong = await client.call_tool("search_fastapi", {"query": "fields", "version": "9.9"})
        read = await client.call_tool("read_document", {"kb": "fastapi", "path": "0.110/tutorial/response.md"})
    old_hit, new_hit = old.structured_content["results"][0], new.structured_content["results"][0]
    assert old_hit["source"] == "0.110/tutorial/response.md" and "response_model_exclude" in old_hit["text"]
    assert new_hit["source"] == "0.116/tutorial/response.md" and "response_model_skip" in new_hit["text"]
    assert all(hit["source"].startswith("0.116/") for hit in new.structured_content["results"])
    assert wrong.is_error and "version: Input should be '0.110' or '0.116' (got '9.9')" in text_of(wrong.content[0])
    assert "response_model_exclude" in read.structured_content["text"]


async def test_search_read_and_list_as_of_an_earlier_version_say_which_answered(served_config: Path) -> None:
    async with Client(_params(served_config)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "as_of" in tools["search_handbook"].input_schema["properties"]
        then = await client.call_tool("search_handbook", {"query": "annual leave", "as_of": "1"})
        read = await client.call_tool("read_document", {"kb": "handbook", "path": "leave.md", "as_of": "1"})
        listed = await client.call_tool("list_documents", {"kb": "handbook", "as_of": "1"})
        unknown = await client.call_tool("search_handbook", {"query": "leave", "as_of": "release-9"})
    assert "twenty days" in then.structured_content["results"][0]["text"]
    assert then.structured_content["notes"][0].startswith("answered as of version 1")
    assert "twenty days" in read.structured_content["text"] and read.structured_content["as_of"].startswith("version 1")
    assert listed.structured_content["as_of"].startswith("version 1")
    assert unknown.is_error and "has no tag 'release-9'" in text_of(unknown.content[0])
