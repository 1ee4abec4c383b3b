"""Team access through real HTTP sessions against `mcp-kb serve`: scoped tokens see disjoint tools and
cannot reach each other's KBs by any route, OAuth users sign in with an issuer's tokens, the audit
trail says who did what (and holds no secret), rate limits answer 429, and stateless replicas serve
one client behind a round-robin balancer."""

import hashlib
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fake_issuer import Issuer, serve_issuer
from helpers import closed_address, write, text_of
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, PromptReference, ResourceTemplateReference, Tool
from served import serve_http
from task_client import CreatedTask, Tasks, ask, until_ended

from mcp_kb.vocabulary import SYNC_TOOL
from mcp_kb.api import SyncRequest, SyncProgress
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.anyio

AUDIENCE = "https://kb.example.test/mcp"
SECRETS = {"hr": "hr-secret-7f3a", "dev": "dev-secret-91bc", "limited": "limited-secret-22d0"}
LEAVE = "# Leave\n\n## Annual leave\n\nApply for annual leave in the HR portal two weeks ahead.\n"
USERS = "# API\n\n## getUserInfo\n\ngetUserInfo returns the signed-in user. Error E5021: the token expired.\n"
_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(base: Path, issuer_url: str, extra: str = "") -> Path:
    storage = base / "index"
    lines = [
        f'storage = "{storage}"',
        "[server]",
        'audit_log = "audit.jsonl"',
        'search_tools = "both"',
        *extra.splitlines(),
        "[[server.tokens]]",
        'name = "hr"',
        'secret_env = "HR_TOKEN"',
        'kbs = ["policy_docs"]',
        "[[server.tokens]]",
        'name = "dev"',
        f'secret_sha256 = "{_sha(SECRETS["dev"])}"',
        'kbs = ["api_*"]',
        "sync = true",
        "[[server.tokens]]",
        'name = "limited"',
        'secret_env = "LIMITED_TOKEN"',
        'kbs = ["api_docs"]',
        "requests_per_minute = 2",
        "[server.oauth]",
        f'issuer = "{issuer_url}"',
        f'audience = "{AUDIENCE}"',
        "[[kb]]",
        'name = "policy_docs"',
        'description = "HR policies: leave, travel"',
        f'paths = ["{base / "policies"}"]',
        "[[kb]]",
        'name = "api_docs"',
        'description = "API reference for developers"',
        f'paths = ["{base / "api"}"]',
    ]
    path = base / "kb.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k != "MCP_KB_TOKEN"},
        "HR_TOKEN": SECRETS["hr"],
        "LIMITED_TOKEN": SECRETS["limited"],
    }


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder, issuer: Issuer
) -> Iterator[tuple[str, Path, Callable[[], str]]]:
    """Two KBs synced once and served over HTTP with scoped tokens and OAuth."""
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    base = tmp_path_factory.mktemp("team")
    write(base / "policies" / "leave.md", LEAVE)
    write(base / "api" / "users.md", USERS)
    config = _config(base, issuer.url)
    App(load_config(config), embedder=embedder).sync()
    with serve_http(config, "--transport", "http", env=_env()) as (port, log):
        yield f"http://127.0.0.1:{port}/mcp", base, log


@asynccontextmanager
async def _session(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http), **options) as client:
        yield client


async def _read_error(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return str(caught.value)


# Listed after the KBs' search tools for every caller who sees a KB: each with only the caller's KBs.
DOCUMENT_TOOLS = ["read_document", "list_documents", "search_knowledge_bases"]


async def _visible(client: Client) -> tuple[list[Tool], list[str]]:
    tools = (await client.list_tools()).tools
    listed = json.loads(text_of((await client.read_resource("kb://knowledge-bases")).contents[0]))
    return tools, [kb["name"] for kb in listed]


async def test_two_scoped_tokens_see_disjoint_tools_and_only_their_kbs(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        hr_tools, hr_kbs = await _visible(hr)
        hr_instructions = hr.instructions
    async with _session(url, SECRETS["dev"]) as dev:
        dev_tools, dev_kbs = await _visible(dev)
        dev_instructions = dev.instructions
    assert [t.name for t in hr_tools] == ["search_policy_docs", *DOCUMENT_TOOLS] and hr_kbs == ["policy_docs"]
    assert sorted(t.name for t in dev_tools) == [
        "list_documents",
        "read_document",
        "search_api_docs",
        "search_knowledge_bases",
        "sync_knowledge_base",
    ]
    assert dev_kbs == ["api_docs"]
    assert hr_instructions and dev_instructions
    hr_text = json.dumps([t.model_dump(mode="json") for t in hr_tools]) + hr_instructions
    dev_text = json.dumps([t.model_dump(mode="json") for t in dev_tools]) + dev_instructions
    assert "api_docs" not in hr_text and "API reference" not in hr_text
    assert "policy_docs" not in dev_text and "HR policies" not in dev_text


async def test_another_tokens_kb_answers_exactly_like_a_kb_that_does_not_exist(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        for hidden, absent in [
            ("kb://api_docs/status", "kb://nosuch/status"),
            ("kb://api_docs/metrics", "kb://nosuch/metrics"),
            ("kb://api_docs/documents/users.md", "kb://nosuch/documents/users.md"),
            ("kb://api%5Fdocs/status", "kb://nosuch/status"),
            ("kb://api_docs/documents/users%2Emd", "kb://nosuch/documents/users%2Emd"),
        ]:
            hidden_error = await _read_error(hr, hidden)
            absent_error = await _read_error(hr, absent)
            assert hidden_error.replace("api%5Fdocs", "api_docs").replace("api_docs", "X") == absent_error.replace(
                "nosuch", "X"
            ), hidden
            assert "policy_docs" in absent_error  # it names what the caller may see, and only that
        with pytest.raises(MCPError) as hidden_prompt:
            await hr.get_prompt("answer_with_citations", {"question": "q", "kb": "api_docs"})
        with pytest.raises(MCPError) as absent_prompt:
            await hr.get_prompt("answer_with_citations", {"question": "q", "kb": "nosuch"})
        own = await hr.get_prompt("answer_with_citations", {"question": "q"})
    assert str(hidden_prompt.value).replace("api_docs", "X") == str(absent_prompt.value).replace("nosuch", "X")
    assert "search_policy_docs" in text_of(own.messages[0].content) and "api" not in text_of(own.messages[0].content)


async def test_reading_listing_and_searching_across_answer_for_a_hidden_kb_as_for_an_absent_one(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        tools = {tool.name: tool for tool in (await hr.list_tools()).tools}
        assert [
            tools[name].input_schema["properties"]["kb"]["enum"] for name in ("read_document", "list_documents")
        ] == [["policy_docs"], ["policy_docs"]]
        assert "api" not in json.dumps([tools[name].model_dump(mode="json") for name in DOCUMENT_TOOLS])
        cases: list[tuple[str, dict[str, object]]] = [
            ("read_document", {"path": "users.md"}),
            ("list_documents", {}),
            ("list_documents", {"path": "users.md", "outline": True}),
            ("read_document", {"path": "users.md", "as_of": "1"}),  # no history of it either
            ("list_documents", {"as_of": "nosuch-tag"}),
            ("search_knowledge_bases", {"query": "E5021"}),
        ]
        for tool, arguments in cases:
            named = "kbs" if tool == "search_knowledge_bases" else "kb"
            hidden = await hr.call_tool(tool, {**arguments, named: ["api_docs"] if named == "kbs" else "api_docs"})
            absent = await hr.call_tool(tool, {**arguments, named: ["nosuch"] if named == "kbs" else "nosuch"})
            assert hidden.is_error and text_of(hidden.content[0]).replace("api_docs", "X") == text_of(
                absent.content[0]
            ).replace("nosuch", "X"), tool
            assert "policy_docs" in text_of(absent.content[0])  # it names what the caller may see, and only that
        everything = await hr.call_tool("search_knowledge_bases", {"query": "E5021 token expired getUserInfo"})
    assert {hit["kb"] for hit in everything.structured_content["results"]} <= {"policy_docs"}
    assert "getUserInfo" not in json.dumps(everything.model_dump(mode="json"))


async def test_completions_offer_only_the_callers_kbs_and_their_documents(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    prompt = PromptReference(type="ref/prompt", name="answer_with_citations")
    document = ResourceTemplateReference(type="ref/resource", uri="kb://{name}/documents/{+path}")
    async with _session(url, SECRETS["hr"]) as hr:
        kbs = await hr.complete(prompt, {"name": "kb", "value": ""})
        own = await hr.complete(document, {"name": "path", "value": ""}, context_arguments={"name": "policy_docs"})
        hidden = await hr.complete(document, {"name": "path", "value": ""}, context_arguments={"name": "api_docs"})
        absent = await hr.complete(document, {"name": "path", "value": ""}, context_arguments={"name": "nosuch"})
    assert kbs.completion.values == ["policy_docs"] and own.completion.values == ["leave.md"]
    assert hidden.completion == absent.completion and hidden.completion.values == []


async def test_a_callers_sync_task_reads_as_unknown_to_every_other_caller(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    async with _session(url, SECRETS["dev"], extensions=[Tasks()]) as dev:
        created = await dev.session.call_tool(SYNC_TOOL, {"kb": "api_docs"}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        async with _session(url, SECRETS["hr"], extensions=[Tasks()]) as hr:
            hidden = await hr.session.call_tool(SYNC_TOOL, {"kb": "api_docs"}, allow_claimed=True)
            absent = await hr.session.call_tool("sync_nothing", {"kb": "api_docs"}, allow_claimed=True)
            assert isinstance(hidden, CallToolResult) and isinstance(absent, CallToolResult)
            assert hidden.is_error and text_of(hidden.content[0]).replace(SYNC_TOOL, "X") == text_of(
                absent.content[0]
            ).replace("sync_nothing", "X")  # no task: a tool hr cannot see
            for method in ("tasks/get", "tasks/cancel", "tasks/update"):
                with pytest.raises(MCPError) as others:
                    await ask(hr.session, method, created.task_id)
                with pytest.raises(MCPError) as unknown:
                    await ask(hr.session, method, "no-such-task")
                assert others.value.error.code == unknown.value.error.code
                assert others.value.error.message.replace(created.task_id, "X") == unknown.value.error.message.replace(
                    "no-such-task", "X"
                )
        ended = await until_ended(dev.session, created.task_id)  # hr's cancel reached nothing
    assert ended.status == "completed" and ended.result is not None and not ended.result["isError"]


async def test_tools_outside_the_grant_are_unknown_tools_even_called_by_name(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        sync = await hr.call_tool("sync_knowledge_base", {})
        search = await hr.call_tool("search_api_docs", {})  # bad arguments too: no hint the tool exists
        absent = await hr.call_tool("search_nosuch", {})
        own = await hr.call_tool("search_policy_docs", {"query": "annual leave"})
    assert sync.is_error and text_of(sync.content[0]) == "Unknown tool: sync_knowledge_base"
    assert search.is_error and text_of(search.content[0]) == "Unknown tool: search_api_docs"
    assert text_of(absent.content[0]) == "Unknown tool: search_nosuch"
    assert not own.is_error and own.structured_content["results"][0]["source"] == "leave.md"
    async with _session(url, SECRETS["dev"]) as dev:
        other = await dev.call_tool("sync_knowledge_base", {"kb": "policy_docs"})
        everything = await dev.call_tool("sync_knowledge_base", {})
    assert other.is_error and "unknown knowledge base 'policy_docs'; configured: api_docs" in text_of(other.content[0])
    assert not everything.is_error
    assert [r["kb"] for r in everything.structured_content["reports"]] == ["api_docs"]  # its KBs only


async def test_over_sse_a_scoped_token_sees_only_its_kbs_too(team: tuple[str, Path, Callable[[], str]]) -> None:
    from mcp.client.sse import sse_client

    _, base, _ = team
    with serve_http(base / "kb.toml", "--transport", "sse", env=_env()) as (port, _log):
        headers = {"Authorization": f"Bearer {SECRETS['hr']}"}
        async with Client(sse_client(f"http://127.0.0.1:{port}/sse", headers=headers)) as hr:
            tools, kbs = await _visible(hr)
            hidden = await hr.call_tool("search_api_docs", {"query": "E5021"})
    assert [t.name for t in tools] == ["search_policy_docs", *DOCUMENT_TOOLS] and kbs == ["policy_docs"]
    assert text_of(hidden.content[0]) == "Unknown tool: search_api_docs"


async def test_an_oauth_user_is_pointed_at_the_issuer_and_signs_in_with_its_token(
    team: tuple[str, Path, Callable[[], str]], issuer: Issuer
) -> None:
    url, _, _ = team
    async with httpx.AsyncClient() as http:
        anonymous = await http.post(url, json=_PING, headers=_JSON)
        challenge = anonymous.headers["www-authenticate"]
        metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
        assert metadata_url == "https://kb.example.test/.well-known/oauth-protected-resource/mcp"
        metadata = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
        expired = await http.post(
            url,
            json=_PING,
            headers={
                **_JSON,
                "Authorization": f"Bearer {issuer.token(AUDIENCE, lifetime=-300, scope='kb:api_docs:search')}",
            },
        )
    assert anonymous.status_code == 401 and challenge.startswith("Bearer ")
    assert metadata["resource"] == AUDIENCE and metadata["authorization_servers"] == [issuer.url]
    assert "policy_docs" not in json.dumps(metadata)  # public metadata names no KB
    assert expired.status_code == 401 and 'error="invalid_token"' in expired.headers["www-authenticate"]
    token = issuer.token(AUDIENCE, subject="carol", scope="openid kb:api_docs:search")
    async with _session(url, token) as carol:
        tools, kbs = await _visible(carol)
        result = await carol.call_tool("search_api_docs", {"query": "E5021"})
    assert [t.name for t in tools] == ["search_api_docs", *DOCUMENT_TOOLS] and kbs == ["api_docs"]
    assert result.structured_content["results"][0]["source"] == "users.md"


async def test_the_issuer_rotating_its_key_is_followed_within_the_refetch_gap(
    team: tuple[str, Path, Callable[[], str]], issuer: Issuer
) -> None:
    import anyio

    url, _, _ = team
    headers = {**_JSON}

    async def status(token: str) -> int:
        async with httpx.AsyncClient() as http:
            answer = await http.post(url, json=_PING, headers={**headers, "Authorization": f"Bearer {token}"})
        return answer.status_code

    assert await status(issuer.token(AUDIENCE, scope="kb:api_docs:search")) != 401  # keys fetched
    issuer.new_key("rotated", kind="EC")
    rotated = issuer.token(AUDIENCE, kid="rotated", subject="erin", scope="kb:api_docs:search")
    with anyio.fail_after(20):  # a new key id is fetched again at most every 5 s
        while await status(rotated) == 401:
            await anyio.sleep(0.5)
    del issuer.keys["rotated"]


async def test_an_issuer_answering_garbage_costs_callers_a_401_never_a_500(
    team: tuple[str, Path, Callable[[], str]], issuer: Issuer
) -> None:
    """Both doors that check access tokens, /mcp and the page's sign-in, while the JWKS is garbage."""
    url, _, log = team
    issuer.new_key("unpublished")
    token = issuer.token(AUDIENCE, kid="unpublished", scope="kb:api_docs:search")
    del issuer.keys["unpublished"]
    page = url.removesuffix("/mcp")
    statuses = []
    tracebacks = log().count("Traceback")  # other tests' (a hidden prompt's) are not this one's
    try:
        for garbage in (b'{"keys": 5}', b"[" * 200_000, b'{"keys": [{"kty": "RSA", "kid": ["x"]}]}'):
            issuer.garbage = garbage
            async with httpx.AsyncClient(timeout=60) as http:
                with anyio.fail_after(30):
                    while True:  # until the server has asked the issuer again (at most every 5 s)
                        fetches = issuer.jwks_fetches
                        answer = await http.post(url, json=_PING, headers={**_JSON, "Authorization": f"Bearer {token}"})
                        signed = await http.post(f"{page}/ui/login", data={"token": token}, headers={"Origin": page})
                        statuses.append((answer.status_code, signed.status_code))
                        if issuer.jwks_fetches > fetches:
                            break
                        await anyio.sleep(0.5)
    finally:
        issuer.garbage = None
    assert set(statuses) <= {(401, 401), (503, 401)}, statuses
    assert log().count("Traceback") == tracebacks


async def test_the_audit_trail_says_who_did_what_and_holds_no_secret(
    team: tuple[str, Path, Callable[[], str]], issuer: Issuer
) -> None:
    url, base, log = team
    token = issuer.token(AUDIENCE, subject="dana", scope="kb:policy_docs:search")
    async with _session(url, SECRETS["dev"]) as dev:
        await dev.call_tool("search_api_docs", {"query": "private question about E5021"})
        shown = [
            text_of((await dev.read_resource(f"kb://api_docs/{what}")).contents[0]) for what in ("status", "metrics")
        ]
        await _read_error(dev, "kb://policy_docs/status")
    async with _session(url, token) as dana:
        await dana.call_tool("search_policy_docs", {"query": "annual leave"})
    async with httpx.AsyncClient() as http:  # refused requests, their tokens in the header
        for secret in ("wrong-secret-5e1d", token[:-4] + "AAAA"):
            await http.post(url, json=_PING, headers={**_JSON, "Authorization": f"Bearer {secret}"})
    lines = [json.loads(line) for line in (base / "audit.jsonl").read_text().splitlines()]
    dev_lines = [(e["kb"], e["action"], bool(e.get("results")), "error" in e) for e in lines if e["who"] == "dev"]
    assert ("api_docs", "tool search_api_docs", True, False) in dev_lines
    assert ("api_docs", "read kb://api_docs/metrics", False, False) in dev_lines
    assert ("policy_docs", "read kb://policy_docs/status", False, True) in dev_lines
    assert any(e["who"] == "dana" and e["kb"] == "policy_docs" and e["results"] for e in lines)
    assert all(
        set(e) <= {"time", "who", "kind", "issuer", "kb", "action", "latency_ms", "results", "error"} for e in lines
    )
    assert {(e["who"], e["kind"]) for e in lines} >= {("dev", "token"), ("dana", "oauth")}
    everything_written = (base / "audit.jsonl").read_text() + log() + "".join(shown)
    for secret in [*SECRETS.values(), token, "wrong-secret-5e1d", token.split(".")[2]]:
        assert secret not in everything_written
    assert "private question" not in everything_written  # queries only with audit_queries = true


async def test_an_oauth_subject_named_like_the_owner_or_a_token_is_neither(
    team: tuple[str, Path, Callable[[], str]], issuer: Issuer, tmp_path: Path
) -> None:
    """Identities are kind + issuer + name: `sub: "owner"` is not audited as the owner, and `sub: "limited"`
    has a rate-limit bucket of its own, not the scoped token `limited`'s."""
    import subprocess
    import sys

    _, base, _ = team
    config = tmp_path / "kb.toml"
    config.write_text(
        (base / "kb.toml")
        .read_text()
        .replace(f'audience = "{AUDIENCE}"', f'audience = "{AUDIENCE}"\nrequests_per_minute = 10')
        .replace('audit_log = "audit.jsonl"', f'audit_log = "{tmp_path / "audit.jsonl"}"')
    )
    token_limited = {**_JSON, "Authorization": f"Bearer {SECRETS['limited']}"}
    subject_limited = {
        **_JSON,
        "Authorization": f"Bearer {issuer.token(AUDIENCE, subject='limited', scope='kb:api_docs:search')}",
    }
    with serve_http(config, "--transport", "http", env=_env()) as (port, _log):
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            by_token = [(await http.post(url, json=_PING, headers=token_limited)).status_code for _ in range(3)]
            by_subject = [(await http.post(url, json=_PING, headers=subject_limited)).status_code for _ in range(2)]
        async with _session(url, issuer.token(AUDIENCE, subject="owner", scope="kb:api_docs:search")) as fake_owner:
            await fake_owner.call_tool("search_api_docs", {"query": "E5021"})
    assert by_token[2] == 429 and 429 not in by_subject
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    named_owner = [line for line in lines if line["who"] == "owner"]
    assert named_owner and all(line["kind"] == "oauth" and line["issuer"] == issuer.url for line in named_owner)
    stats = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "stats", "--callers", "-c", str(config)],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    ).stdout
    assert f"owner (OAuth {issuer.url}): " in stats and "\nowner: " not in "\n" + stats


async def test_a_uri_naming_no_kb_is_audited_as_unknown_and_printed_escaped(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    import subprocess
    import sys

    url, base, _ = team
    forged = "kb://x\nowner: 999 requests (0 failed)\x1b[2J/status"
    async with _session(url, SECRETS["hr"]) as hr:
        await _read_error(hr, forged)
    lines = [json.loads(line) for line in (base / "audit.jsonl").read_text().split("\n") if line]
    assert any(line["kb"] == "?" and line["action"] == f"read {forged}" for line in lines)
    assert not any("owner: 999" in line["kb"] for line in lines)
    stats = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "stats", "--callers", "-c", str(base / "kb.toml")],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    ).stdout
    assert "\x1b" not in stats and not any(line.startswith("owner: 999") for line in stats.splitlines())


@pytest.mark.parametrize("required", [False, True])
async def test_an_audit_trail_that_cannot_be_written(
    team: tuple[str, Path, Callable[[], str]], tmp_path: Path, required: bool
) -> None:
    """By default searches go on and the page says so; with audit_required they are refused. Either way the
    client hears no local path and no OS text beyond the reason."""
    _, base, _ = team
    (tmp_path / "blocked").write_text("a file where the trail's folder should be")
    config = tmp_path / "kb.toml"
    config.write_text(
        (base / "kb.toml")
        .read_text()
        .replace(
            'audit_log = "audit.jsonl"',
            f'audit_log = "{tmp_path / "blocked" / "audit.jsonl"}"\naudit_required = {str(required).lower()}',
        )
    )
    with serve_http(config, "--transport", "http", env=_env()) as (port, log):
        async with _session(f"http://127.0.0.1:{port}/mcp", SECRETS["dev"]) as dev:
            result = await dev.call_tool("search_api_docs", {"query": "E5021"}) if not required else None
            if required:
                with pytest.raises(MCPError) as refused:
                    await dev.call_tool("search_api_docs", {"query": "E5021"})
        async with httpx.AsyncClient(timeout=60) as http:
            page = await http.get(f"http://127.0.0.1:{port}/", headers={"Authorization": f"Bearer {SECRETS['dev']}"})
    if required:
        told = str(refused.value)
        assert "audit_required" in told and str(tmp_path) not in told and "Errno" not in told
    else:
        assert result is not None and result.structured_content["results"][0]["source"] == "users.md"
    assert "The audit trail cannot be written since" in page.text and str(tmp_path) not in page.text
    assert "cannot write the audit trail" in log()


async def test_a_callers_rate_limit_answers_429_with_retry_after(team: tuple[str, Path, Callable[[], str]]) -> None:
    url, _, _ = team
    headers = {**_JSON, "Authorization": f"Bearer {SECRETS['limited']}"}
    async with httpx.AsyncClient() as http:
        answers = [await http.post(url, json=_PING, headers=headers) for _ in range(3)]
        page = await http.get(url.removesuffix("/mcp") + "/ui/status.json", headers=headers)
        others = await http.post(url, json=_PING, headers={**_JSON, "Authorization": f"Bearer {SECRETS['hr']}"})
    assert all(a.status_code != 429 for a in answers[:2]) and answers[2].status_code == 429
    assert 1 <= int(answers[2].headers["retry-after"]) <= 30
    assert others.status_code != 429  # another caller is not held back
    # the page shares the limit and words the refusal as /mcp does, with one rounding of the wait
    refused, page_refused = answers[2].json()["error_description"], page.json()["error"]
    assert page.status_code == 429 and 1 <= int(page.headers["retry-after"]) <= 30
    assert refused.startswith("limited (token) may send 2 requests a minute; retry in ")
    assert page_refused.startswith("limited (token) may send 2 requests a minute; retry in ")
    assert page_refused.endswith(f"{page.headers['retry-after']} s")


async def test_the_mcp_endpoint_never_admits_the_page_cookie(team: tuple[str, Path, Callable[[], str]]) -> None:
    """A browser sends the page's cookie with any request to this host: /mcp takes only the bearer header."""
    url, _, _ = team
    async with httpx.AsyncClient() as http:
        answer = await http.post(url, json=_PING, headers={**_JSON, "Cookie": f"mcp_kb_token={SECRETS['hr']}"})
    assert answer.status_code == 401


async def test_malformed_authorization_headers_are_refused_not_crashed(
    team: tuple[str, Path, Callable[[], str]],
) -> None:
    url, _, _ = team
    values = [
        b"",
        b"Bearer",
        b"Bearer ",
        b"Basic aHI6aHItc2VjcmV0",
        f"Token {SECRETS['hr']}".encode(),
        b"Bearer \xff\xfe",
        b"Bearer a.b",
        b"Bearer " + b"x" * 10_000,
        b"Bearer e30.e30.e30",
        b"Bearer  " + SECRETS["hr"].encode() + b" extra",
    ]
    for value in values:
        assert await _raw_status(url, value) == 401, value[:30]
    assert await _raw_status(url, f"Bearer {SECRETS['hr']}".encode()) != 401


async def _raw_status(url: str, authorization: bytes) -> int:
    """POST a ping with this Authorization header exactly as given (HTTP clients refuse to send some)."""
    import anyio

    address = httpx.URL(url)
    body = json.dumps(_PING).encode()
    request = (
        f"POST {address.path} HTTP/1.1\r\nHost: {address.host}:{address.port}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    ).encode()
    request += b"Authorization: " + authorization + b"\r\n\r\n" + body
    assert address.port is not None
    async with await anyio.connect_tcp(address.host, address.port) as stream:
        await stream.send(request)
        head = await stream.receive()
    return int(head.split(b" ", 2)[1])


# ---- a hidden KB is an absent KB, by construction --------------------------------------------------


@asynccontextmanager
async def _recorded_session(url: str, token: str, mode: str) -> AsyncIterator[tuple[Client, list[bytes]]]:
    """A real client session whose HTTP answers are kept as the bytes that came back (no GET stream: a kept
    answer is read whole)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    answers: list[bytes] = []

    async def keep(response: "httpx2.Response") -> None:
        answers.append(await response.aread())

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60, event_hooks={"response": [keep]}
    )
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client, answers


def _answer_to(answers: list[bytes], request_id: int) -> str:
    """The JSON-RPC answer with this id, as sent (an SSE frame's data or a plain JSON body)."""
    for body in answers:
        for line in body.decode().splitlines():
            text = line.removeprefix("data: ")
            if text.startswith("{") and json.loads(text).get("id") == request_id:
                return text
    raise AssertionError(f"no answer to request {request_id} in {answers}")


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-era sessions, and 2026 stateless requests
async def test_a_hidden_tool_answers_byte_for_byte_like_a_tool_that_does_not_exist(
    team: tuple[str, Path, Callable[[], str]], mode: str
) -> None:
    url, _, _ = team
    async with _recorded_session(url, SECRETS["hr"], mode) as (hr, answers):
        await hr.call_tool("search_api_docs", {"query": "E5021"})  # dev's KB
        await hr.call_tool("search_nosuch", {"query": "E5021"})  # no KB's
        await hr.call_tool("sync_knowledge_base", {})  # hr may not sync
        await hr.call_tool("no_such_sync", {})
        first = min(
            json.loads(line.removeprefix("data: ")).get("id") or 0
            for body in answers
            for line in body.decode().splitlines()
            if line.removeprefix("data: ").startswith("{")
        )
    calls = [_answer_to(answers, first + n) for n in range(1, 5)]  # the ids after the handshake's
    hidden, absent = calls[0].replace("search_api_docs", "NAME"), calls[1].replace("search_nosuch", "NAME")
    assert hidden.replace(f'"id":{first + 1}', "") == absent.replace(f'"id":{first + 2}', "")
    assert calls[2].replace("sync_knowledge_base", "NAME").replace(f'"id":{first + 3}', "") == calls[3].replace(
        "no_such_sync", "NAME"
    ).replace(f'"id":{first + 4}', "")


def _two_syncing_teams(base: Path, embedder: FastEmbedder) -> Path:
    """hr may sync policy_docs, dev api_docs; both KBs synced once. The config's path."""
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    write(base / "policies" / "leave.md", LEAVE)
    write(base / "api" / "users.md", USERS)
    config = base / "kb.toml"
    config.write_text(
        "\n".join(
            [
                f'storage = "{base / "index"}"',
                "[server]",
                "[[server.tokens]]",
                'name = "hr"',
                'secret_env = "HR_TOKEN"',
                'kbs = ["policy_docs"]',
                "sync = true",
                "[[server.tokens]]",
                'name = "dev"',
                f'secret_sha256 = "{_sha(SECRETS["dev"])}"',
                'kbs = ["api_docs"]',
                "sync = true",
                "[[kb]]",
                'name = "policy_docs"',
                'description = "HR policies"',
                f'paths = ["{base / "policies"}"]',
                "[[kb]]",
                'name = "api_docs"',
                'description = "API reference"',
                f'paths = ["{base / "api"}"]',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    return config


async def test_no_session_hears_of_a_sync_of_a_kb_its_grant_hides(tmp_path: Path, embedder: FastEmbedder) -> None:
    """Both eras: a 2026 listen stream and a 2025-era session subscribed to every URI there is; dev's sync of
    its KB reaches dev's stream and nothing of hr's; hr's own sync then reaches hr's two sessions."""
    import warnings

    config = _two_syncing_teams(tmp_path, embedder)
    every_uri = ["kb://knowledge-bases", "kb://api_docs/status", "kb://policy_docs/status", "kb://api_docs/metrics"]
    legacy_heard: list[str] = []
    policy_heard = anyio.Event()

    async def on_legacy_message(message: object) -> None:
        method = getattr(message, "method", "")
        legacy_heard.append(f"{method} {getattr(getattr(message, 'params', None), 'uri', '')}".strip())
        if "policy_docs/status" in legacy_heard[-1]:
            policy_heard.set()

    with serve_http(config, "--transport", "http", env=_env()) as (port, _log):
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            _session(url, SECRETS["hr"]) as hr,
            _session(url, SECRETS["dev"]) as dev,
            _session(url, SECRETS["hr"], mode="legacy", message_handler=on_legacy_message) as old,
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks resources/subscribe deprecated for 2026 clients
                for uri in every_uri:
                    await old.subscribe_resource(uri)
            await old.call_tool("search_policy_docs", {"query": "leave"})  # a 2025 session hears of tool changes
            async with (
                hr.listen(tools_list_changed=True, resource_subscriptions=every_uri) as hr_events,
                dev.listen(tools_list_changed=True, resource_subscriptions=every_uri) as dev_events,
            ):
                write(tmp_path / "api" / "more.md", "# Webhooks\n\nRetries back off exponentially.\n")
                await dev.call_tool("sync_knowledge_base", {"kb": "api_docs"})  # its tool's description changes
                dev_heard = [await _next_event(dev_events) for _ in range(3)]
                await hr.call_tool("sync_knowledge_base", {"kb": "policy_docs"})
                hr_heard = [await _next_event(hr_events) for _ in range(2)]
                with anyio.fail_after(20):
                    await policy_heard.wait()
    assert sorted(dev_heard) == ["ToolsListChanged", "kb://api_docs/status", "kb://knowledge-bases"]
    assert sorted(hr_heard) == ["kb://knowledge-bases", "kb://policy_docs/status"]  # first: nothing of api_docs
    assert legacy_heard[:2] == [
        "notifications/resources/updated kb://policy_docs/status",
        "notifications/resources/updated kb://knowledge-bases",
    ], legacy_heard


async def _next_event(events: AsyncIterator[object]) -> str:
    with anyio.fail_after(20):
        event = await events.__anext__()
    return str(getattr(event, "uri", None) or type(event).__name__)


async def test_a_busy_writer_lock_names_only_the_kbs_the_caller_may_see(tmp_path: Path, embedder: FastEmbedder) -> None:
    """The lock is index-wide: hr, meeting dev's running sync of api_docs, learns that a sync runs, not which; dev
    is told it is api_docs and how far it is."""
    from mcp_kb.settings import load_config
    from mcp_kb.index import open_store
    from mcp_kb.index.state import sync_lock, write_progress

    config = _two_syncing_teams(tmp_path, embedder)
    store = open_store(load_config(config).storage)
    with serve_http(config, "--transport", "http", env=_env()) as (port, _log):
        url = f"http://127.0.0.1:{port}/mcp"
        with sync_lock(store, ["api_docs"], wait=False):  # dev's sync, running in another process
            write_progress(store, "api_docs", SyncProgress(3, 10))
            async with _session(url, SECRETS["hr"]) as hr, _session(url, SECRETS["dev"]) as dev:
                hr_busy = await hr.call_tool("sync_knowledge_base", {"kb": "policy_docs", "wait": False})
                dev_busy = await dev.call_tool("sync_knowledge_base", {"kb": "api_docs", "wait": False})
    assert hr_busy.is_error and text_of(hr_busy.content[0]).startswith("a sync of this index is already running")
    assert "api_docs" not in text_of(hr_busy.content[0]) and "3 of 10" not in text_of(hr_busy.content[0])
    assert dev_busy.is_error and "a sync of api_docs is already running" in text_of(dev_busy.content[0])
    assert "api_docs: 3 of 10 files" in text_of(dev_busy.content[0])


async def test_a_remote_sync_that_fails_names_neither_the_index_nor_the_cluster_where_they_are(
    tmp_path: Path, embedder: FastEmbedder
) -> None:
    """dev's sync on a Ray cluster where nothing answers: dev reads that the cluster at <Ray cluster> cannot be
    joined, in the tool's error and in the KB's status; the process owner reads the address."""
    from mcp_kb.app import App
    from mcp_kb.errors import KBError
    from mcp_kb.settings import load_config

    pytest.importorskip("ray", reason="the Ray engine is an extra: pip install 'mcp-kb-server[ray]'")
    config = _two_syncing_teams(tmp_path, embedder)
    address = closed_address()
    with config.open("a", encoding="utf-8") as toml:
        toml.write(f'[sync]\nengine = "ray"\nray_address = "{address}"\n')
    write(tmp_path / "api" / "errors.md", "# Errors\n\nE5022: the session expired.\n")  # something to index
    with serve_http(config, "--transport", "http", env=_env()) as (port, _log):
        async with _session(f"http://127.0.0.1:{port}/mcp", SECRETS["dev"]) as dev:
            failed = await dev.call_tool(SYNC_TOOL, {"kb": "api_docs"})
            status = json.loads(text_of((await dev.read_resource("kb://api_docs/status")).contents[0]))
    said = [text_of(failed.content[0]), status["last_error"]]
    assert failed.is_error and status["last_outcome"] == "failed"
    assert all("cannot join the Ray cluster at <Ray cluster>: nothing answers there" in text for text in said), said
    assert not any(address in text or str(tmp_path) in text for text in said), said
    with pytest.raises(KBError, match=f"cannot join the Ray cluster at {address}"):
        App(load_config(config), embedder=embedder).sync(SyncRequest(kb="api_docs"))


async def test_the_shape_of_a_scoped_callers_tool_list_tells_nothing_of_the_kbs_beyond_it(tmp_path: Path) -> None:
    """`search_tools = "auto"` switched to the one tool across KBs above eight configured KBs: a caller granted 3 of 9
    got that tool, one granted 3 of 3 got one each, so the list told how many KBs the server has. The switch counts
    what the caller sees; the owner of nine still gets the tool across them."""
    kbs = []
    for n in range(9):
        write(tmp_path / f"team{n}" / "notes.md", f"# Team {n}\n\nNotes of team {n}.\n")
        kbs += [
            "[[kb]]",
            f'name = "team{n}"',
            f'description = "Team {n} notes"',
            f'paths = ["{tmp_path / f"team{n}"}"]',
        ]
    config = tmp_path / "kb.toml"
    config.write_text(
        "\n".join(
            [
                f'storage = "{tmp_path / "index"}"',
                "[server]",
                "[[server.tokens]]",
                'name = "three"',
                'secret_env = "HR_TOKEN"',
                'kbs = ["team0", "team1", "team2"]',
                "[[server.tokens]]",
                'name = "all"',
                'secret_env = "LIMITED_TOKEN"',
                'kbs = ["*"]',
                "[[server.tokens]]",
                'name = "one"',
                'secret_env = "ONE_TOKEN"',
                'kbs = ["team4"]',
                *kbs,
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    with serve_http(config, "--transport", "http", env={**_env(), "ONE_TOKEN": "one-secret-4e1d"}) as (port, _log):
        url = f"http://127.0.0.1:{port}/mcp"
        async with _session(url, SECRETS["hr"]) as three:
            three_tools = [tool.name for tool in (await three.list_tools()).tools]
            instructions = three.instructions
            hidden = await three.call_tool("search_team5", {"query": "notes"})
            absent = await three.call_tool("search_nosuch", {"query": "notes"})
        async with _session(url, SECRETS["limited"]) as everyone:
            all_tools = [tool.name for tool in (await everyone.list_tools()).tools]
        async with _session(url, "one-secret-4e1d") as one:
            one_tools = [tool.name for tool in (await one.list_tools()).tools]
    assert three_tools == ["search_team0", "search_team1", "search_team2", *DOCUMENT_TOOLS]  # as if 3 were configured
    assert instructions and "search_team0" in instructions and "team5" not in instructions
    assert hidden.is_error and text_of(hidden.content[0]).replace("search_team5", "X") == text_of(
        absent.content[0]
    ).replace("search_nosuch", "X")
    assert "search_knowledge_bases" in all_tools and not any(name.startswith("search_team") for name in all_tools)
    assert one_tools == ["search_team4", "read_document", "list_documents"]  # a server of one KB lists no tool across
