"""A Ray cluster's address (`[sync] ray_address`, RAY_ADDRESS, `mcp-kb sync --address`): a malformed one is a
settings error naming the key; one where no Ray answers (nothing listens, a silent server, another protocol's)
fails the sync within seconds, in one line naming the setting, however long Ray itself would wait. Every sync
here runs in a child process or a thread with a deadline: a regression fails, it does not hang the suite."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from helpers import closed_address, http_on_loopback, write

from mcp_kb.errors import ConfigError, KBError
from mcp_kb.settings import load_config

CLI = [sys.executable, "-m", "mcp_kb"]
DEADLINE = 15.0  # seconds a sync may take to say that the cluster cannot be joined
MALFORMED = {  # an address, and what the error says of it
    "127.0.0.1:-1": "the port must be a number from 1 to 65535",
    "127.0.0.1:70000": "the port must be a number from 1 to 65535",
    "bad host:1": "'bad host' is not a host name or IP address",
    "http://127.0.0.1:1": "Ray takes no http:// address",
}


def _config(tmp_path: Path, sync: str = "") -> Path:
    """A KB of one document (something to index), with `sync` as its [sync] table's lines."""
    write(tmp_path / "docs" / "a.md", "# A\n\nSomething to index.\n")
    path = tmp_path / "kb.toml"
    path.write_text(f'[storage]\nuri = "{tmp_path / "index"}"\n[sync]\n{sync}\n'
                    f'[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{tmp_path / "docs"}"]\n', encoding="utf-8")
    return path


def _sync(config: Path, *options: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """A failing `mcp-kb sync`'s stderr, and the seconds it took (past DEADLINE: TimeoutExpired)."""
    start = time.monotonic()
    done = subprocess.run([*CLI, "sync", "-c", str(config), *options], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=DEADLINE)
    assert done.returncode == 1, done.stderr[-3000:]
    return done.stderr, time.monotonic() - start


def _one_line(stderr: str) -> str:
    """The error line: click's `Error: ...`, the only line the failure writes."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr[-3000:]
    return lines[0]


@contextmanager
def _silent_listener() -> Iterator[str]:
    """HOST:PORT of a server that accepts connections and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the server shut down
            while True:
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept (Linux)
        server.close()
        thread.join(5)
        for connection in held:
            connection.close()


class _Web(BaseHTTPRequestHandler):
    """An HTTP server's answer to anything: an error page."""

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _listener(kind: str) -> Iterator[str]:
    """HOST:PORT where no Ray answers: nothing listens, a silent server, or an HTTP server."""
    if kind == "closed":
        yield closed_address()
    elif kind == "silent":
        with _silent_listener() as address:
            yield address
    else:
        with http_on_loopback(_Web) as url:
            yield url.removeprefix("http://")


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_address_is_a_settings_error_naming_the_key_and_the_file(tmp_path, address):
    config = _config(tmp_path, f'engine = "ray"\nray_address = "{address}"')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    said = str(caught.value)
    assert "\n" not in said and said.startswith(f"{config}: sync.ray_address: not a Ray cluster address: "), said
    assert MALFORMED[address] in said and f"(got {address!r})" in said


def test_a_malformed_ray_address_variable_is_named_as_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:-1")
    with pytest.raises(ConfigError, match=r"sync\.ray_address: not a Ray cluster address: .*set by the RAY_ADDRESS "
                                          r"variable"):
        load_config(_config(tmp_path, 'engine = "ray"'))


def test_an_address_only_a_ray_sync_uses_is_not_checked_for_other_syncs(tmp_path, monkeypatch):
    """RAY_ADDRESS may be set for other Ray tools (`ray job submit` takes http://HEAD:8265): a local sync and the
    server do not read it."""
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert load_config(_config(tmp_path)).sync.engine == "local"


def test_local_is_ray_s_word_for_a_ray_of_the_sync_s_own(tmp_path):
    assert load_config(_config(tmp_path, 'engine = "ray"\nray_address = "local"')).sync.ray_address == ""


@pytest.mark.parametrize("address", ["head-node:6379", "ray://head-node:10001", "10.0.0.7:6379", "[::1]:6379",
                                     "ray://[fe80::1]:10001", "ray_head:6379", "auto", ""])
def test_the_forms_ray_takes_are_taken(address):
    from mcp_kb.settings import SyncEngineConfig

    assert SyncEngineConfig(engine="ray", ray_address=address).ray_address == address


def test_a_config_s_malformed_address_fails_a_sync_switched_to_ray_naming_the_key():
    from mcp_kb.settings import SyncEngineConfig

    with pytest.raises(ConfigError, match=r"^\[sync\] ray_address: not a Ray cluster address: no port; write "
                                          r"HOST:PORT .* \(got 'head'\)$"):
        SyncEngineConfig(ray_address="head").overridden("ray", None)


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_address_option_fails_the_command_at_once_naming_the_option(tmp_path, address):
    stderr, seconds = _sync(_config(tmp_path), "--address", address)
    line = _one_line(stderr)
    assert line.startswith("Error: --address: not a Ray cluster address: ") and MALFORMED[address] in line, line
    print(f"\n--address {address}: {seconds:.1f} s")


@pytest.mark.parametrize(("kind", "scheme", "said"), [
    ("closed", "", "nothing answers there (Connection refused)"),
    ("silent", "", "what listens there says nothing within 5 s"),
    ("http", "", "what listens there does not answer as a Ray head node"),
    ("silent", "ray://", "what listens there says nothing within 5 s"),
    ("http", "ray://", "what listens there does not answer as a Ray Client server"),
])
def test_an_address_where_no_ray_answers_fails_the_sync_within_seconds_in_one_line_naming_the_setting(
        tmp_path, kind, scheme, said):
    config = _config(tmp_path)
    with _listener(kind) as where:
        address = scheme + where
        stderr, seconds = _sync(config, "--address", address)
    line = _one_line(stderr)
    assert line.startswith(f"Error: cannot join the Ray cluster at {address}: {said}"), line
    assert f"[sync] ray_address in {config}, or RAY_ADDRESS or --address, which override it" in line, line
    print(f"\n{kind} {scheme or 'gcs'}: {seconds:.1f} s")


def test_a_server_survives_a_cluster_that_does_not_answer_and_says_the_same_line_again(tmp_path, embedder):
    """In-process, as the server syncs: each attempt ends within seconds with the same error, and leaves no Ray
    joined (the next attempt would take a half-joined Ray for a cluster) and no thread behind."""
    from mcp_kb.app import App
    from mcp_kb.requests import SyncRequest

    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' (CI installs it)")
    with _silent_listener() as address:
        app = App(load_config(_config(tmp_path, f'engine = "ray"\nray_address = "{address}"')), embedder=embedder)
        said = [_failure_within(lambda: app.sync(SyncRequest(kb="docs")))]
        threads = set(threading.enumerate())  # with the index's own, which its first use started
        said.append(_failure_within(lambda: app.sync(SyncRequest(kb="docs"))))
    assert said[0] == said[1] and said[0].startswith(f"cannot join the Ray cluster at {address}: "), said
    assert not ray.is_initialized()
    assert {thread for thread in threading.enumerate() if thread.is_alive()} <= threads


def _failure_within(work: Callable[[], object]) -> str:
    """The KBError `work` raises, in a thread that must end within DEADLINE."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - what the test reports
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), f"the sync did not end within {DEADLINE:g} s"
    assert failures and isinstance(failures[0], KBError), failures
    return str(failures[0])
