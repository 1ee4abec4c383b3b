"""Team access through real HTTP sessions against `mcp-kb serve`: scoped tokens see disjoint tools and
cannot reach each other's KBs by any route, OAuth users sign in with an issuer's tokens, the audit
trail says who did what (and holds no secret), rate limits answer 429, and stateless replicas serve
one client behind a round-robin balancer."""

import hashlib
import json
import os
from contextlib import asynccontextmanager

import httpx
import pytest
from fake_issuer import serve_issuer
from helpers import write
from mcp import Client
from mcp.shared.exceptions import MCPError
from served import serve_http

pytestmark = pytest.mark.anyio

AUDIENCE = "https://kb.example.test/mcp"
SECRETS = {"hr": "hr-secret-7f3a", "dev": "dev-secret-91bc", "limited": "limited-secret-22d0"}
LEAVE = "# Leave\n\n## Annual leave\n\nApply for annual leave in the HR portal two weeks ahead.\n"
USERS = "# API\n\n## getUserInfo\n\ngetUserInfo returns the signed-in user. Error E5021: the token expired.\n"
_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(base, issuer_url, extra=""):
    storage = base / "index"
    lines = [f'storage = "{storage}"',
             "[server]", 'audit_log = "audit.jsonl"', *extra.splitlines(),
             "[[server.tokens]]", 'name = "hr"', 'secret_env = "HR_TOKEN"', 'kbs = ["policy_docs"]',
             "[[server.tokens]]", 'name = "dev"', f'secret_sha256 = "{_sha(SECRETS["dev"])}"', 'kbs = ["api_*"]',
             "sync = true",
             "[[server.tokens]]", 'name = "limited"', 'secret_env = "LIMITED_TOKEN"', 'kbs = ["api_docs"]',
             "requests_per_minute = 2",
             "[server.oauth]", f'issuer = "{issuer_url}"', f'audience = "{AUDIENCE}"',
             "[[kb]]", 'name = "policy_docs"', 'description = "HR policies: leave, travel"',
             f'paths = ["{base / "policies"}"]',
             "[[kb]]", 'name = "api_docs"', 'description = "API reference for developers"',
             f'paths = ["{base / "api"}"]']
    path = base / "kb.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sha(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _env():
    return {**{k: v for k, v in os.environ.items() if k != "MCP_KB_TOKEN"},
            "HR_TOKEN": SECRETS["hr"], "LIMITED_TOKEN": SECRETS["limited"]}


@pytest.fixture(scope="module")
def issuer():
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture(scope="module")
def team(tmp_path_factory, embedder, issuer):
    """Two KBs synced once and served over HTTP with scoped tokens and OAuth."""
    from mcp_kb.app import App
    from mcp_kb.config import load_config

    base = tmp_path_factory.mktemp("team")
    write(base / "policies" / "leave.md", LEAVE)
    write(base / "api" / "users.md", USERS)
    config = _config(base, issuer.url)
    App(load_config(config), embedder=embedder).sync()
    with serve_http(config, "--transport", "http", env=_env()) as (port, log):
        yield f"http://127.0.0.1:{port}/mcp", base, log


@asynccontextmanager
async def _session(url, token):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def _read_error(client, uri) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    return str(caught.value)


async def _visible(client):
    tools = (await client.list_tools()).tools
    listed = json.loads((await client.read_resource("kb://knowledge-bases")).contents[0].text)
    return tools, [kb["name"] for kb in listed]


async def test_two_scoped_tokens_see_disjoint_tools_and_only_their_kbs(team):
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        hr_tools, hr_kbs = await _visible(hr)
        hr_instructions = hr.instructions
    async with _session(url, SECRETS["dev"]) as dev:
        dev_tools, dev_kbs = await _visible(dev)
        dev_instructions = dev.instructions
    assert [t.name for t in hr_tools] == ["search_policy_docs"] and hr_kbs == ["policy_docs"]
    assert sorted(t.name for t in dev_tools) == ["search_api_docs", "sync_knowledge_base"] and dev_kbs == ["api_docs"]
    hr_text = json.dumps([t.model_dump(mode="json") for t in hr_tools]) + hr_instructions
    dev_text = json.dumps([t.model_dump(mode="json") for t in dev_tools]) + dev_instructions
    assert "api_docs" not in hr_text and "API reference" not in hr_text
    assert "policy_docs" not in dev_text and "HR policies" not in dev_text


async def test_another_tokens_kb_answers_exactly_like_a_kb_that_does_not_exist(team):
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        for hidden, absent in [("kb://api_docs/status", "kb://nosuch/status"),
                               ("kb://api_docs/metrics", "kb://nosuch/metrics"),
                               ("kb://api_docs/documents/users.md", "kb://nosuch/documents/users.md"),
                               ("kb://api%5Fdocs/status", "kb://nosuch/status"),
                               ("kb://api_docs/documents/users%2Emd", "kb://nosuch/documents/users%2Emd")]:
            hidden_error = await _read_error(hr, hidden)
            absent_error = await _read_error(hr, absent)
            assert hidden_error.replace("api%5Fdocs", "api_docs").replace("api_docs", "X") == \
                absent_error.replace("nosuch", "X"), hidden
            assert "policy_docs" in absent_error  # it names what the caller may see, and only that
        with pytest.raises(MCPError) as hidden_prompt:
            await hr.get_prompt("answer_with_citations", {"question": "q", "kb": "api_docs"})
        with pytest.raises(MCPError) as absent_prompt:
            await hr.get_prompt("answer_with_citations", {"question": "q", "kb": "nosuch"})
        own = await hr.get_prompt("answer_with_citations", {"question": "q"})
    assert str(hidden_prompt.value).replace("api_docs", "X") == str(absent_prompt.value).replace("nosuch", "X")
    assert "search_policy_docs" in own.messages[0].content.text and "api" not in own.messages[0].content.text


async def test_tools_outside_the_grant_are_unknown_tools_even_called_by_name(team):
    url, _, _ = team
    async with _session(url, SECRETS["hr"]) as hr:
        sync = await hr.call_tool("sync_knowledge_base", {})
        search = await hr.call_tool("search_api_docs", {})  # bad arguments too: no hint the tool exists
        absent = await hr.call_tool("search_nosuch", {})
        own = await hr.call_tool("search_policy_docs", {"query": "annual leave"})
    assert sync.is_error and sync.content[0].text == "Unknown tool: sync_knowledge_base"
    assert search.is_error and search.content[0].text == "Unknown tool: search_api_docs"
    assert absent.content[0].text == "Unknown tool: search_nosuch"
    assert not own.is_error and own.structured_content["results"][0]["source"] == "leave.md"
    async with _session(url, SECRETS["dev"]) as dev:
        other = await dev.call_tool("sync_knowledge_base", {"kb": "policy_docs"})
        everything = await dev.call_tool("sync_knowledge_base", {})
    assert other.is_error and "unknown knowledge base 'policy_docs'; configured: api_docs" in other.content[0].text
    assert not everything.is_error
    assert [r["kb"] for r in everything.structured_content["reports"]] == ["api_docs"]  # its KBs only


async def test_over_sse_a_scoped_token_sees_only_its_kbs_too(team):
    from mcp.client.sse import sse_client

    _, base, _ = team
    with serve_http(base / "kb.toml", "--transport", "sse", env=_env()) as (port, _log):
        headers = {"Authorization": f"Bearer {SECRETS['hr']}"}
        async with Client(sse_client(f"http://127.0.0.1:{port}/sse", headers=headers)) as hr:
            tools, kbs = await _visible(hr)
            hidden = await hr.call_tool("search_api_docs", {"query": "E5021"})
    assert [t.name for t in tools] == ["search_policy_docs"] and kbs == ["policy_docs"]
    assert hidden.content[0].text == "Unknown tool: search_api_docs"


async def test_an_oauth_user_is_pointed_at_the_issuer_and_signs_in_with_its_token(team, issuer):
    url, _, _ = team
    async with httpx.AsyncClient() as http:
        anonymous = await http.post(url, json=_PING, headers=_JSON)
        challenge = anonymous.headers["www-authenticate"]
        metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
        assert metadata_url == "https://kb.example.test/.well-known/oauth-protected-resource/mcp"
        metadata = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
        expired = await http.post(url, json=_PING, headers={**_JSON, "Authorization":
                                  f"Bearer {issuer.token(AUDIENCE, lifetime=-300, scope='kb:api_docs:search')}"})
    assert anonymous.status_code == 401 and challenge.startswith("Bearer ")
    assert metadata["resource"] == AUDIENCE and metadata["authorization_servers"] == [issuer.url]
    assert "policy_docs" not in json.dumps(metadata)  # public metadata names no KB
    assert expired.status_code == 401 and 'error="invalid_token"' in expired.headers["www-authenticate"]
    token = issuer.token(AUDIENCE, subject="carol", scope="openid kb:api_docs:search")
    async with _session(url, token) as carol:
        tools, kbs = await _visible(carol)
        result = await carol.call_tool("search_api_docs", {"query": "E5021"})
    assert [t.name for t in tools] == ["search_api_docs"] and kbs == ["api_docs"]
    assert result.structured_content["results"][0]["source"] == "users.md"


async def test_the_issuer_rotating_its_key_is_followed_within_the_refetch_gap(team, issuer):
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


async def test_the_audit_trail_says_who_did_what_and_holds_no_secret(team, issuer):
    url, base, log = team
    token = issuer.token(AUDIENCE, subject="dana", scope="kb:policy_docs:search")
    async with _session(url, SECRETS["dev"]) as dev:
        await dev.call_tool("search_api_docs", {"query": "private question about E5021"})
        shown = [(await dev.read_resource(f"kb://api_docs/{what}")).contents[0].text for what in ("status", "metrics")]
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
    assert all(set(e) <= {"time", "who", "kb", "action", "latency_ms", "results", "error"} for e in lines)
    everything_written = (base / "audit.jsonl").read_text() + log() + "".join(shown)
    for secret in [*SECRETS.values(), token, "wrong-secret-5e1d", token.split(".")[2]]:
        assert secret not in everything_written
    assert "private question" not in everything_written  # queries only with audit_queries = true


async def test_a_callers_rate_limit_answers_429_with_retry_after(team):
    url, _, _ = team
    headers = {**_JSON, "Authorization": f"Bearer {SECRETS['limited']}"}
    async with httpx.AsyncClient() as http:
        answers = [await http.post(url, json=_PING, headers=headers) for _ in range(3)]
        others = await http.post(url, json=_PING, headers={**_JSON, "Authorization": f"Bearer {SECRETS['hr']}"})
    assert all(a.status_code != 429 for a in answers[:2]) and answers[2].status_code == 429
    assert 1 <= int(answers[2].headers["retry-after"]) <= 30
    assert others.status_code != 429  # another caller is not held back


async def test_malformed_authorization_headers_are_refused_not_crashed(team):
    url, _, _ = team
    values = [b"", b"Bearer", b"Bearer ", b"Basic aHI6aHItc2VjcmV0", f"Token {SECRETS['hr']}".encode(),
              b"Bearer \xff\xfe", b"Bearer a.b", b"Bearer " + b"x" * 10_000, b"Bearer e30.e30.e30",
              b"Bearer  " + SECRETS["hr"].encode() + b" extra"]
    for value in values:
        assert await _raw_status(url, value) == 401, value[:30]
    assert await _raw_status(url, f"Bearer {SECRETS['hr']}".encode()) != 401


async def _raw_status(url: str, authorization: bytes) -> int:
    """POST a ping with this Authorization header exactly as given (HTTP clients refuse to send some)."""
    import anyio

    address = httpx.URL(url)
    body = json.dumps(_PING).encode()
    request = (f"POST {address.path} HTTP/1.1\r\nHost: {address.host}:{address.port}\r\n"
               "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode()
    request += b"Authorization: " + authorization + b"\r\n\r\n" + body
    async with await anyio.connect_tcp(address.host, address.port) as stream:
        await stream.send(request)
        head = await stream.receive()
    return int(head.split(b" ", 2)[1])


async def test_subscriptions_to_another_kb_are_accepted_like_unknown_uris_and_never_made(make_config):
    """2025-era resources/subscribe and 2026 subscriptions/listen only ever watch the caller's KBs."""
    from dataclasses import dataclass
    from types import SimpleNamespace
    from typing import Any

    from mcp_kb.access import Grant
    from mcp_kb.mcp.guard import Guard
    from mcp_kb.mcp.http_security import Caller

    kbs = [{"name": name, "description": name, "paths": ["docs"]} for name in ("policy_docs", "api_docs")]
    guard = Guard(make_config(*kbs), instructions=lambda grant: "")
    hr = Caller(Grant("hr", frozenset({"policy_docs"})))
    passed = []

    async def call_next(ctx):
        passed.append((ctx.method, ctx.params))
        return {}

    @dataclass
    class Message:  # the fields of the SDK's ServerRequestContext the guard reads
        method: str
        params: dict
        request: Any

    def message(method, params):
        return Message(method, params, SimpleNamespace(scope={"user": hr}))

    assert await guard(message("resources/subscribe", {"uri": "kb://api_docs/status"}), call_next) == {}
    await guard(message("resources/subscribe", {"uri": "kb://policy_docs/status"}), call_next)
    await guard(message("subscriptions/listen", {"notifications": {"toolsListChanged": True, "resourceSubscriptions": [
        "kb://api_docs/status", "kb://policy_docs/status", "kb://knowledge-bases"]}}), call_next)
    assert passed == [
        ("resources/subscribe", {"uri": "kb://policy_docs/status"}),
        ("subscriptions/listen", {"notifications": {"toolsListChanged": True, "resourceSubscriptions": [
            "kb://policy_docs/status", "kb://knowledge-bases"]}}),
    ]


async def test_a_sync_reaches_only_the_kbs_the_caller_may_sync(make_config):
    from dataclasses import dataclass
    from types import SimpleNamespace
    from typing import Any

    from mcp_kb.access import Grant
    from mcp_kb.errors import KBError
    from mcp_kb.mcp.guard import Guard
    from mcp_kb.mcp.http_security import Caller

    kbs = [{"name": name, "description": name, "paths": ["docs"]} for name in ("policy_docs", "api_docs", "runbooks")]
    guard = Guard(make_config(*kbs), instructions=lambda grant: "")

    @dataclass
    class Message:
        method: str
        params: dict
        request: Any

    def as_caller(grant):
        return Message("tools/call", {"name": "sync_knowledge_base"}, SimpleNamespace(scope={"user": Caller(grant)}))

    async def covered(grant, kb):
        async def call_next(_ctx):
            return {"covers": guard.syncable(kb)}
        return (await guard(as_caller(grant), call_next))["covers"]

    ops = Grant("ops", frozenset({"runbooks", "api_docs"}), frozenset({"runbooks"}))
    everything = Grant("admin", frozenset({"policy_docs", "api_docs", "runbooks"}),
                       frozenset({"policy_docs", "api_docs", "runbooks"}))
    assert await covered(ops, None) == ["runbooks"] and await covered(everything, None) == [None]
    with pytest.raises(KBError, match="may search api_docs but not sync it"):
        await covered(ops, "api_docs")
    with pytest.raises(KBError, match="unknown knowledge base 'policy_docs'; configured: api_docs, runbooks"):
        await covered(ops, "policy_docs")
