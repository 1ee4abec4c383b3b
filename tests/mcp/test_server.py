"""The MCP server through real client sessions: in-memory, stdio subprocess, streamable HTTP."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from mcp_kb.api import SyncProgress, SyncRequest
from helpers import write, text_of
from served import serve_http
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PromptReference, ResourceLink, ResourceTemplateReference, TextContent

from mcp_kb.app import App
from mcp_kb.mcp.server import build_server
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.settings import FastembedSettings

pytestmark = pytest.mark.anyio

POLICY = """---
doc_type: policy
year: 2024
---
# Leave

## Annual leave

Apply for annual leave in the HR portal two weeks ahead; your manager approves the request
and the days come off your yearly allowance. Unused days carry over until the end of March.
"""
API = """# API reference

## getUserInfo

getUserInfo returns the profile of the signed-in user. Error E5021 means the access token expired:
request a new token from the auth service and retry the call with it.
"""


def _write_folders(base: Path) -> Path:
    write(base / "policies" / "leave.md", POLICY)
    write(base / "api" / "users.md", API)
    return base


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    return _write_folders(tmp_path)


def _kbs(folders: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": "policy_docs",
            "description": "HR policies: leave, travel. 人事制度",
            "paths": [str(folders / "policies")],
            "filterable": {
                "doc_type": {"type": "string", "description": "Kind of document"},
                "year": {"type": "integer", "description": "Year it took effect"},
            },
        },
        {"name": "api_docs", "description": "API reference for developers", "paths": [str(folders / "api")]},
    ]


@pytest.fixture
def app(make_app: MakeApp, folders: Path) -> App:
    app = make_app(*_kbs(folders))
    app.sync()
    return app


@asynccontextmanager
async def _client(app: App, **options: Any) -> AsyncIterator[Client]:
    async with Client(build_server(app, **options)) as client:
        yield client


async def test_one_search_tool_per_kb_with_its_filter_schema(app: App) -> None:
    async with _client(app) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {
        "search_policy_docs",
        "search_api_docs",
        "sync_knowledge_base",
        "read_document",
        "list_documents",
        "search_knowledge_bases",
    }
    policy = tools["search_policy_docs"]
    assert policy.description and policy.output_schema and policy.annotations
    assert (
        policy.description.startswith("HR policies: leave, travel.")
        and "Holds 1 documents (1 md)" in policy.description
    )
    schema = policy.input_schema
    assert schema["required"] == ["query"]
    filters_ref = schema["properties"]["filters"]["anyOf"][0]["$ref"].split("/")[-1]
    filter_fields = schema["$defs"][filters_ref]["properties"]
    assert {"doc_type", "year", "path", "title", "page"} <= set(filter_fields)
    assert filter_fields["year"]["description"] == "Year it took effect"
    arguments = schema["properties"]
    assert arguments["max_per_document"]["default"] == 2 and arguments["max_tokens"]["default"] == 4000
    assert "budget" in arguments["max_tokens"]["description"]
    assert {"chunk_count", "page_end", "trimmed"} <= set(policy.output_schema["$defs"]["Hit"]["properties"])
    assert policy.output_schema["properties"]["results"]["type"] == "array"
    assert policy.annotations.read_only_hint is True


async def test_search_returns_structured_results_and_cited_text(app: App) -> None:
    async with _client(app) as client:
        result = await client.call_tool("search_policy_docs", {"query": "how to apply for annual leave", "top_k": 2})
    assert not result.is_error
    first = result.structured_content["results"][0]
    assert first["source"] == "leave.md" and first["heading"] == "Leave › Annual leave"
    assert {"source", "title", "heading", "page", "chunk_index", "score", "text"} <= set(first)
    assert text_of(result.content[0]).startswith("[1] leave.md › Leave › Annual leave")


async def test_every_hit_links_to_its_document_and_the_link_opens_it(make_app: MakeApp, tmp_path: Path) -> None:
    names = ["a b#c?.md", "团队/年假 100%.md", "plain.md"]
    for name in names:
        write(
            tmp_path / "odd" / name, f"# Leave\n\nAnnual leave rules, as {name} states them: apply two weeks ahead.\n"
        )
    app = make_app({"name": "odd", "description": "Odd names", "paths": [str(tmp_path / "odd")]})
    app.sync()
    async with _client(app) as client:
        result = await client.call_tool("search_odd", {"query": "annual leave rules", "top_k": 3})
        text, *parts = result.content
        links = [link for link in parts if isinstance(link, ResourceLink)]
        assert isinstance(text, TextContent) and links == parts
        opened = {link.name: text_of((await client.read_resource(link.uri)).contents[0]) for link in links}
    hits = result.structured_content["results"]
    assert [link.type for link in links] == ["resource_link"] * len(hits) == ["resource_link"] * 3
    assert [link.name for link in links] == [hit["source"] for hit in hits] and set(opened) == set(names)
    assert all(f"as {name} states them" in opened[name] for name in names)
    assert links[0].title and links[0].title.startswith("[1] ") and text.text.startswith("[1] ")


async def test_the_server_and_its_tools_carry_titles_icons_and_instructions_naming_the_kbs(app: App) -> None:
    async with _client(app) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        server = client.server_info
        instructions = client.instructions
    assert server and server.title and server.icons and server.icons[0].src.startswith("data:image/svg+xml;base64,")
    for tool in tools.values():
        assert tool.title and tool.icons and tool.icons[0].src.startswith("data:image/svg+xml;base64,")
    assert instructions and "search_policy_docs: HR policies: leave, travel." in instructions
    assert "search_api_docs: API reference for developers." in instructions and "read_document" in instructions


async def test_search_with_filters_through_the_tool(app: App) -> None:
    async with _client(app) as client:
        hit = await client.call_tool("search_policy_docs", {"query": "leave", "filters": {"year": {"gte": 2024}}})
        miss = await client.call_tool("search_policy_docs", {"query": "leave", "filters": {"year": {"lt": 2000}}})
    assert hit.structured_content["results"] and miss.structured_content["results"] == []
    assert "No passages found" in text_of(miss.content[0])


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"query": "leave", "mode": "fuzzy"}, "mode"),
        ({"query": "leave", "filters": {"colour": "red"}}, "colour"),
        ({"query": ""}, "query is empty"),
        ({"query": "leave", "top_k": 500}, "top_k"),
        (
            {"query": "leave", "top_k": "5"},
            "top_k: Input should be a valid integer (got '5')",
        ),  # strict, like the config
    ],
)
async def test_bad_arguments_are_tool_errors_and_the_server_keeps_serving(
    app: App, arguments: dict[str, Any], message: str
) -> None:
    async with _client(app) as client:
        bad = await client.call_tool("search_policy_docs", arguments)
        good = await client.call_tool("search_policy_docs", {"query": "annual leave"})
    assert bad.is_error and message in text_of(bad.content[0])
    assert not good.is_error and good.structured_content["results"]


async def test_every_tool_error_is_the_message_alone(app: App) -> None:
    async with _client(app) as client:
        errors = [
            text_of((await client.call_tool(name, arguments)).content[0])
            for name, arguments in [
                ("sync_knowledge_base", {"kb": "nope"}),
                ("sync_knowledge_base", {"kb": "api_docs", "full": "yes"}),
                ("search_policy_docs", {"query": "leave", "min_score": "high"}),
            ]
        ]
    assert errors == [
        "unknown knowledge base 'nope'; configured: policy_docs, api_docs",
        "full: Input should be a valid boolean (got 'yes')",
        "min_score: Input should be a valid number (got 'high')",
    ]


async def test_unsynced_kb_says_how_to_fix_it(make_app: MakeApp, folders: Path) -> None:
    app = make_app(*_kbs(folders))
    async with _client(app) as client:
        result = await client.call_tool("search_api_docs", {"query": "token"})
    assert result.is_error and "mcp-kb sync api_docs" in text_of(result.content[0])


async def test_sync_tool_sends_progress_and_returns_the_report(app: App, folders: Path) -> None:
    write(
        folders / "api" / "errors.md", "# Errors\n\nE7001 means the quota is exhausted; wait an hour before retrying.\n"
    )
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with _client(app) as client:
        result = await client.call_tool("sync_knowledge_base", {"kb": "api_docs"}, progress_callback=on_progress)
        found = await client.call_tool("search_api_docs", {"query": "E7001", "mode": "keyword"})
    assert not result.is_error
    report = result.structured_content["reports"][0]
    assert report["kb"] == "api_docs" and report["files_added"] == 1 and report["chunks_embedded"] == 1
    assert result.structured_content["summary"].startswith("api_docs: 1 added, 0 changed, 0 deleted, ")
    # the text an LLM reads is a sentence, not the record's JSON (40 lines for one KB)
    [text] = [text_of(part) for part in result.content]
    assert re.fullmatch(r"api_docs: 1 added, 0 changed, 0 deleted, 1 unchanged, 0 failed, in \d+\.\d s\.", text), text
    assert updates and updates[-1][0] == updates[-1][1] == 1
    assert found.structured_content["results"][0]["source"] == "errors.md"


async def test_read_only_hides_the_sync_tool(app: App) -> None:
    async with _client(app, read_only=True) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "sync_knowledge_base" not in names


async def test_status_resources(app: App) -> None:
    async with _client(app) as client:
        listing = json.loads(text_of((await client.read_resource("kb://knowledge-bases")).contents[0]))
        status = json.loads(text_of((await client.read_resource("kb://policy_docs/status")).contents[0]))
    assert [kb["name"] for kb in listing] == ["policy_docs", "api_docs"]
    assert status["files"] == 1 and status["chunks"] >= 1 and status["last_outcome"] == "ok"
    assert status["sync_running"] is False
    assert status["model"]["dimension"] == 384 and status["index_version"] > 0


async def test_metrics_resource_counts_tool_searches_and_matches_the_saved_stats(app: App) -> None:
    async with _client(app) as client:
        for query in ("annual leave", "annual leave", "quarterly yak shaving"):
            await client.call_tool("search_policy_docs", {"query": query, "mode": "keyword"})
        metrics = json.loads(text_of((await client.read_resource("kb://policy_docs/metrics")).contents[0]))
    search = metrics["search"]
    assert search["searches"] == 3 and search["cache_hit_rate"] > 0 and search["zero_result_queries"] == 1
    assert search["latency_ms"]["keyword"]["count"] == 2 and metrics["last_sync"]["chunks_embedded"] >= 1
    assert app.stats("policy_docs")[0].as_dict() == metrics  # what `mcp-kb stats` shows


async def test_document_resource_and_traversal_refused(app: App) -> None:
    async with _client(app) as client:
        text = text_of((await client.read_resource("kb://api_docs/documents/users.md")).contents[0])
        assert text.startswith("# API reference\n\n## getUserInfo\n\ngetUserInfo returns the profile")
        for uri in ("kb://api_docs/documents/../policies/leave.md", "kb://api_docs/documents/%2Fetc%2Fpasswd"):
            with pytest.raises(MCPError):
                await client.read_resource(uri)
        with pytest.raises(MCPError, match="knowledge base 'api_docs' has no document"):
            await client.read_resource("kb://api_docs/documents/missing.md")
        with pytest.raises(MCPError, match="unknown knowledge base 'nope'"):
            await client.read_resource("kb://nope/status")


async def test_answer_with_citations_prompt(app: App) -> None:
    async with _client(app) as client:
        prompt = await client.get_prompt("answer_with_citations", {"question": "年假怎么请？", "kb": "policy_docs"})
    text = text_of(prompt.messages[0].content)
    assert "search_policy_docs" in text and "[1]" in text and "年假怎么请？" in text
    assert "say so" in text


async def test_a_prompt_asked_for_wrongly_is_the_callers_mistake_with_the_reason(app: App) -> None:
    async with _client(app) as client:
        for name, arguments, reason in [
            ("nosuch", {}, "Unknown prompt: nosuch"),
            ("answer_with_citations", {}, "Missing required arguments: {'question'}"),
            ("answer_with_citations", {"question": "q", "kb": "nope"}, "unknown knowledge base 'nope'"),
        ]:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            assert refused.value.error.code == INVALID_PARAMS and reason in refused.value.error.message


async def test_clients_complete_kb_names_and_document_paths(app: App) -> None:
    prompt = PromptReference(type="ref/prompt", name="answer_with_citations")
    document = ResourceTemplateReference(type="ref/resource", uri="kb://{name}/documents/{+path}")
    status = ResourceTemplateReference(type="ref/resource", uri="kb://{name}/status")
    async with _client(app) as client:

        async def values(
            ref: PromptReference | ResourceTemplateReference, argument: str, value: str, **context: str
        ) -> list[str]:
            answer = await client.complete(ref, {"name": argument, "value": value}, context_arguments=context or None)
            return answer.completion.values

        assert await values(prompt, "kb", "") == ["api_docs", "policy_docs"]
        assert await values(prompt, "kb", "pol") == ["policy_docs"]
        assert await values(status, "name", "a") == ["api_docs"]
        assert await values(document, "path", "", name="policy_docs") == ["leave.md"]
        assert await values(document, "path", "x", name="policy_docs") == []
        assert await values(document, "path", "", name="nope") == []
        assert await values(prompt, "question", "") == []  # free text: nothing to offer


async def test_status_subscribers_are_notified_after_a_sync(app: App) -> None:
    async with _client(app) as client:
        async with client.listen(resource_subscriptions=["kb://api_docs/status"]) as subscription:
            await client.call_tool("sync_knowledge_base", {"kb": "api_docs"})
            with anyio.fail_after(10):
                event = await subscription.__anext__()
    assert getattr(event, "uri", None) == "kb://api_docs/status"


# ---- subprocess transports ----------------------------------------------------------------------


def _config_file(folders: Path, storage: str) -> Path:
    path = folders / "kb.toml"
    lines = [f'storage = "{storage}"']
    for kb in _kbs(folders):
        lines += [
            "[[kb]]",
            f'name = "{kb["name"]}"',
            f'description = "{kb["description"]}"',
            f'paths = ["{kb["paths"][0]}"]',
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def test_the_stdio_server_starts_where_posix_only_modules_are_missing(app: App, folders: Path) -> None:
    """Windows has no `resource` module: the stdio server never needs it (the HTTP connection cap does)."""
    config = _config_file(folders, app.config.storage.uri)
    without_resource = (
        "import sys, runpy; sys.modules['resource'] = None; "  # `import resource` now fails
        f"sys.argv = ['mcp-kb', 'serve', '-c', {str(config)!r}]; runpy.run_module('mcp_kb', "
        "run_name='__main__')"
    )
    params = StdioServerParameters(command=sys.executable, args=["-c", without_resource], env=os.environ.copy())
    async with Client(params) as client:
        result = await client.call_tool("search_api_docs", {"query": "E5021 token expired"})
    assert not result.is_error and result.structured_content["results"][0]["source"] == "users.md"


async def test_stdio_subprocess_session(app: App, folders: Path) -> None:
    config = _config_file(folders, app.config.storage.uri)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("search_api_docs", {"query": "E5021 token expired"})
        status = json.loads(text_of((await client.read_resource("kb://api_docs/status")).contents[0]))
    assert {
        "search_policy_docs",
        "search_api_docs",
        "sync_knowledge_base",
        "read_document",
        "list_documents",
        "search_knowledge_bases",
    } == names
    assert not result.is_error, text_of(result.content[0])
    assert result.structured_content["results"][0]["source"] == "users.md"
    assert status["files"] == 1


@contextmanager
def _served(
    app: App, folders: Path, transport: str, host: str = "127.0.0.1", token: str | None = "s3cret-token"
) -> Iterator[tuple[int, Callable[[], str]]]:
    """`mcp-kb serve --transport TRANSPORT --port 0` in a subprocess; yields the port it printed and a
    function reading its stderr."""
    config = _config_file(folders, app.config.storage.uri)
    env = (
        {**os.environ, "MCP_KB_TOKEN": token} if token else {k: v for k, v in os.environ.items() if k != "MCP_KB_TOKEN"}
    )
    with serve_http(config, "--transport", transport, "--host", host, env=env) as served:
        yield served


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> tuple[App, Path]:
    """The two KBs synced once, for the tests that only read them over HTTP (a server start costs seconds)."""
    from mcp_kb.settings import build_config

    folders = _write_folders(tmp_path_factory.mktemp("served"))
    app = App(build_config({"storage": str(folders / "index"), "kb": _kbs(folders)}, folders, None), embedder=embedder)
    app.sync()
    return app, folders


@pytest.fixture(scope="module")
def http_server(synced: tuple[App, Path]) -> Iterator[str]:
    with _served(*synced, "http") as (port, _stderr):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def sse_server(synced: tuple[App, Path]) -> Iterator[str]:
    with _served(*synced, "sse") as (port, _stderr):
        yield f"http://127.0.0.1:{port}/sse"


async def test_http_rejects_requests_without_the_token(http_server: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        wrong = await http.post(http_server, json={}, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401 and wrong.status_code == 401


async def test_http_session_with_the_token(http_server: str) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}, timeout=60)
    async with Client(streamable_http_client(http_server, http_client=http)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("search_policy_docs", {"query": "annual leave"})
    assert "search_policy_docs" in names and result.structured_content["results"][0]["source"] == "leave.md"


@pytest.mark.parametrize("era", ["legacy", "auto"])  # 2025-era clients are the ones that send session ids
async def test_two_stateless_replicas_behind_a_round_robin_balancer_serve_one_client(
    synced: tuple[App, Path], era: str
) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from round_robin import round_robin

    app, folders = synced
    config = _config_file(folders, app.config.storage.uri)
    env = {**os.environ, "MCP_KB_TOKEN": "s3cret-token"}
    replica = ("--transport", "http", "--stateless", "--read-only")
    with serve_http(config, *replica, env=env) as (first, _), serve_http(config, *replica, env=env) as (second, _):
        backends = [f"http://127.0.0.1:{first}", f"http://127.0.0.1:{second}"]
        with round_robin(backends) as (balancer, served):
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}, timeout=60)
            async with Client(streamable_http_client(f"{balancer}/mcp", http_client=http), mode=era) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                results = [
                    await client.call_tool(tool, {"query": query})
                    for tool, query in [("search_policy_docs", "annual leave"), ("search_api_docs", "E5021")] * 3
                ]
                status = json.loads(text_of((await client.read_resource("kb://api_docs/status")).contents[0]))
    assert names == {
        "search_policy_docs",
        "search_api_docs",
        "read_document",
        "list_documents",
        "search_knowledge_bases",
    }  # no sync tool
    assert all(not r.is_error and r.structured_content["results"] for r in results)
    assert status["files"] == 1
    assert min(served[b] for b in backends) >= 4  # the calls really alternated between the replicas


async def test_2025_era_clients_subscribe_with_resources_subscribe(app: App) -> None:
    import warnings

    updated = []
    arrived = anyio.Event()

    async def on_message(message: object) -> None:
        uri = getattr(getattr(message, "params", None), "uri", None)
        if uri is not None:
            updated.append(str(uri))
            arrived.set()

    async with Client(build_server(app), mode="legacy", message_handler=on_message) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the SDK marks resources/subscribe deprecated for 2026 clients
            await client.subscribe_resource("kb://policy_docs/status")
        await client.call_tool("sync_knowledge_base", {"kb": "policy_docs"})
        with anyio.fail_after(10):
            await arrived.wait()
    assert updated == ["kb://policy_docs/status"]


async def test_http_refuses_foreign_host_headers(http_server: str) -> None:
    """DNS-rebinding protection: a page on another origin cannot drive the local server."""
    headers = {
        "Authorization": "Bearer s3cret-token",
        "Host": "attacker.example",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
        evil_origin = await http.post(
            http_server,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={**headers, "Host": httpx.URL(http_server).netloc.decode(), "Origin": "http://attacker.example"},
        )
    assert response.status_code in (400, 403, 421)
    assert evil_origin.status_code in (400, 403)


async def test_sse_session_with_the_token(sse_server: str) -> None:
    from mcp.client.sse import sse_client

    async with httpx.AsyncClient() as http:
        refused = await http.get(sse_server)
    assert refused.status_code == 401
    async with Client(sse_client(sse_server, headers={"Authorization": "Bearer s3cret-token"})) as client:
        result = await client.call_tool("search_api_docs", {"query": "getUserInfo"})
    assert result.structured_content["results"][0]["source"] == "users.md"


async def test_tool_description_follows_what_the_kb_holds(app: App, folders: Path) -> None:
    write(folders / "api" / "more.md", "# More\n\nAnother page about webhooks and their retry policy.\n")
    async with Client(build_server(app)) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("sync_knowledge_base", {"kb": "api_docs"})
            with anyio.fail_after(10):
                await subscription.__anext__()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "Holds 2 documents (2 md)" in (tools["search_api_docs"].description or "")


_PING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def test_http_accepts_the_bearer_scheme_in_any_case(http_server: str) -> None:
    async with httpx.AsyncClient() as http:
        lower = await http.post(http_server, json=_PING, headers={**_JSON, "Authorization": "bearer s3cret-token"})
        upper = await http.post(http_server, json=_PING, headers={**_JSON, "Authorization": "BEARER s3cret-token"})
        refused = await http.post(http_server, json=_PING)
    assert lower.status_code == upper.status_code == 200
    assert refused.status_code == 401 and "Authorization: Bearer" in refused.text


async def test_binding_every_address_keeps_rebinding_protection_and_warns_without_a_token(
    app: App, folders: Path
) -> None:
    with _served(app, folders, "http", host="0.0.0.0", token=None) as (port, stderr):
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient() as http:
            foreign = await http.post(url, json=_PING, headers={**_JSON, "Host": "attacker.example"})
            origin = await http.post(url, json=_PING, headers={**_JSON, "Origin": "http://attacker.example"})
            local = await http.post(url, json=_PING, headers=_JSON)
        warning = stderr()
    assert foreign.status_code == 421 and origin.status_code == 403
    assert local.status_code == 200
    assert "WITHOUT A TOKEN" in warning and "MCP_KB_TOKEN" in warning


def test_allowed_hosts_let_a_network_name_through() -> None:
    from mcp_kb.http.network import rebinding_protection

    settings = rebinding_protection("0.0.0.0", ["kb.internal"])
    assert {"kb.internal", "kb.internal:*", "127.0.0.1:*"} <= set(settings.allowed_hosts)
    assert "http://kb.internal:*" in settings.allowed_origins and settings.enable_dns_rebinding_protection


@pytest.mark.parametrize(
    "filters, message",
    [
        ({"year": 1e23}, "filter 'year' expects a whole number"),  # refused by the tool's schema
        ({"page": 2**70}, "out of range"),
        ({"year": {"gte": 1e300}}, "out of range"),
        ({"path": {"glob": "*" * 1_000_000}}, "too long"),
        ({"doc_type": ["x"] * 1000}, "too many"),
    ],
)
async def test_out_of_range_filter_values_are_clear_tool_errors(
    app: App, filters: dict[str, Any], message: str
) -> None:
    async with _client(app) as client:
        bad = await client.call_tool("search_policy_docs", {"query": "leave", "filters": filters})
        good = await client.call_tool("search_policy_docs", {"query": "annual leave"})
    assert bad.is_error and message in text_of(bad.content[0])
    assert "internal error" not in text_of(bad.content[0]) and "lance" not in text_of(bad.content[0])
    assert not good.is_error


@pytest.mark.parametrize(
    "path", ["drafts/plan.md", ".hidden/notes.md", ".env.md", "build/out.md", "big.md", "passwd.md"]
)
async def test_document_resource_obeys_the_kbs_rules(
    make_app: MakeApp, folders: Path, tmp_path: Path, path: str
) -> None:
    root = folders / "api"
    write(root / "drafts" / "plan.md", "# Plan")
    write(root / ".hidden" / "notes.md", "# Notes")
    write(root / ".env.md", "TOKEN=1")
    write(root / ".gitignore", "build/\n")
    write(root / "build" / "out.md", "# Out")
    write(root / "big.md", "# Big\n\n" + "x" * 2_000_000)
    os.symlink("/etc/passwd", root / "passwd.md")
    kbs = _kbs(folders)
    kbs[1] = {**kbs[1], "exclude": ["drafts/"], "max_file_size_mb": 1}
    app = make_app(*kbs)
    app.sync()  # the resource reads the index: a file the KB's rules keep out was never indexed
    async with _client(app) as client:
        assert "getUserInfo" in text_of((await client.read_resource("kb://api_docs/documents/users.md")).contents[0])
        with pytest.raises(MCPError, match="knowledge base 'api_docs' has no document"):
            await client.read_resource(f"kb://api_docs/documents/{path}")


async def test_a_kb_whose_folder_is_gone_is_still_served(
    app: App, folders: Path, make_app: MakeApp, caplog: pytest.LogCaptureFixture
) -> None:
    (folders / "api").rename(folders / "api-unmounted")
    served = make_app(*_kbs(folders))
    async with _client(served) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("search_api_docs", {"query": "E5021 token expired"})
        status = json.loads(text_of((await client.read_resource("kb://api_docs/status")).contents[0]))
        synced = await client.call_tool("sync_knowledge_base", {"kb": "api_docs"})
    assert "search_api_docs" in names and result.structured_content["results"][0]["source"] == "users.md"
    assert status["files"] == 1
    assert synced.is_error and "keeps its last good version" in text_of(synced.content[0])
    assert any("does not exist" in record.getMessage() for record in caplog.records)


async def test_http_serve_prints_its_url_and_a_busy_port_is_one_clear_error(app: App, folders: Path) -> None:
    from click.testing import CliRunner

    from mcp_kb.cli import main

    with _served(app, folders, "http") as (port, stderr):
        assert f"serving streamable HTTP at http://127.0.0.1:{port}/mcp (bearer token required)" in stderr()
        config = _config_file(folders, app.config.storage.uri)
        busy = CliRunner().invoke(main, ["serve", "-c", str(config), "--transport", "http", "--port", str(port)])
    assert busy.exit_code == 1 and busy.output.startswith(f"Error: cannot listen on 127.0.0.1:{port}")


async def test_a_client_searching_during_the_first_sync_is_told_indexing_is_in_progress(
    make_app: MakeApp, tmp_path: Path
) -> None:
    for i in range(200):
        write(tmp_path / "many" / f"p{i:03d}.md", f"# Page {i}\n\nNotes on subject {i} for the planning team.\n")
    app = make_app(
        {"name": "many", "description": "Planning notes", "paths": [str(tmp_path / "many")], "sync": {"on_start": True}}
    )
    told = []
    async with _client(app) as client:
        with anyio.fail_after(120):
            while app.status("many")[0].last_outcome != "ok":
                result = await client.call_tool("search_many", {"query": "planning notes", "mode": "keyword"})
                text = text_of(result.content[0])
                if result.is_error:  # before the start-up sync took its lock
                    assert "has not been synced yet" in text
                elif app.status("many")[0].last_outcome != "ok":  # still incomplete after answering
                    assert text.startswith("Note: indexing in progress")
                    told.append(result.structured_content["notes"][0])
                await anyio.sleep(0.01)
        done = await client.call_tool("search_many", {"query": "planning notes", "mode": "keyword"})
    assert any("of 200 files indexed" in note for note in told), told
    assert done.structured_content["notes"] == [] and done.structured_content["results"]


async def test_the_sync_tool_says_who_is_syncing_and_can_wait_for_it(app: App) -> None:
    import threading

    from mcp_kb.index.state import sync_lock, write_progress

    held, release = threading.Event(), threading.Event()

    def other_sync() -> None:
        with sync_lock(app.store, ["api_docs"]):
            write_progress(app.store, "api_docs", SyncProgress(3, 10))
            held.set()
            release.wait(30)

    holder = threading.Thread(target=other_sync)
    holder.start()
    held.wait(10)
    try:
        async with _client(app) as client:
            busy = await client.call_tool("sync_knowledge_base", {"kb": "api_docs", "wait": False})
            text = text_of(busy.content[0])
            assert busy.is_error and "a sync of api_docs is already running (started " in text
            assert f"by process {os.getpid()}" in text and "api_docs: 3 of 10 files" in text and "wait" in text
            assert app.config.storage.uri not in text  # no internal paths
            threading.Timer(0.5, release.set).start()
            waited = await client.call_tool("sync_knowledge_base", {"kb": "api_docs", "wait": True})
        assert not waited.is_error and waited.structured_content["reports"][0]["kb"] == "api_docs"
    finally:
        release.set()
        holder.join()


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"query": "leave", "mode": "fuzzy"}, "unknown mode 'fuzzy'; use one of hybrid, vector, keyword, filter"),
        (
            {"query": "leave", "filters": {"year": "recent"}},
            "filter 'year' expects a whole number, a list of them (any of) or a range like {\"gte\": 2020}",
        ),
        ({"query": "leave", "filters": {"colour": "red"}}, "unknown filter field 'colour'; valid fields: chunk_index"),
        ({"top_k": 3}, "query is required"),
    ],
)
async def test_rejected_arguments_say_what_to_send_instead(app: App, arguments: dict[str, Any], message: str) -> None:
    async with _client(app) as client:
        result = await client.call_tool("search_policy_docs", arguments)
    text = text_of(result.content[0])
    assert result.is_error and message in text
    assert "pydantic" not in text and "validation error" not in text


async def test_a_chinese_description_ends_its_sentence_once(make_app: MakeApp, tmp_path: Path) -> None:
    write(tmp_path / "policies" / "leave.md", "# 年假\n\n年假需要提前两周申请。\n")
    app = make_app({"name": "policies", "description": "公司的人事制度。", "paths": [str(tmp_path / "policies")]})
    async with _client(app) as client:
        description = (await client.list_tools()).tools[0].description
    assert description and description.startswith("公司的人事制度。 Not indexed yet:")


async def test_a_zero_config_tool_says_what_the_folder_holds(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.settings import config_for_folder

    write(tmp_path / "notes" / "deploy.md", "# Deploy runbook\n\nRoll back with the release tool.\n")
    write(tmp_path / "notes" / "oncall.md", "# On-call rota\n\nWho answers the pager this week.\n")
    config = config_for_folder(tmp_path / "notes")
    app = make_app(*[kb.model_dump() for kb in config.kb])

    async def description(client: Client) -> str | None:
        return next(tool.description for tool in (await client.list_tools()).tools if tool.name.startswith("search_"))

    async with _client(app) as client:
        before = await description(client)
    app.sync()
    async with _client(app) as client:
        after = await description(client)
    assert (
        before and after and before.startswith("Documents from the folder 'notes'. Not indexed yet: its first sync ")
    )  # a folder
    # served alone is synced at start: its description says the sync starts with the server, or is running
    assert after.startswith(
        "Documents from the folder 'notes'. Holds 2 documents (2 md), among them: Deploy runbook; On-call rota."
    )


async def test_2025_era_clients_are_told_when_a_tool_description_changes(app: App, folders: Path) -> None:
    import mcp_types

    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(getattr(message, "root", message), mcp_types.ToolListChangedNotification):
            changed.set()

    async with Client(build_server(app), mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities and client.server_capabilities.tools
        assert client.server_capabilities.tools.list_changed is True
        await client.call_tool("search_api_docs", {"query": "token"})  # the server now knows this session
        write(folders / "api" / "more.md", "# More\n\nAnother page about webhooks and their retry policy.\n")
        await client.call_tool("sync_knowledge_base", {"kb": "api_docs"})
        with anyio.fail_after(10):
            await changed.wait()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "Holds 2 documents (2 md)" in (tools["search_api_docs"].description or "")


def test_a_client_that_leaves_at_once_leaves_a_clean_exit_and_stderr_says_what_is_served(
    app: App, folders: Path
) -> None:
    """Closing stdin right after tools/list used to abort the interpreter's shutdown while the model
    loaded ("Fatal Python error: PyGILState_Release"); `warming_up` below holds the exit for the load."""
    config = _config_file(folders, app.config.storage.uri)
    handshake = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config)],
        env=os.environ.copy(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin and process.stdout and process.stderr
    process.stdin.write("".join(json.dumps(message) + "\n" for message in handshake).encode())
    process.stdin.flush()
    replies = [json.loads(process.stdout.readline()) for _ in handshake[::2]]  # stdout: protocol only
    process.stdin.close()  # the client leaves while the model is still loading
    rest, stderr = process.stdout.read(), process.stderr.read().decode()
    assert process.wait(timeout=120) == 0 and "Fatal Python error" not in stderr and not rest, stderr
    assert [reply["id"] for reply in replies] == [1, 2] and "search_api_docs" in json.dumps(replies[1])
    assert "mcp-kb: serving 2 knowledge base(s) (policy_docs, api_docs) over stdio, waiting for an MCP client" in stderr


def _reply(process: subprocess.Popen[bytes], within: float = 60.0) -> dict[str, Any] | None:
    """The server's next line on stdout, or None when none comes within the time (no answer)."""
    import select

    assert process.stdout
    ready, _, _ = select.select([process.stdout], [], [], within)
    return json.loads(process.stdout.readline()) if ready else None


def test_every_request_is_answered_over_stdio_even_with_a_lone_surrogate_in_its_arguments(
    app: App, folders: Path
) -> None:
    """`"\\ud800"` is valid JSON but no text: the SDK's stdio reader dropped such a request and the client waited
    for ever (over HTTP it got an error). Each is now answered, the lone surrogate read as U+FFFD."""
    config = _config_file(folders, app.config.storage.uri)
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config)],
        env=os.environ.copy(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )  # unbuffered: a reply read ahead into a buffer would hide from select()
    calls = {
        "read_document": {"kb": "policy_docs", "path": "\ud800.md"},
        "list_documents": {"kb": "policy_docs", "path": "\udfff*"},
        "search_policy_docs": {"query": "annual leave \ud83d"},
    }
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": args}}
            for number, (name, args) in enumerate(calls.items(), start=2)
        ),
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "read_document",
                "arguments": {"kb": "policy_docs", "path": "leave.md", "as_of": "\ud800"},
            },
        },
    ]
    try:
        assert process.stdin
        process.stdin.write("".join(json.dumps(message) + "\n" for message in messages).encode())  # escapes: ASCII
        process.stdin.flush()
        replies = {reply["id"]: reply for reply in (_reply(process) for _ in range(5)) if reply}
    finally:
        process.kill()
        process.wait(timeout=20)
    assert sorted(replies) == [1, 2, 3, 4, 5]
    assert "has no document '\ufffd.md'" in replies[2]["result"]["content"][0]["text"]
    assert replies[3]["result"]["structuredContent"]["path"] == "\ufffd*"
    assert replies[4]["result"]["isError"] is False  # the query's words still find the page
    assert "has no tag '\ufffd'" in replies[5]["result"]["content"][0]["text"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("stdin", ["terminal", "client"])
def test_ctrl_c_and_sigterm_stop_a_stdio_server_with_one_line(
    app: App, folders: Path, signum: signal.Signals, stdin: str
) -> None:
    """Ctrl-C in a terminal (nothing on stdin but the user's silence) and a client ending its server both stop it:
    the SDK's stdin reader wakes only on a line or EOF, so without care the server waited for Enter."""
    import pty

    config = _config_file(folders, app.config.storage.uri)
    terminal, user = pty.openpty() if stdin == "terminal" else (None, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config)],
        env=os.environ.copy(),
        stdin=user if user is not None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr and process.stdout
    try:
        assert "waiting for an MCP client" in process.stderr.readline()
        if stdin == "client":
            assert process.stdin
            process.stdin.write(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"},
                        },
                    }
                )
                + "\n"
            )
            process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1  # in session, stdin left open
        process.send_signal(signum)
        code, rest = process.wait(timeout=30), process.stderr.read()
        assert code == 128 + signum and rest.strip().splitlines() == ["mcp-kb: stopped"], rest
    finally:
        process.kill()
        for fd in (terminal, user):
            if fd is not None:
                os.close(fd)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("command", [["serve", "--transport", "http"], ["ui"]], ids=["http", "page"])
def test_ctrl_c_and_sigterm_stop_the_http_server_and_the_page_saying_so(
    app: App, folders: Path, command: list[str], signum: signal.Signals, tmp_path: Path
) -> None:
    config = _config_file(folders, app.config.storage.uri)
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", *command, "-c", str(config), "--port", "0"],
        env=os.environ.copy(),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr
        address = re.search(r"(http://127\.0\.0\.1:\d+)/", process.stderr.readline())
        assert address, "no address printed"
        url = address.group(1)
        assert httpx.get(f"{url}/", timeout=30).status_code == 200  # serving (the admin page)
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0
        assert process.stderr.read().strip().splitlines()[-1] == "mcp-kb: stopped"
    finally:
        process.kill()


async def test_leaving_waits_for_the_model_load_it_started(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from mcp_kb.mcp import server

    loading, leaving, order = threading.Event(), threading.Event(), []

    def slow_load(_app: App) -> None:
        loading.set()
        leaving.wait(30)
        order.append("model loaded")

    async def at_once() -> None:
        pass

    monkeypatch.setattr(server, "_warm_up", slow_load)
    async with server.warming_up(app, at_once):
        assert await anyio.to_thread.run_sync(loading.wait, 30)
        leaving.set()
    order.append("left")
    assert order == ["model loaded", "left"]


async def test_a_server_that_stops_before_it_is_ready_never_loads_the_model(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from mcp_kb.mcp import server

    loaded = threading.Event()

    async def never() -> None:
        await anyio.sleep_forever()

    monkeypatch.setattr(server, "_warm_up", lambda _app: loaded.set())
    async with server.warming_up(app, never):
        pass
    assert not loaded.is_set()


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # initialize, or the 2026 era's server/discover
async def test_the_start_up_work_waits_for_the_first_answer_after_the_handshake(
    app: App, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The model load and a start-up sync hold the interpreter as answering does: a client launching a stdio server
    waits for its handshake and tools/list, so they begin once a request after the handshake is answered."""
    import threading

    from mcp_kb.mcp import server

    loaded, syncing = threading.Event(), threading.Event()

    class LiveSync:
        def __init__(self, *_: object) -> None:
            pass

        async def run(self, triggers: bool = True) -> None:
            syncing.set()

    monkeypatch.setattr(server, "_warm_up", lambda _app: loaded.set())
    monkeypatch.setattr(server, "LiveSync", LiveSync)
    async with Client(build_server(app, handshake_wait=600), mode=mode) as client:
        await anyio.wait_all_tasks_blocked()
        assert not loaded.is_set() and not syncing.is_set()  # handshake answered: nothing begun
        await client.list_tools()
        assert await anyio.to_thread.run_sync(loaded.wait, 30)
        assert await anyio.to_thread.run_sync(syncing.wait, 30)


async def test_a_client_that_asks_nothing_after_its_handshake_gets_the_start_up_work_after_the_wait(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from mcp_kb.mcp import server

    loaded = threading.Event()
    monkeypatch.setattr(server, "_warm_up", lambda _app: loaded.set())
    async with Client(build_server(app, handshake_wait=0.05), mode="legacy"):  # no request after the handshake
        assert await anyio.to_thread.run_sync(loaded.wait, 30)


async def test_a_server_built_without_a_handshake_wait_starts_its_work_at_once(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP server loads the model as it starts (nobody launches it for one request); so does a library's."""
    import threading

    from mcp_kb.mcp import server

    loaded = threading.Event()
    monkeypatch.setattr(server, "_warm_up", lambda _app: loaded.set())
    async with Client(build_server(app), mode="legacy"):
        assert await anyio.to_thread.run_sync(loaded.wait, 30)


def test_the_warm_up_loads_the_tokenizer_before_the_first_search(
    app: App, model_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenizer loads at its first use (a command that chunks nothing never loads it); in a server that
    would be the first search, so the warm-up uses it."""
    from mcp_kb.mcp import server
    from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

    fresh = ModelTokenizer(model_folder)
    monkeypatch.setattr(app.searcher, "tokenizer", fresh)
    server._warm_up(app)
    assert fresh._tokenizer is not None


async def test_a_search_tools_description_says_why_it_holds_nothing_as_things_stand(
    make_app: MakeApp, folders: Path, tmp_path: Path
) -> None:
    """It said "the first sync has not finished" with no sync running or to come (on_start = false)."""
    write(tmp_path / "empty" / ".keep", "")
    app = make_app(
        *_kbs(folders), {"name": "empty", "description": "An empty folder", "paths": [str(tmp_path / "empty")]}
    )
    app.sync(SyncRequest(kb="empty"))
    async with _client(app) as client:
        tools = {tool.name: tool.description for tool in (await client.list_tools()).tools}
    assert "Not indexed yet: no sync has run (mcp-kb sync, or the sync_knowledge_base tool indexes it)." in (
        tools["search_policy_docs"] or ""
    )
    assert "Holds no documents yet: its last sync found none." in (tools["search_empty"] or "")
    assert "first sync has not finished" not in "".join(text or "" for text in tools.values())


def test_a_stdio_server_whose_client_closes_stdin_leaves_within_seconds_during_its_start_up_sync(
    tmp_path: Path,
) -> None:
    """Clients stop a stdio server by closing its stdin: one syncing 500 new files at start waited for the whole
    sync (72 s). The sync now stops at its next progress report, keeping whole batches, as after Ctrl-C."""
    from helpers import until

    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    for number in range(600):
        write(tmp_path / "docs" / f"n{number:03d}.md", f"# Note {number}\n\n" + f"Meeting {number} moved. " * 40 + "\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Notes"\n'
        'paths = ["docs"]\n[kb.sync]\non_start = true\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config)],
        env=os.environ.copy(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    app = App(load_config(config))
    try:
        assert process.stdin and process.stderr
        until(lambda: app.glance("docs").progress.done > 32, what="the first batch written")
        process.stdin.close()
        closed = time.monotonic()
        code = process.wait(timeout=60)
        took = time.monotonic() - closed
    finally:
        process.kill()
    [status] = app.status("docs")
    assert code == 0 and took < 15, (code, took, process.stderr.read())
    assert 32 <= status.files < 600 and "the server is stopping" in status.last_error, status  # whole batches kept
    assert status.last_outcome == "interrupted"
    [report] = app.sync()
    assert report.files_added == 600 - status.files and report.files_failed == 0


async def test_a_model_that_does_not_load_is_said_once_and_a_search_says_why_nothing_is_indexed(
    tmp_path: Path, model_folder: Path, embedding_config: FastembedSettings
) -> None:
    """With a model folder of another model (its tokenizer reads), the server warned at warm-up and again for its
    start-up sync in the same words, and a search said "not synced yet; run mcp-kb sync", which fails the same
    way: the log says it once, and the search says the last sync failed and why."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    other = (
        "sentence-transformers/all-MiniLM-L6-v2"
        if "multilingual" in embedding_config.model
        else "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
    )  # one loading from another file
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is 25 days.\n")
    config = write(
        tmp_path / "kb.toml",
        f'[storage]\nuri = "{tmp_path / "index"}"\n[embedding]\nmodel = "{other}"\n'
        f'model_path = "{model_folder}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{tmp_path / "docs"}"]\n[kb.sync]\non_start = true\n',
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_EMBEDDING")}
    with serve_http(config, "--transport", "http", env=env) as (port, stderr):
        async with Client(
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=httpx2.AsyncClient(timeout=60))
        ) as client:
            said = ""
            with anyio.fail_after(60):
                while "its last sync failed" not in said:  # the start-up sync has failed
                    said = text_of((await client.call_tool("search_docs", {"query": "leave"})).content[0])
                    await anyio.sleep(0.05)
        assert "holds another model" in said and "mcp-kb sync" not in said, said
        assert stderr().count("holds another model") == 1, stderr()
