"""Harness, HTTP surfaces: a real `mcp-kb serve` (scoped tokens, OAuth against an issuer of this test's own,
the admin page) attacked as a local web page, a colliding identity and a hostile issuer would. Slow (the
issuer's slowness and drips are real waits); prints its figures: cases held, JWKS fetches per burst of
unknown key ids, the worst client wait while the issuer is slow or drips."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import anyio
import httpx
import pytest
from fake_issuer import Issuer, serve_issuer
from helpers import write
from served import serve_http
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.slow

AUDIENCE = "https://kb.example.test/mcp"
ADMIN, LIMITED = "admin-secret-4c1e", "limited-secret-77aa"
T = TypeVar("T")
_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, issuer: Issuer, embedder: FastEmbedder
) -> Iterator[tuple[str, Path, Callable[[], str]]]:
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    base = tmp_path_factory.mktemp("hostile-http")
    write(base / "docs" / "leave.md", "# Leave\n\nApply for annual leave in the HR portal two weeks ahead.\n")
    config = base / "kb.toml"
    config.write_text(
        f'storage = "{base / "index"}"\n[server]\naudit_log = "{base / "audit.jsonl"}"\n'
        f'[[server.tokens]]\nname = "admin"\nsecret_env = "H_ADMIN"\nkbs = ["*"]\nsync = true\n'
        f'[[server.tokens]]\nname = "limited"\nsecret_env = "H_LIMITED"\nkbs = ["docs"]\n'
        f"requests_per_minute = 2\n"
        f'[server.oauth]\nissuer = "{issuer.url}"\naudience = "{AUDIENCE}"\nrequests_per_minute = 30\n'
        f'[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{base / "docs"}"]\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    env = {**os.environ, "H_ADMIN": ADMIN, "H_LIMITED": LIMITED}
    env.pop("MCP_KB_TOKEN", None)
    with serve_http(config, "--transport", "http", env=env) as (port, log):
        yield f"http://127.0.0.1:{port}", base, log


def _report(capsys: pytest.CaptureFixture[str], title: str, figures: Mapping[str, object]) -> None:
    with capsys.disabled():
        print(f"\n[harness] {title}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


def _unknown_key_token(issuer: Issuer, number: int) -> str:
    import jwt

    return jwt.encode({"sub": "x"}, issuer.keys["key-1"], algorithm="RS256", headers={"kid": f"forged-{number}"})


async def _read_forged_uri(url: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        with pytest.raises(MCPError):
            await client.read_resource("kb://x\nowner: 999 requests\x1b[2J/status")


def _timed(url: str, token: str) -> tuple[int, float]:
    """A ping with this token: its status and how long the client waited."""
    started = time.monotonic()
    with httpx.Client(timeout=60) as client:
        status = client.post(
            f"{url}/mcp", json=_PING, headers={**_JSON, "Authorization": f"Bearer {token}"}
        ).status_code
    return status, time.monotonic() - started


def _while_the_issuer_is_asked(issuer: Issuer, work: Callable[[], T]) -> tuple[T, int]:
    """work()'s result from the first round during which the server fetched the issuer's keys, and how many
    fetches that round made."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fetches = issuer.jwks_fetches
        result = work()
        if issuer.jwks_fetches > fetches:
            return result, issuer.jwks_fetches - fetches
        time.sleep(0.2)  # a poll interval, not a wait the outcome depends on
    raise AssertionError("the server never asked the issuer for its keys again")


def _burst_on_a_slow_fetch(url: str, issuer: Issuer, tokens: list[str]) -> tuple[list[tuple[int, float]], int]:
    """Sends tokens[0] until the server starts a fetch of the issuer's keys for it, then the other tokens while
    that slow fetch is in flight (sent all at once, some could come before the server's 5 s gap is over and be
    refused without a fetch): every answer, and how many fetches the whole burst made."""
    deadline = time.monotonic() + 60
    with ThreadPoolExecutor(len(tokens)) as pool:
        while time.monotonic() < deadline:
            fetches = issuer.jwks_fetches
            first = pool.submit(_timed, url, tokens[0])
            while not first.done() and issuer.jwks_fetches == fetches:
                time.sleep(0.02)  # a poll interval: the issuer holds its answer for seconds
            if issuer.jwks_fetches > fetches:
                rest = [pool.submit(_timed, url, token) for token in tokens[1:]]
                answers = [first.result(), *(answer.result() for answer in rest)]
                return answers, issuer.jwks_fetches - fetches
            time.sleep(0.2)
    raise AssertionError("the server never asked the issuer for its keys again")


def test_http_surfaces_hold_under_attack(
    server: tuple[str, Path, Callable[[], str]], issuer: Issuer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, base, log = server
    port = int(url.rsplit(":", 1)[1])
    elsewhere = f"http://127.0.0.1:{port % 60000 + 1}"  # a page on another local port
    held: dict[str, bool] = {}
    with httpx.Client(base_url=url, timeout=60) as http:
        admin = {"Authorization": f"Bearer {ADMIN}"}
        found = re.search(r'name="csrf" value="([0-9a-f]+)"', http.get("/ui/kb/docs", headers=admin).text)
        assert found, "no csrf field"
        csrf = found.group(1)
        before = http.get("/ui/status.json", headers=admin).json()
        held["sign-in from another port"] = (
            http.post("/ui/login", data={"token": ADMIN}, headers={"Origin": elsewhere}).status_code == 403
        )
        held["sync from another port"] = (
            http.post(
                "/ui/kb/docs/sync", data={"csrf": csrf, "full": "1"}, headers={**admin, "Origin": elsewhere}
            ).status_code
            == 403
        )
        guess = hmac.new(b"planted", b"mcp-kb page form", hashlib.sha256).hexdigest()
        held["form value from a planted cookie"] = http.post(
            "/ui/kb/docs/sync",
            data={"csrf": guess, "full": "1", "allow_mass_delete": "1"},
            headers={"Origin": url, "Cookie": "mcp_kb_token=planted"},
        ).status_code in (401, 403)
        held["form without Origin"] = (
            http.post("/ui/kb/docs/sync", data={"csrf": csrf}, headers=admin).status_code == 403
        )
        held["nothing ran"] = http.get("/ui/status.json", headers=admin).json() == before

        limited = {**_JSON, "Authorization": f"Bearer {LIMITED}"}
        spent = [http.post("/mcp", json=_PING, headers=limited).status_code for _ in range(3)]
        as_limited = {
            **_JSON,
            "Authorization": f"Bearer {issuer.token(AUDIENCE, subject='limited', scope='kb:docs:search')}",
        }
        held["a subject named like a token has its own rate limit"] = (
            spent[2] == 429 and http.post("/mcp", json=_PING, headers=as_limited).status_code != 429
        )

        garbage_statuses = set()
        for garbage in (b'{"keys": 5}', b"[" * 200_000, b'{"keys": [{"kty": "RSA", "kid": ["x"]}]}'):
            issuer.garbage = garbage
            fetches = issuer.jwks_fetches
            deadline = time.monotonic() + 30
            while issuer.jwks_fetches == fetches and time.monotonic() < deadline:
                answer = http.post(
                    "/mcp", json=_PING, headers={**_JSON, "Authorization": f"Bearer {_unknown_key_token(issuer, 0)}"}
                )
                garbage_statuses.add(answer.status_code)
                time.sleep(0.5)
        issuer.garbage = None
        held["a garbage JWKS is never a 500"] = garbage_statuses <= {401, 503}

    # The server fetches again for an unknown key at most every 5 s (its own timer): each measure is repeated
    # until the issuer sees the fetch it makes, and the round during which that fetch happened is the one kept.
    issuer.delay = 3.0
    issuer.new_key("published-late")
    tokens = [
        *(_unknown_key_token(issuer, n) for n in range(6)),
        issuer.token(AUDIENCE, kid="published-late", subject="new", scope="kb:docs:search"),
    ]
    answers, burst_fetches = _burst_on_a_slow_fetch(url, issuer, tokens)
    issuer.delay = 0.0
    held["a slow issuer's burst shares one fetch"] = burst_fetches == 1 and answers[-1][0] != 401

    issuer.drip = 0.05  # a 2 KB JWKS would take minutes
    (dripped_status, drip_wait), _ = _while_the_issuer_is_asked(
        issuer, lambda: _timed(url, _unknown_key_token(issuer, 99))
    )
    issuer.drip = 0.0
    held["a dripped JWKS is cut at the fetch deadline"] = dripped_status in (401, 503) and drip_wait < 15

    anyio.run(_read_forged_uri, f"{url}/mcp")
    lines = [json.loads(line) for line in (base / "audit.jsonl").read_text(encoding="utf-8").split("\n") if line]
    held["who is kind + name in the audit trail"] = all(
        line["kind"] == "oauth" for line in lines if line["who"] == "limited" and line.get("issuer")
    )
    held["a URI naming no KB is audited as unknown"] = any(line["kb"] == "?" for line in lines) and not any(
        "owner: 999" in line["kb"] for line in lines
    )
    held["no traceback in the server's log"] = "Traceback" not in log()

    figures = {
        "cases held": sum(held.values()),
        "of": len(held),
        "JWKS fetches per burst of 7": burst_fetches,
        "worst client wait, slow issuer (s)": round(max(wait for _, wait in answers), 1),
        "client wait, dripped JWKS (s)": round(drip_wait, 1),
    }
    _report(capsys, "HTTP surfaces", figures)
    assert all(held.values()), [case for case, ok in held.items() if not ok]
