"""`mcp-kb serve` over HTTP in a subprocess, for tests that talk to it as a client would."""

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
def serve_http(config: Path, *options: str, env: dict[str, str] | None = None,
               log_folder: Path | None = None) -> Iterator[tuple[int, Callable[[], str]]]:
    """`mcp-kb serve -c CONFIG --port 0 OPTIONS…`; yields the port it printed and a function reading its stderr."""
    log = (log_folder or config.parent) / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "mcp_kb", "serve", "-c", str(config), "--port", "0",
                                    *options], env=os.environ.copy() if env is None else env, stderr=stderr)
    deadline = time.time() + 60
    while not (match := re.search(r"serving .* at http://[^:]+:(\d+)/", log.read_text())):
        assert process.poll() is None and time.time() < deadline, log.read_text()
        time.sleep(0.05)
    try:
        yield int(match.group(1)), log.read_text
    finally:
        process.terminate()
        process.wait(timeout=20)
