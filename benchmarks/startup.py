"""Time from launching `mcp-kb serve` (stdio) to the first tools/list answer; run by hand.

    python benchmarks/startup.py [--runs 5]

Uses kb.toml.example (synced first), as Claude Desktop would launch it. Target: <= 1.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import use_offline_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


async def one_launch(config: Path) -> float:
    from mcp import Client, StdioServerParameters

    started = time.perf_counter()
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)],
                                   env=os.environ.copy())
    async with Client(params) as client:
        await client.list_tools()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    use_offline_model()
    os.environ.setdefault("MCP_KB_STORAGE", "/tmp/mcp-kb-bench/startup-index")
    config = ROOT / "kb.toml.example"
    subprocess.run([sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)], check=True, capture_output=True)
    times = [anyio.run(one_launch, config) for _ in range(args.runs)]
    print(f"process start → first tools/list: median {statistics.median(times):.2f}s, "
          f"min {min(times):.2f}s, max {max(times):.2f}s over {args.runs} launches")


if __name__ == "__main__":
    main()
