"""Starting mcp-kb, on kb.toml.example (two KBs, synced first); run by hand.

    python benchmarks/startup.py [--runs 5] [--searches 200]

Commands: the CPU seconds (user + system) and wall seconds of `mcp-kb status` and of a sync with nothing to
do, each run in turn with `python -c "import lancedb, mcp, fastembed"` (the yardstick: what the commands cost
when they were their imports), and their ratio to it, pair by pair. Goals: CPU <= 0.35x the yardstick's,
wall <= 1.0 s on a quiet machine.

The server: launching `mcp-kb serve` (stdio) as Claude Desktop would, seconds to the first tools/list answer and
to the first search answered, and the server's RSS after that first search and after `--searches` more (both
KBs, every mode). Goals: first search <= 1.5 s, RSS after warm-up <= 300 MB.

The floor of tools/list: seconds for a fresh interpreter to import the MCP SDK's server as a stdio server does
(mcp/sdk_import.py) and nothing else; tools/list cannot be answered sooner (0.42-0.47 s on the 2-core machine of
docs/performance.md, most of it the SDK's pydantic models of both protocol eras).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import use_offline_model

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
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
    )
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


YARDSTICK = [sys.executable, "-c", "import lancedb, mcp, fastembed"]


def seconds_of(command: list[str]) -> tuple[float, float]:
    """CPU (user + system, of the command and its children) and wall seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def command_figures(config: Path, runs: int) -> None:
    commands = {"status": ["status"], "sync with nothing to do": ["sync"]}
    for name, arguments in commands.items():
        command = [sys.executable, "-m", "mcp_kb", *arguments, "-c", str(config)]
        cpu, wall, ratios = [], [], []
        for _ in range(runs):  # in turn with the yardstick, so that a drift of the machine's speed hits both
            seconds, elapsed = seconds_of(command)
            yardstick, _ = seconds_of(YARDSTICK)
            cpu.append(seconds)
            wall.append(elapsed)
            ratios.append(seconds / yardstick)
        print(
            f"  {name}: CPU s median {statistics.median(cpu):.2f}, wall s median {statistics.median(wall):.2f} "
            f"(min {min(wall):.2f}), CPU / yardstick's median {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
        )


SDK_ALONE = [sys.executable, "-c", "from mcp_kb.mcp.sdk_import import import_sdk_for_stdio; import_sdk_for_stdio()"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    use_offline_model()
    os.environ.setdefault("MCP_KB_STORAGE", "/tmp/mcp-kb-bench/startup-index")
    config = ROOT / "kb.toml.example"
    subprocess.run([sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)], check=True, capture_output=True)
    print(f"commands, {args.runs} runs each (yardstick: {' '.join(YARDSTICK[1:])}):")
    command_figures(config, args.runs)
    launches = [anyio.run(one_launch, config, args.searches) for _ in range(args.runs)]
    print(f"{args.runs} launches, model {os.environ.get('MCP_KB_EMBEDDING_MODEL')}:")
    for figure in launches[0]:
        values = [launch[figure] for launch in launches]
        print(f"  {figure}: median {statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f}")
    floor = [seconds_of(SDK_ALONE)[1] for _ in range(args.runs)]
    print(
        f"  the floor of tools/list (the SDK's server imported, nothing else) s: median {statistics.median(floor):.2f}, "
        f"min {min(floor):.2f}"
    )


if __name__ == "__main__":
    main()
