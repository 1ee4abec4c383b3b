"""The admin page's load times: the overview (`/`), the status poll (`/ui/status.json`) and one KB's page,
served by `mcp-kb serve --transport http`, with 2 and with 50 synced KBs; run by hand.

    python benchmarks/ui.py [--kbs 2 50] [--loads 20]

Each KB holds 5 small Markdown files (one with a broken PDF beside it, so pages list a failure). Prints
the median and p95 of the server's answer time (sequential GETs over one connection, after one warm-up).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import use_offline_model


def write_site(folder: Path, kbs: int) -> Path:
    lines = [f'storage = "{folder / "index"}"']
    for number in range(kbs):
        docs = folder / f"kb{number:02}"
        docs.mkdir(parents=True)
        for page in range(5):
            (docs / f"page{page}.md").write_text(f"# Topic {page} of KB {number}\n\nItem {page} says {number}.\n")
        (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not a PDF")
        lines += [
            "[[kb]]",
            f'name = "kb{number:02}"',
            f'description = "Knowledge base {number}"',
            f'paths = ["{docs}"]',
        ]
    config = folder / "kb.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def timed_gets(base: str, path: str, loads: int) -> list[float]:
    with httpx.Client(base_url=base, timeout=120) as http:
        http.get(path).raise_for_status()  # warm-up: the store opened, the templates compiled
        times = []
        for _ in range(loads):
            started = time.perf_counter()
            http.get(path).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
    return times


def measure(kbs: int, loads: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mcp-kb-ui-bench-") as tmp:
        config = write_site(Path(tmp), kbs)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        print(f"{kbs} KBs synced in {time.perf_counter() - started:.1f} s")
        log = Path(tmp) / "serve.log"
        with log.open("wb") as stderr:
            server = subprocess.Popen(
                [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config), "--transport", "http", "--port", "0"],
                stderr=stderr,
            )
        try:
            while not (found := re.search(r"admin page at (http://\S+)/", log.read_text())):
                if server.poll() is not None:
                    raise SystemExit(log.read_text())
                time.sleep(0.1)
            base = found.group(1)
            for path in ("/", "/ui/status.json", "/ui/kb/kb00"):
                times = sorted(timed_gets(base, path, loads))
                p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
                print(f"  {kbs:>3} KBs  GET {path:<18} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms")
        finally:
            server.terminate()
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kbs", type=int, nargs="+", default=[2, 50])
    parser.add_argument("--loads", type=int, default=20)
    args = parser.parse_args()
    use_offline_model()
    os.environ.pop("MCP_KB_TOKEN", None)  # a page without sign-in: the loopback server's owner view
    for kbs in args.kbs:
        measure(kbs, args.loads)


if __name__ == "__main__":
    main()
