"""Push webhooks (`POST /hooks/git/KB/REPO`) against a real `mcp-kb serve --transport http` behind a token, a real
repository and real signatures: a signed push of a new commit makes status name it within seconds, in GitHub's,
GitLab's and Gitea's forms; every refusal (a wrong or missing signature, another ref, a replay, a body too large
however it is sent, a webhook that is not there, a read-only server) changes nothing; a burst is at most two syncs;
the token gate still guards everything else."""

from __future__ import annotations

import http.client
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from forge_hooks import gitea, github, gitlab, push_body
from git_server import Repo
from helpers import until
from served import serve_http

from mcp_kb.api import App, KBStatus
from mcp_kb.settings import load_config

SECRET = "hook-secret-5b1f9e"
TOKEN = "bearer-token-a7c3"
HOOK = "/hooks/git/code/lib"
_MB = 1 << 20


@dataclass
class Served:
    port: int
    repo: Repo
    config: Path
    log: Callable[[], str]

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("POST", path, body=body, headers=headers)
            answer = connection.getresponse()
            text = answer.read()
            return answer.status, json.loads(text) if text.startswith(b"{") else {"raw": text.decode("latin-1")}
        finally:
            connection.close()

    def push(self, commit: str) -> tuple[int, dict[str, Any]]:
        body = push_body(commit)
        return self.post(HOOK, body, github(SECRET, body))

    def status(self) -> KBStatus:
        return App(load_config(self.config)).status("code")[0]

    def syncs(self) -> int:
        return len(App(load_config(self.config)).sync_history("code").recent)

    def settled_at(self, commit: str) -> int:
        """Wait until the index holds `commit` and no sync runs; how many syncs the KB has had."""
        until(
            lambda: (s := self.status()).commits.get("lib") == commit and not s.sync_running,
            seconds=60,
            what=f"status naming {commit[:12]}",
        )
        return self.syncs()


def _config(tmp_path: Path, repo: Repo) -> Path:
    config = tmp_path / "kb.toml"
    entries = "".join(
        f'[[kb.repos]]\nurl = "{repo.folder}"\nref = "main"\nname = "{name}"\n{extra}\n'
        for name, extra in (
            ("lib", 'webhook_secret_env = "HOOK_SECRET"'),
            ("plain", ""),
            ("unset", 'webhook_secret_env = "HOOK_SECRET_NOT_SET"'),
        )
    )
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "code"\ndescription = "A repository"\n'
        f"[kb.sync]\non_start = true\n{entries}",
        encoding="utf-8",
    )
    return config


def _environment(**more: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "HOOK_SECRET_NOT_SET"}
    return {**environment, "HOOK_SECRET": SECRET, "MCP_KB_TOKEN": TOKEN, **more}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp_path = tmp_path_factory.mktemp("hooks")
    repo = Repo(tmp_path / "lib")
    repo.write("README.md", "# Library\n\nThe first words.\n")
    first = repo.commit("first")
    config = _config(tmp_path, repo)
    with serve_http(config, "--transport", "http", env=_environment()) as (port, log):
        server = Served(port, repo, config, log)
        server.settled_at(first)  # the start-up sync
        yield server


def _commit(served: Served, words: str) -> str:
    served.repo.write("notes.md", f"# Notes\n\n{words}\n")
    return served.repo.commit(words)


def test_a_signed_github_push_of_a_new_commit_makes_status_name_it(served: Served) -> None:
    before = served.syncs()
    commit = _commit(served, "a github push")
    assert served.push(commit) == (202, {"status": "sync", "detail": "a push to refs/heads/main: code syncs"})
    assert served.settled_at(commit) == before + 1


def test_gitlab_and_gitea_deliveries_sync_too(served: Served) -> None:
    commit = _commit(served, "a gitlab push")
    status, _ = served.post(HOOK, push_body(commit, owner="project"), gitlab(SECRET))
    assert status == 202
    served.settled_at(commit)
    commit = _commit(served, "a gitea push")
    body = push_body(commit)
    status, answer = served.post(HOOK, body, gitea(SECRET, body))
    assert (status, answer["status"]) == (202, "sync")
    served.settled_at(commit)


def _refused_deliveries(served: Served, commit: str) -> list[tuple[int, str]]:
    """Every delivery that must not sync, sent once each: (status, what it was)."""
    body = push_body(commit)
    answers = []

    def send(what: str, path: str, data: bytes, headers: dict[str, str]) -> None:
        answers.append((served.post(path, data, headers)[0], what))

    send("wrong signature", HOOK, body, github("not-the-secret", body))
    send("signature of another body", HOOK, body, {**github(SECRET, body + b" "), "X-GitHub-Delivery": "x1"})
    send(
        "no signature",
        HOOK,
        body,
        {"Content-Type": "application/json", "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4())},
    )
    send("wrong gitlab token", HOOK, body, gitlab(SECRET + "x"))
    send("wrong gitea signature", HOOK, body, {**gitea(SECRET, body), "X-Gitea-Signature": "00" * 32})
    other = push_body(commit, ref="refs/heads/feature")
    send("another branch", HOOK, other, github(SECRET, other))
    tag = push_body(commit, ref="refs/tags/main-2")
    send("a tag", HOOK, tag, github(SECRET, tag))
    send("a ping", HOOK, b'{"zen": "x"}', github(SECRET, b'{"zen": "x"}', event="ping"))
    send("an issue event", HOOK, body, github(SECRET, body, event="issues"))
    for odd in (b"[]", b'"main"', b"null", b'{"ref": 5}', b"{", b"\xff\xfe", b"[" * 200_000 + b"]" * 200_000):
        send(f"odd body {odd[:8]!r}", HOOK, odd, github(SECRET, odd))
    replayed = github(SECRET, push_body("0" * 40))  # a deletion, taken (and nothing to sync): then sent again
    send("a deletion", HOOK, push_body("0" * 40), replayed)
    send("a replay", HOOK, push_body("0" * 40), replayed)
    for path in (
        "/hooks/git/nope/lib",
        "/hooks/git/code/nope",
        "/hooks/git/code/plain",
        "/hooks/git/code/unset",
        "/hooks/git/code/lib/extra",
        "/hooks/git/code",
        "/hooks/git/../code/lib",
        "/hooks/git/code/../lib",
        "/hooks/git/code%2Fnope",
        "/hooks/git/%E7%9F%A5%E8%AF%86/lib",
        "/hooks/x/code/lib",
        "/hooks/",
    ):
        send(f"nothing at {path}", path, body, github(SECRET, body))
    return answers


def test_refused_deliveries_sync_nothing(served: Served) -> None:
    before = served.syncs()
    commit = _commit(served, "refused pushes")
    answers = _refused_deliveries(served, commit)
    expected = {
        "wrong signature": 401,
        "signature of another body": 401,
        "no signature": 401,
        "wrong gitlab token": 401,
        "wrong gitea signature": 401,
        "another branch": 202,
        "a tag": 202,
        "a ping": 200,
        "an issue event": 202,
        "a deletion": 202,
        "a replay": 409,
    }
    for status, what in answers:
        wanted = expected.get(what, 404 if what.startswith("nothing") else 400)
        assert status == wanted, f"{what}: {status}, not {wanted}"
    assert served.status().commits["lib"] != commit
    assert served.push(commit)[0] == 202  # the one delivery that syncs: all the others before it made none
    assert served.settled_at(commit) == before + 1


def test_every_missing_webhook_answers_alike(served: Served) -> None:
    body = push_body("1" * 40)
    answers = {
        (status, json.dumps(answer))
        for status, answer in (
            served.post(path, body, github(SECRET, body))
            for path in (
                "/hooks/git/nope/lib",
                "/hooks/git/code/nope",
                "/hooks/git/code/plain",
                "/hooks/git/code/unset",
                "/hooks/git/%E7%9F%A5%E8%AF%86/lib",
            )
        )
    }
    [(status, answer)] = answers
    assert status == 404 and "code" not in answer and SECRET not in answer


def test_a_replay_is_refused_and_syncs_nothing(served: Served) -> None:
    before = served.syncs()
    commit = _commit(served, "replayed push")
    body = push_body(commit)
    headers = github(SECRET, body)
    assert served.post(HOOK, body, headers)[0] == 202
    served.settled_at(commit)
    assert served.post(HOOK, body, headers) == (
        409,
        {"status": "replayed", "detail": "this delivery was taken already; push again to sync"},
    )
    again = _commit(served, "after the replay")
    assert served.push(again)[0] == 202
    assert served.settled_at(again) == before + 2


def test_a_burst_of_pushes_is_at_most_two_syncs(served: Served) -> None:
    before = served.syncs()
    commit = _commit(served, "a burst")
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: served.push(commit)[0], range(24))) == {202}
    served.settled_at(commit)
    control = _commit(served, "after the burst")  # its sync comes after any the burst asked for
    assert served.push(control)[0] == 202
    assert served.settled_at(control) - before <= 3  # the burst's one or two, and the control's (or it folds in)


def _raw(served: Served, head: bytes, body_parts: Iterable[bytes] = ()) -> bytes:
    """Send a request as bytes, part by part until the server answers or closes; its answer's first bytes."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(head)
        for part in body_parts:
            try:
                sock.sendall(part)
            except OSError:  # the server answered and closed: it read no more
                break
        received = b""
        try:
            while b"\r\n\r\n" not in received and (more := sock.recv(65536)):
                received += more
        except ConnectionResetError:
            pass
        return received


def _head(served: Served, headers: dict[str, str], length: str | None) -> bytes:
    lines = [
        f"POST {HOOK} HTTP/1.1",
        f"Host: 127.0.0.1:{served.port}",
        *(f"{name}: {value}" for name, value in headers.items()),
        f"Content-Length: {length}" if length else "Transfer-Encoding: chunked",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_body_over_a_megabyte_is_refused_however_it_comes(served: Served) -> None:
    before = served.syncs()
    commit = _commit(served, "oversize pushes")
    large = push_body(commit)[:-1] + b', "padding": "' + b"x" * (2 * _MB) + b'"}'
    signed = github(SECRET, large)
    # Declared: refused on its length, before a byte of the body is sent.
    assert _raw(served, _head(served, signed, str(len(large)))).startswith(b"HTTP/1.1 413")
    # Chunked: refused once a megabyte came; the rest is never read.
    chunks = (
        f"{len(part):x}\r\n".encode() + part + b"\r\n"
        for part in (large[i : i + 65536] for i in range(0, len(large), 65536))
    )
    assert _raw(served, _head(served, {**signed, "X-GitHub-Delivery": str(uuid.uuid4())}, None), chunks).startswith(
        b"HTTP/1.1 413"
    )
    # A length that lies low: only what it declares is the body, whose signature then fails.
    assert _raw(
        served, _head(served, {**signed, "X-GitHub-Delivery": str(uuid.uuid4())}, "100"), iter([large])
    ).startswith(b"HTTP/1.1 401")
    # A signed body of exactly the limit is read (and is no push: its padding is all there is).
    exact = b" " * (_MB - 2) + b"{}"
    assert served.post(HOOK, exact, github(SECRET, exact))[0] == 400
    assert served.push(commit)[0] == 202
    assert served.settled_at(commit) == before + 1


def test_huge_headers_are_refused_and_the_server_goes_on(served: Served) -> None:
    body = push_body("2" * 40)
    answer = _raw(served, _head(served, {**github(SECRET, body), "X-Padding": "y" * 200_000}, str(len(body))))
    assert answer == b"" or answer.startswith((b"HTTP/1.1 4", b"HTTP/1.1 5"))
    assert served.post("/hooks/git/nope/lib", body, github(SECRET, body))[0] == 404


def test_only_post_is_taken(served: Served) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", HOOK)
    answer = connection.getresponse()
    assert (answer.status, answer.getheader("allow")) == (405, "POST")


def test_the_token_gate_still_guards_the_rest(served: Served) -> None:
    body = json.dumps(
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
    ).encode()
    mcp_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    assert served.post("/mcp", body, mcp_headers)[0] == 401
    assert served.post("/mcp", body, {**mcp_headers, **github(SECRET, body)})[0] == 401  # a signature is no token
    assert served.post("/hooks/../mcp", body, mcp_headers)[0] == 404  # the hooks' own answer, never the MCP app's
    assert served.post("/mcp", body, {**mcp_headers, "Authorization": f"Bearer {TOKEN}"})[0] == 200


def test_the_secret_is_never_said(served: Served) -> None:
    assert SECRET not in served.log()


def test_a_read_only_server_refuses_webhooks(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    repo.write("README.md", "# Library\n")
    repo.commit()
    with serve_http(_config(tmp_path, repo), "--transport", "http", "--read-only", env=_environment()) as (port, _):
        body = push_body(repo.head())
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", HOOK, body=body, headers=github(SECRET, body))
        answer = connection.getresponse()
        assert answer.status == 403 and json.loads(answer.read())["error"] == "read_only"
