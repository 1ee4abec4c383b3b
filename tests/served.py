"""`mcp-kb serve` over HTTP (and `mcp-kb ui`) in a subprocess, for tests that talk to it as a client would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def serve_http(
    config: Path, *options: str, env: dict[str, str] | None = None, log_folder: Path | None = None
) -> Iterator[tuple[int, Callable[[], str]]]:
    """`mcp-kb serve -c CONFIG --port 0 OPTIONS…`; yields the port it printed and a function reading its stderr."""
    with _started(
        ["serve", "-c", str(config), "--port", "0", *options],
        r"serving .* at http://[^:]+:(\d+)/",
        env,
        log_folder or config.parent,
    ) as served:
        yield served


@contextmanager
def serve_page(config: Path, env: dict[str, str] | None = None) -> Iterator[tuple[int, Callable[[], str]]]:
    """`mcp-kb ui -c CONFIG --port 0`; yields the port it printed and a function reading its stderr."""
    with _started(
        ["ui", "-c", str(config), "--port", "0"], r"admin page at http://127\.0\.0\.1:(\d+)/", env, config.parent
    ) as served:
        yield served


@contextmanager
def _started(
    arguments: list[str], printed: str, env: dict[str, str] | None, log_folder: Path
) -> Iterator[tuple[int, Callable[[], str]]]:
    log = log_folder / f"{arguments[0]}-{time.monotonic_ns()}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_kb", *arguments], env=os.environ.copy() if env is None else env, stderr=stderr
        )
    deadline = time.time() + 60
    while not (match := re.search(printed, log.read_text())):
        assert process.poll() is None and time.time() < deadline, log.read_text()
        time.sleep(0.05)
    try:
        yield int(match.group(1)), log.read_text
    finally:
        process.terminate()
        process.wait(timeout=20)
