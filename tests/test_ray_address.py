"""A Ray cluster's address (`[sync] ray_address`, RAY_ADDRESS, `mcp-kb sync --address`): a malformed one fails a
sync on Ray (and only such a sync) in one line naming where it was set; one where no Ray answers (nothing listens,
a silent server, another protocol's, a Ray that refuses this process) fails the sync within seconds, in one line
naming the setting, however long Ray itself would wait. The probe asks where Ray dials: Ray takes a loopback host
for this machine's network address. Every sync here runs in a child process or a thread with a deadline: a
regression fails, it does not hang the suite."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from helpers import closed_address, http_on_loopback, needs_extra, write

from mcp_kb.errors import ConfigError, KBError
from mcp_kb.settings import SyncEngineConfig, load_config
from mcp_kb.settings.sync import check_ray_address, parse_ray_address
from mcp_kb.models.fastembed import FastEmbedder

CLI = [sys.executable, "-m", "mcp_kb"]
DEADLINE = 15.0  # seconds a sync may take to say that the cluster cannot be joined
# Ray dials a loopback host as this machine's network address (its nodes listen there), unless clusters are off:
# then it dials 127.0.0.1, where the tests' listeners are.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
MALFORMED = {  # an address, and what the error says of it
    "127.0.0.1:-1": "the port must be a number from 1 to 65535",
    "127.0.0.1:70000": "the port must be a number from 1 to 65535",
    "bad host:1": "'bad host' is not a host name or IP address",
    "http://127.0.0.1:1": "Ray takes no http:// address",
    "a..b:6379": "'a..b' is not a host name or IP address",  # Python's resolver: UnicodeError (idna)
    ".:6379": "'.' is not a host name or IP address",
    f"{'a' * 64}:6379": f"'{'a' * 64}' is not a host name or IP address",
    f"ray://{'b' * 70}:10001": f"'{'b' * 70}' is not a host name or IP address",
    "[:]:6379": "'[:]' is not an IPv6 address in brackets",
    "[1.2.3.4]:6379": "'[1.2.3.4]' is not an IPv6 address in brackets",
}
TOKEN = "0123456789abcdef0123456789abcdef"  # a Ray token (its own are 32 hex digits)
needs_ray = needs_extra("ray", "ray")  # a sync on Ray, and the gRPC servers that play a cluster


def _config(tmp_path: Path, sync: str = "") -> Path:
    """A KB of one document (something to index), with `sync` as its [sync] table's lines."""
    write(tmp_path / "docs" / "a.md", "# A\n\nSomething to index.\n")
    path = tmp_path / "kb.toml"
    path.write_text(
        f'[storage]\nuri = "{tmp_path / "index"}"\n[sync]\n{sync}\n'
        f'[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    return path


def _sync(config: Path, *options: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """A failing `mcp-kb sync`'s stderr, and the seconds it took (past DEADLINE: TimeoutExpired)."""
    start = time.monotonic()
    done = _command("sync", "-c", str(config), *options, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    return done.stderr, time.monotonic() - start


def _command(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """An `mcp-kb` command run to its end within DEADLINE (its environment: this one's, and `env`)."""
    return subprocess.run(
        [*CLI, *arguments], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=DEADLINE
    )


def _sync_with_the_address_in_the_file(tmp_path: Path, address: str) -> tuple[Path, str, float]:
    """A kb.toml syncing on Ray at `address`, and its failing sync's stderr and seconds (Ray may dial loopback)."""
    config = _config(tmp_path, f'engine = "ray"\nray_address = "{address}"')
    return (config, *_sync(config, env=LOOPBACK))


def _one_line(stderr: str) -> str:
    """The error line: click's `Error: ...`, the only line the failure writes."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr[-3000:]
    return lines[0]


def _join_refused_naming_the_file(stderr: str, address: str, config: Path, said: str = "") -> str:
    """The one error line of a sync that could not join the Ray at `address` set in kb.toml `config`."""
    line = _one_line(stderr)
    assert line.startswith(f"Error: cannot join the Ray cluster at {address}: {said}"), line
    assert line.endswith(f"([sync] ray_address in {config})"), line
    return line


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


@contextmanager
def _fake_ray(answer: Callable[[str], object]) -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """HOST:PORT on 127.0.0.1 of a gRPC server that answers every request with `answer(method)`: the reply's bytes,
    or a status (a grpc.StatusCode) to refuse it with; and the requests it got (method, metadata)."""
    import grpc

    seen: list[tuple[str, dict[str, str]]] = []

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no type hints: its classes are Any
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
                seen.append((details.method, dict(context.invocation_metadata())))
                said = answer(details.method)
                if isinstance(said, grpc.StatusCode):
                    context.abort(said, "refused")
                assert isinstance(said, bytes)
                return said

            return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=bytes, response_serializer=bytes)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((Handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", seen
    finally:
        server.stop(0).wait(5)


def _refusing(code: str) -> Callable[[str], object]:
    """A Ray that refuses every request with status `code` (UNAUTHENTICATED: a cluster with token authentication
    asked without its token)."""
    import grpc

    return lambda method: getattr(grpc.StatusCode, code)


def _empty(method: str) -> bytes:
    """A server that answers every request with an empty message: OK, and nothing in it."""
    return b""


def _ray_on_the_surface(method: str) -> bytes:
    """A head node's cluster id and a Ray Client server's ping, as a Ray answers them; nothing behind them."""
    if method.endswith("/GetClusterId"):
        from ray.core.generated.gcs_service_pb2 import GetClusterIdReply  # type: ignore[attr-defined]  # made at import

        return GetClusterIdReply(cluster_id=b"\x01" * 28).SerializeToString()  # type: ignore[no-any-return]
    if method.endswith("/ClusterInfo"):
        from ray.core.generated.ray_client_pb2 import ClusterInfoResponse  # type: ignore[attr-defined]  # made at import

        return ClusterInfoResponse(json="{}").SerializeToString()  # type: ignore[no-any-return]
    return b""


def _dialled(address: str) -> str:
    """HOST:PORT where Ray dials a head node's `address` (a loopback host: this machine's network address)."""
    from ray._private.services import canonicalize_bootstrap_address

    return str(canonicalize_bootstrap_address(address))


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_address_is_refused_saying_what_is_wrong(address: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_ray_address(address)
    assert MALFORMED[address] in str(caught.value)


@pytest.mark.parametrize(
    "address",
    ["admin:S3CRETPW@127.0.0.1:6379", "ray://admin:S3CRETPW@head:10001", "S3CRETPW@head:6379", "a@b@S3CRETPW:1"],
)
def test_credentials_in_an_address_are_refused_and_never_shown(address: str) -> None:
    """`'admin:S3CRETPW@127.0.0.1' is not a host name` reached a scoped caller (the sync's recorded error)."""
    with pytest.raises(ConfigError) as refused:
        check_ray_address(address, "[sync] ray_address")
    said = str(refused.value)
    assert "no user name or password" in said and "S3CRETPW" not in said.rpartition("@")[0], said
    assert "admin" not in said and said.count("S3CRETPW") == address.rpartition("@")[2].count("S3CRETPW")


@pytest.mark.parametrize(
    "address",
    [
        "head-node:6379",
        "ray://head-node:10001",
        "10.0.0.7:6379",
        "[::1]:6379",
        "ray://[fe80::1]:10001",
        "ray_head:6379",
        "head.example.:6379",
        "[fe80::1%eth0]:6379",
        f"{'a' * 63}.b:6379",
        f"{'a.' * 126}b:6379",
    ],
)
def test_the_forms_ray_takes_are_taken(address: str) -> None:
    assert parse_ray_address(address).address == address


def test_a_name_longer_than_dns_allows_is_refused() -> None:
    with pytest.raises(ValueError, match="253 characters at most"):
        parse_ray_address(f"{'a.' * 127}b:6379")  # 255 characters


def test_auto_local_and_empty_are_taken_as_they_are_and_local_means_empty() -> None:
    for address in ("auto", "", "local"):
        check_ray_address(SyncEngineConfig(engine="ray", ray_address=address).ray_address, "--address")
    assert SyncEngineConfig(ray_address="local").ray_address == ""
    assert SyncEngineConfig().overridden(None, "local").model_dump(include={"engine", "ray_address"}) == {
        "engine": "ray",
        "ray_address": "",
    }


def test_a_malformed_address_loads_and_is_refused_when_a_sync_is_to_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A config (or RAY_ADDRESS) holding one loads; the sync on Ray refuses it, naming where it was set."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    settings = SyncEngineConfig(engine="ray", ray_address="head")
    assert settings.overridden("ray", None).ray_address == "head"
    with pytest.raises(
        ConfigError,
        match=r"^\[sync\] ray_address in kb\.toml: not a Ray cluster address: no port; "
        r"write HOST:PORT .* \(got 'head'\)$",
    ):
        check_ray_address(settings.ray_address, settings.address_setting(Path("kb.toml")))


def test_an_address_only_a_ray_sync_uses_is_not_checked_for_other_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAY_ADDRESS may be set for other Ray tools (`ray job submit` takes http://HEAD:8265): a local sync and the
    server do not read it."""
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert load_config(_config(tmp_path)).sync.engine == "local"


def test_local_is_ray_s_word_for_a_ray_of_the_sync_s_own(tmp_path: Path) -> None:
    assert load_config(_config(tmp_path, 'engine = "ray"\nray_address = "local"')).sync.ray_address == ""


@pytest.mark.parametrize("address", MALFORMED)
def test_a_malformed_address_option_fails_the_command_at_once_naming_the_option(tmp_path: Path, address: str) -> None:
    """Names Python's resolver refuses (an empty or long label) too: one line, no traceback."""
    stderr, seconds = _sync(_config(tmp_path), "--address", address)
    line = _one_line(stderr)
    assert line.startswith("Error: --address: not a Ray cluster address: ") and MALFORMED[address] in line, line
    print(f"\n--address {address[:20]}: {seconds:.1f} s")


def test_an_empty_address_option_is_an_error_not_the_local_engine(tmp_path: Path) -> None:
    """--address implies --engine ray: an empty one (a variable that was not set) must not sync locally unsaid."""
    stderr, _ = _sync(_config(tmp_path), "--address", "")
    assert _one_line(stderr) == (
        'Error: --address: empty; give a Ray cluster\'s address, or "local" for a Ray of '
        "the sync's own on this machine"
    )


@needs_ray
def test_a_malformed_address_in_the_file_fails_a_sync_on_ray_naming_the_file(tmp_path: Path) -> None:
    config = _config(tmp_path, 'engine = "ray"\nray_address = "ray-head"')
    assert load_config(config).sync.ray_address == "ray-head"
    stderr, seconds = _sync(config)
    line = _one_line(stderr)
    assert line.startswith(
        f"Error: [sync] ray_address in {config}: not a Ray cluster address: no port; write HOST:PORT"
    ), line
    assert line.endswith("(got 'ray-head')"), line
    print(f"\nthe file's ray-head: {seconds:.1f} s")


@needs_ray
def test_a_malformed_ray_address_variable_breaks_no_command_that_does_not_sync_on_ray(tmp_path: Path) -> None:
    """RAY_ADDRESS=ray-head (set for other Ray tools) with engine = "ray": a local sync, search, status, check and
    the server's config load work; a sync on Ray fails in one line naming the variable."""
    config = _config(tmp_path, 'engine = "ray"')
    variable = {"RAY_ADDRESS": "ray-head"}
    for command in (["sync", "--engine", "local"], ["status"], ["search", "docs", "something"], ["check"]):
        done = _command(*command, "-c", str(config), env=variable)
        assert done.returncode == 0 and "ray_address" not in done.stderr, (command, done.stderr[-3000:])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ADDRESS", "ray-head")
        assert load_config(config).sync.ray_address == "ray-head"  # `mcp-kb serve` loads it so
    write(tmp_path / "docs" / "b.md", "# B\n\nSomething else to index.\n")
    stderr, seconds = _sync(config, env=variable)
    line = _one_line(stderr)
    assert line.startswith(
        "Error: [sync] ray_address (set by the RAY_ADDRESS variable): not a Ray cluster address: no port; "
    ), line
    print(f"\nRAY_ADDRESS=ray-head: {seconds:.1f} s")


@needs_ray
@pytest.mark.parametrize(
    ("kind", "scheme", "said"),
    [
        ("closed", "", "nothing answers there (Connection refused)"),
        ("silent", "", "what listens there says nothing within 5 s"),
        ("http", "", "what listens there does not answer as a Ray head node"),
        ("silent", "ray://", "what listens there says nothing within 5 s"),
        ("http", "ray://", "what listens there does not answer as a Ray Client server"),
    ],
)
def test_an_address_where_no_ray_answers_fails_the_sync_within_seconds_in_one_line_naming_the_setting(
    tmp_path: Path, kind: str, scheme: str, said: str
) -> None:
    with _listener(kind) as where:
        address = scheme + where
        config, stderr, seconds = _sync_with_the_address_in_the_file(tmp_path, address)
    _join_refused_naming_the_file(stderr, address, config, said)
    print(f"\n{kind} {scheme or 'gcs'}: {seconds:.1f} s")


@needs_ray
@pytest.mark.parametrize("answer", ["UNAUTHENTICATED", "PERMISSION_DENIED", "empty"])
def test_a_head_node_s_loopback_address_is_probed_where_ray_dials_it(tmp_path: Path, answer: str) -> None:
    """Ray dials 127.0.0.1 as this machine's network address, and waited there without end for a head whose
    listener the probe found on 127.0.0.1: the probe asks where Ray dials, and ray.init is given that address."""
    with _fake_ray(_empty if answer == "empty" else _refusing(answer)) as (address, _):
        stderr, seconds = _sync(_config(tmp_path), "--address", address)
        dialled = _dialled(address)
    line = _one_line(stderr)
    assert line.startswith(f"Error: cannot join the Ray cluster at {address}") and line.endswith("(--address)"), line
    if dialled != address:  # a machine with a network address: nothing of the test's listens there
        assert line == (
            f"Error: cannot join the Ray cluster at {address}: nothing answers there (Connection "
            "refused); start it (ray start --head) or fix the address; Ray dials a loopback host at "
            "this machine's network address instead (--address)"
        ), line
    print(f"\nloopback {answer}, dialled at {dialled}: {seconds:.1f} s")


@needs_ray
@pytest.mark.parametrize("scheme", ["", "ray://"])
@pytest.mark.parametrize("code", ["UNAUTHENTICATED", "PERMISSION_DENIED"])
def test_a_ray_that_refuses_this_process_fails_the_sync_at_once_saying_it_wants_ray_s_token(
    tmp_path: Path, scheme: str, code: str
) -> None:
    """ray.init retried such a head for 22 s in 20 lines of Ray's log (a Ray Client server: 31 s and a warning),
    then said nothing of a token."""
    with _fake_ray(_refusing(code)) as (where, _):
        address = scheme + where
        config, stderr, seconds = _sync_with_the_address_in_the_file(tmp_path, address)
    assert _one_line(stderr) == (
        f"Error: cannot join the Ray cluster at {address}: the cluster refuses this process ({code}): it asks for "
        "Ray's token; set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file "
        f"RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token) ([sync] ray_address in {config})"
    )
    print(f"\n{scheme or 'gcs'} {code}: {seconds:.1f} s")


@needs_ray
def test_the_probe_carries_this_process_s_ray_token_and_a_refusal_of_it_says_so(tmp_path: Path) -> None:
    token = {**LOOPBACK, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    with _fake_ray(_refusing("UNAUTHENTICATED")) as (address, seen):
        stderr, seconds = _sync(_config(tmp_path), "--address", address, env=token)
    assert _one_line(stderr) == (
        f"Error: cannot join the Ray cluster at {address}: the cluster refuses this process's Ray token "
        "(UNAUTHENTICATED); set the cluster's token in RAY_AUTH_TOKEN (or in a file RAY_AUTH_TOKEN_PATH names, or "
        "~/.ray/auth_token) (--address)"
    )
    assert [metadata.get("authorization") for _, metadata in seen] == [f"Bearer {TOKEN}"]
    print(f"\nwrong token: {seconds:.1f} s")


@needs_ray
@pytest.mark.parametrize(("scheme", "kind"), [("", "Ray head node"), ("ray://", "Ray Client server")])
def test_an_empty_answer_is_no_ray_s(tmp_path: Path, scheme: str, kind: str) -> None:
    """Ray Client said `Expecting value: line 1 column 1 (char 0)` of it, a head node's join Ray's own words."""
    with _fake_ray(_empty) as (where, _):
        address = scheme + where
        stderr, seconds = _sync(_config(tmp_path), "--address", address, env=LOOPBACK)
    assert _one_line(stderr) == (
        f"Error: cannot join the Ray cluster at {address}: what listens there answers as "
        f"no {kind} does (an empty reply); fix the address (--address)"
    )
    print(f"\n{scheme or 'gcs'} empty: {seconds:.1f} s")


@needs_ray
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_join_that_ray_itself_fails_says_so_in_one_line_naming_the_setting(tmp_path: Path, scheme: str) -> None:
    """A server that answers the probe as a Ray does, and nothing more: ray.init's failure, in Ray's words."""
    with _fake_ray(_ray_on_the_surface) as (where, _):
        address = scheme + where
        config, stderr, seconds = _sync_with_the_address_in_the_file(tmp_path, address)
    line = _join_refused_naming_the_file(stderr, address, config)
    print(f"\n{scheme or 'gcs'} Ray on the surface: {seconds:.1f} s ({line})")


def test_a_name_the_resolver_refuses_is_one_line_of_the_probe() -> None:
    from mcp_kb.ray_engine import _connects, _NoCluster
    from mcp_kb.settings.sync import RayAddress

    with pytest.raises(_NoCluster, match=r"^nothing answers there \(encoding with 'idna' codec failed"):
        _connects(RayAddress("a..b", 6379, client=False))  # what the host rule keeps out of it


def test_ray_s_warnings_while_it_joins_go_to_the_log(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray Client warns of its timeout before it fails: the failure's one line says enough."""
    from mcp_kb.ray_engine import _warnings_logged

    with caplog.at_level(logging.INFO, logger="mcp_kb.ray_engine"), _warnings_logged():
        warnings.warn("Ray Client connection timed out", UserWarning, stacklevel=1)
    assert "Ray: Ray Client connection timed out" in caplog.text
    assert capsys.readouterr().err == ""


@needs_ray
def test_a_server_survives_a_cluster_that_does_not_answer_and_says_the_same_line_again(
    tmp_path: Path, embedder: FastEmbedder
) -> None:
    """In-process, as the server syncs: each attempt ends within seconds with the same error, and leaves no Ray
    joined (the next attempt would take a half-joined Ray for a cluster) and no thread behind."""
    from mcp_kb.app import App
    from mcp_kb.requests import SyncRequest

    import ray

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
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive(), f"the sync did not end within {DEADLINE:g} s"
    assert failures and isinstance(failures[0], KBError), failures
    return str(failures[0])
