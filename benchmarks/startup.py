"""Launching `mcp-kb serve` (stdio) as Claude Desktop would, on kb.toml.example (two KBs, synced first); run by hand.

    python benchmarks/startup.py [--runs 5] [--searches 200]

Prints per launch: seconds to the first tools/list answer and to the first search answered, and the
server's RSS after that first search and after `--searches` more (both KBs, every mode). Goals: first
search <= 1.5 s, RSS after warm-up <= 300 MB.
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


QUERIES = ["annual leave", "年假怎么申请？", "install the package", "error codes", "expenses refund", "配置文件"]


def server_memory_mb(field: str = "VmRSS") -> float:
    """A memory figure (VmRSS; RssAnon: private; RssFile: pages of libraries and files) of this process's child
    `mcp-kb serve` (the stdio client starts it)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields["PPid"]) == os.getpid() and field in fields:
            return int(fields[field].split()[0]) / 1024
    return float("nan")


async def one_launch(config: Path, searches: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    started = time.perf_counter()
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)],
                                   env=os.environ.copy())
    async with Client(params) as client:
        await client.list_tools()
        figures = {"tools/list s": time.perf_counter() - started}
        await client.call_tool("search_policy_docs", {"query": "annual leave"})
        figures["first search s"] = time.perf_counter() - started
        figures["RSS after first search MB"] = server_memory_mb()
        for n in range(searches):
            tool = ("search_policy_docs", "search_product_docs")[n % 2]
            mode = ("hybrid", "keyword", "vector")[n % 3]
            await client.call_tool(tool, {"query": f"{QUERIES[n % len(QUERIES)]} {n}", "mode": mode})
        figures[f"RSS after {searches} more MB"] = server_memory_mb()
        figures["  of it private MB"] = server_memory_mb("RssAnon")
        figures["  of it pages of files MB"] = server_memory_mb("RssFile")
        return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    use_offline_model()
    os.environ.setdefault("MCP_KB_STORAGE", "/tmp/mcp-kb-bench/startup-index")
    config = ROOT / "kb.toml.example"
    subprocess.run([sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)], check=True, capture_output=True)
    launches = [anyio.run(one_launch, config, args.searches) for _ in range(args.runs)]
    print(f"{args.runs} launches, model {os.environ.get('MCP_KB_EMBEDDING_MODEL')}:")
    for figure in launches[0]:
        values = [launch[figure] for launch in launches]
        print(f"  {figure}: median {statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f}")


if __name__ == "__main__":
    main()
