"""The workbench through real MCP clients (stdio and streamable HTTP subprocesses, both protocol eras): search, read
the top hit's section and go on with the cursor, list documents and an outline, search across knowledge bases."""

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from helpers import write, text_of
from served import serve_http
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.anyio

LEAVE = (
    "# Leave\n\n## Annual leave\n\n"
    + "\n\n".join(
        f"Rule {n}: annual leave requests of type {n} go to the HR portal and your manager approves them."
        for n in range(60)
    )
    + "\n\n## Sick leave\n\nCall your manager before nine on the first day.\n"
)
API = "# API reference\n\n## getUserInfo\n\nError E5021 means the access token expired: request a new token.\n"


@pytest.fixture(scope="module")
def served_config(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Path:
    """Two KBs synced once, served with a search tool each and one across them."""
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    base = tmp_path_factory.mktemp("workbench")
    write(base / "policies" / "leave.md", LEAVE)
    write(base / "policies" / "travel.md", "# Travel\n\nBook trains in second class.\n")
    write(base / "api" / "users.md", API)
    config = base / "kb.toml"
    config.write_text(
        f'storage = "{base / "index"}"\n[server]\nsearch_tools = "both"\n'
        f'[[kb]]\nname = "policy_docs"\ndescription = "HR policies"\npaths = ["{base / "policies"}"]\n'
        f'[[kb]]\nname = "api_docs"\ndescription = "API reference"\npaths = ["{base / "api"}"]\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    return config


async def _journey(client: Client) -> None:
    """What a model does with the workbench, each step checked."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {
        "search_policy_docs",
        "search_api_docs",
        "search_knowledge_bases",
        "read_document",
        "list_documents",
    } <= set(tools)
    assert tools["read_document"].input_schema["properties"]["kb"]["enum"] == ["policy_docs", "api_docs"]
    assert "- api_docs: API reference." in (tools["search_knowledge_bases"].description or "")

    found = await client.call_tool("search_policy_docs", {"query": "who approves annual leave requests"})
    hit = found.structured_content["results"][0]
    assert hit["kb"] == "policy_docs" and hit["heading"] == "Leave › Annual leave"

    parts = [
        await client.call_tool(
            "read_document", {"kb": hit["kb"], "path": hit["source"], "section": hit["citation"], "max_tokens": 400}
        )
    ]
    while parts[-1].structured_content["cursor"]:
        parts.append(
            await client.call_tool(
                "read_document",
                {"kb": "policy_docs", "max_tokens": 400, "cursor": parts[-1].structured_content["cursor"]},
            )
        )
    texts = [part.structured_content["text"] for part in parts]
    assert len(parts) > 1 and not any(part.is_error for part in parts)
    assert texts[0].startswith("## Annual leave") and "Rule 59:" in texts[-1] and "Sick leave" not in "".join(texts)
    assert "cursor=" in text_of(parts[0].content[0]) and "lines 1-" not in text_of(parts[0].content[0])  # where it is

    listed = await client.call_tool("list_documents", {"kb": "policy_docs"})
    assert [d["path"] for d in listed.structured_content["documents"]] == ["leave.md", "travel.md"]
    outline = await client.call_tool("list_documents", {"kb": "policy_docs", "path": "leave.md", "outline": True})
    assert [e["heading"] for e in outline.structured_content["outline"]] == [
        "Leave",
        "Leave › Annual leave",
        "Leave › Sick leave",
    ]

    across = await client.call_tool("search_knowledge_bases", {"query": "E5021 access token expired"})
    top = across.structured_content["results"][0]
    assert (top["kb"], top["source"]) == ("api_docs", "users.md")
    assert text_of(across.content[0]).splitlines()[0].startswith("[1] api_docs: users.md")


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_stdio_client_searches_reads_on_lists_and_searches_across(served_config: Path, era: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(served_config)], env=os.environ.copy()
    )
    async with Client(params, mode=era) as client:
        await _journey(client)


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_an_http_client_searches_reads_on_lists_and_searches_across(served_config: Path, era: str) -> None:
    import httpx2

    env = {key: value for key, value in os.environ.items() if key != "MCP_KB_TOKEN"}
    with serve_http(served_config, "--transport", "http", env=env) as (port, _log):
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), mode=era) as client,
        ):
            await _journey(client)


async def test_bad_reads_are_one_clear_error_and_the_server_goes_on(served_config: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(served_config)], env=os.environ.copy()
    )
    async with Client(params) as client:
        asks: list[tuple[dict[str, Any], str]] = [
            ({"kb": "policy_docs", "path": "leave.md", "max_tokens": 10}, "max_tokens must be between"),
            ({"kb": "policy_docs", "path": "leave.md", "pages": "1; DROP"}, "pages"),
            ({"kb": "policy_docs", "cursor": "x" * 5000}, "cursor"),
            ({"kb": "policy_docs", "path": "leave.md", "section": "Nope"}, "no section 'Nope'"),
            ({"kb": "nope", "path": "leave.md"}, "unknown knowledge base 'nope'"),
        ]
        for arguments, message in asks:
            answer = await client.call_tool("read_document", arguments)
            assert answer.is_error and message in text_of(answer.content[0]), (arguments, text_of(answer.content[0]))
            assert "Traceback" not in text_of(answer.content[0]) and "lance" not in text_of(answer.content[0]).lower()
        listed = await client.call_tool("list_documents", {"kb": "policy_docs", "limit": 100_000})
        assert listed.is_error and "limit must be between 1 and 200" in text_of(listed.content[0])
        assert not (await client.call_tool("read_document", {"kb": "policy_docs", "path": "travel.md"})).is_error


async def test_with_many_kbs_one_search_tool_across_them_replaces_one_each(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.mcp.server import build_server

    kbs = []
    for n in range(9):  # one more than auto lists a tool each for
        write(tmp_path / f"kb{n}" / "doc.md", f"# Topic {n}\n\nThe code word of team {n} is falcon-{n}.\n")
        kbs.append({"name": f"team{n}", "description": f"Team {n}'s notes", "paths": [str(tmp_path / f"kb{n}")]})
    app = make_app(*kbs)
    app.sync()
    async with Client(build_server(app)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        instructions = client.instructions
        found = await client.call_tool("search_knowledge_bases", {"query": "code word of team 7", "kbs": ["team7"]})
        prompt = await client.get_prompt("answer_with_citations", {"question": "q", "kb": "team3"})
    assert set(tools) == {"search_knowledge_bases", "read_document", "list_documents", "sync_knowledge_base"}
    across = tools["search_knowledge_bases"].description
    assert across and all(f"- team{n}: Team {n}'s notes." in across for n in range(9))
    assert instructions and "search_knowledge_bases" in instructions and "search_team" not in instructions
    assert [hit["kb"] for hit in found.structured_content["results"]] == ["team7"]
    assert "search_knowledge_bases with kbs=['team3']" in text_of(prompt.messages[0].content)
    async with Client(build_server(make_app(*kbs[:8]))) as client:  # eight: one each too
        eight = {tool.name for tool in (await client.list_tools()).tools}
    async with Client(build_server(make_app(kbs[0]))) as client:  # one: its own tool is the search
        one = {tool.name for tool in (await client.list_tools()).tools}
    assert {f"search_team{n}" for n in range(8)} | {"search_knowledge_bases"} <= eight
    assert one == {"search_team0", "read_document", "list_documents", "sync_knowledge_base"}


async def test_the_search_across_kbs_describes_common_filters_in_no_kbs_own_words(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """One KB's wording of a field may speak of it to a caller who may not see it: the tool across KBs uses none."""
    from mcp_kb.mcp.server import build_server

    kbs = []
    for name, words in (("secret_hr", "Salary band of the reorganisation plan"), ("open_docs", "Who it is for")):
        write(tmp_path / name / "a.md", f"---\naudience: staff\n---\n# {name}\n\nSome text.\n")
        kbs.append(
            {
                "name": name,
                "description": name,
                "paths": [str(tmp_path / name)],
                "filterable": {"audience": {"type": "string", "description": words}},
            }
        )
    app = make_app(*kbs, server={"search_tools": "both"})
    async with Client(build_server(app)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        flood = await client.call_tool("search_knowledge_bases", {"query": "q", "kbs": ["open_docs"] * 1_001})
    across = str(tools["search_knowledge_bases"].input_schema)
    assert "audience" in across and "Salary band" not in across and "Who it is for" not in across
    assert "Salary band" in str(tools["search_secret_hr"].input_schema)  # the KB's own tool keeps its words
    assert flood.is_error and "kbs" in text_of(flood.content[0]) and len(text_of(flood.content[0])) < 300


async def test_every_view_of_a_document_reads_the_index_so_a_hostile_source_file_holds_no_request(
    tmp_path: Path, embedder: FastEmbedder
) -> None:
    """The document resource, read_document and the page's document view answer from the index: after the sync
    each source is swapped for a FIFO (opening one blocks until a writer comes, so a view that parsed the file
    would hang) and a PDF that would take a parser long; every view answers at once with the indexed text."""
    import httpx2

    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    write(tmp_path / "docs" / "leave.md", LEAVE)
    write(tmp_path / "docs" / "report.md", "# Report\n\nThe quarterly report is due on the fifth.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Docs"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    (tmp_path / "docs" / "leave.md").unlink()
    os.mkfifo(tmp_path / "docs" / "leave.md")
    (tmp_path / "docs" / "report.md").write_bytes(b"%PDF-1.7\n" + b"1 0 obj << /Length 999999999 >> stream\n" * 50_000)
    env = {key: value for key, value in os.environ.items() if key != "MCP_KB_TOKEN"}
    with serve_http(config, "--transport", "http", env=env) as (port, _log):
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
        ):
            resource = await client.read_resource("kb://docs/documents/leave.md")
            read = await client.call_tool("read_document", {"kb": "docs", "path": "report.md"})
            page = await http.get(f"http://127.0.0.1:{port}/ui/kb/docs/document", params={"path": "leave.md"})
    assert "Rule 59: annual leave requests" in text_of(resource.contents[0])
    assert not read.is_error and "quarterly report is due" in read.structured_content["text"]
    assert page.status_code == 200 and "Call your manager before nine" in page.text
