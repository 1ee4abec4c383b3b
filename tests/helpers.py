"""Helpers the tests share (imported as `helpers`; conftest only holds fixtures)."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio
import pytest
from mcp_types import TextContent, TextResourceContents

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from mcp_kb.app import App
    from mcp_kb.index.contract import SyncHolder
    from mcp_kb.settings import Config

T = TypeVar("T")

MakeConfig = Callable[..., "Config"]  # conftest's make_config: KB tables (and top-level settings) -> a Config
MakeApp = Callable[..., "App"]  # conftest's make_app: KB tables (and top-level settings) -> an App


def chunk_table(store: object, kb: str, generation: str | None = None) -> LanceTable:
    """A KB's chunk table (of its active generation, or of `generation`) in a LanceDB index, asserting the index is LanceDB's and the table is there."""
    from mcp_kb.index.store import LanceStore

    assert isinstance(store, LanceStore), store
    table = store.chunk_table(kb, generation)
    assert table is not None, f"{kb} has no chunk table"
    return table


def text_of(part: object) -> str:
    """The text of an MCP content block or resource content, asserting it is text (an image or a blob has none)."""
    assert isinstance(part, TextContent | TextResourceContents), part
    return part.text


ROOT = Path(__file__).resolve().parents[1]  # the project: README.md, kb.toml.example, mcp_kb/
SHARED = ROOT.parent / "shared"
OFFLINE_MODEL = SHARED / "models" / "all-MiniLM-L6-v2-onnx"


def cjk_font() -> Path | None:
    """A font that draws Latin and Chinese text, for tests that read text back from images by OCR:
    $MCP_KB_TEST_FONT, else a Chinese font the system has (Debian: fonts-wqy-microhei), else ../shared's."""
    import os
    import shutil
    import subprocess

    if os.environ.get("MCP_KB_TEST_FONT"):
        return Path(os.environ["MCP_KB_TEST_FONT"])
    if shutil.which("fc-list"):
        listed = subprocess.run(["fc-list", ":lang=zh-cn", "file"], capture_output=True, text=True).stdout
        fonts = sorted(line.rstrip(": ") for line in listed.splitlines() if line.strip())
        if fonts:
            return Path(fonts[0])
    shared = SHARED / "fonts" / "wqy-microhei.ttc"
    return shared if shared.is_file() else None


def needs_extra(extra: str, module: str) -> pytest.MarkDecorator:
    """Skip a test whose subject is an optional extra when `module` (what the extra installs) is absent, naming the
    extra to install: the README's test command installs only `test`, CI every extra."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"the {extra!r} extra is not installed: pip install -e '.[{extra}]' (CI installs it)",
    )


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    """Write a text file, creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares width×height RGBA pixels around almost no data (an image bomb's header)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 1000))
        + chunk(b"IEND", b"")
    )


def in_threads(work: Callable[[int], None], count: int, switch_interval: float = 1e-5) -> list[str]:
    """Run `work(0)` … `work(count - 1)` in threads at once, switching between them often (so a lookup and
    an eviction interleave); the exceptions they raised, as text (a thread's exception passes unseen)."""
    errors: list[str] = []

    def guarded(number: int) -> None:
        try:
            work(number)
        except Exception as exc:
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    try:
        threads = [threading.Thread(target=guarded, args=(number,)) for number in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    return errors


def closed_address() -> str:
    """HOST:PORT on 127.0.0.1 where nothing listens (a port bound, then let go)."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{closed.getsockname()[1]}"


def until(
    condition: Callable[[], T | None | Literal[False]],
    seconds: float = 60.0,
    every: float = 0.05,
    what: str = "the condition",
) -> T:
    """Poll `condition` until it returns something true, and return that; fail when `seconds` pass first.
    Tests wait on what they expect this way, never on a fixed sleep."""
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds:g} s"
        time.sleep(every)
    return value


async def eventually(
    check: Callable[[], Awaitable[object]], seconds: float = 20.0, every: float = 0.05, what: str = "the condition"
) -> None:
    """`until` for async checks, sleeping on the event loop between looks."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds:g} s"
        await anyio.sleep(every)


def process_running(pid: int) -> bool:
    """Whether a process runs, from /proc (a zombie, ended but not yet reaped by its parent, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@contextmanager
def http_on_loopback(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server of `handler` on 127.0.0.1 (a free port) while the block runs: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def named_holder(holder: SyncHolder | None) -> SyncHolder:
    """The writer lease's holder a store names (a test that expects one)."""
    assert holder is not None, "no holder named"
    return holder
