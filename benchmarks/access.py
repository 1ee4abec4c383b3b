"""What team access costs, and what a flood of bad tokens does to valid clients; run by hand.

    python benchmarks/access.py [--flood 10000]

A KB of 300 SciFact documents is served read-only over streamable HTTP twice on one index: with no
token (loopback) and behind the gate (scoped tokens and OAuth against an issuer on 127.0.0.1). It
prints searches per second through each (interleaved rounds, one client, then four at once), then
sends `--flood` requests with bad tokens (unknown secrets, forged signatures under the issuer's key
id, unknown key ids, garbage) from 32 connections while a valid client searches, and prints that
client's latency with and without the flood, the rejections per second and the server's memory.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from _beir import kb_config, use_offline_model, write_corpus  # noqa: E402

WORK = Path("/tmp/mcp-kb-bench/access")
AUDIENCE = "https://kb.example.test/mcp"
QUERIES = [
    "vitamin D deficiency",
    "gene expression in tumours",
    "antibiotic resistance",
    "insulin and obesity",
    "randomized trial of statins",
    "DNA repair",
    "immune response to vaccines",
    "sleep and memory",
]


def prepare() -> Path:
    from mcp_kb.app import App

    docs = WORK / "docs"
    write_corpus("scifact", docs, limit=300)
    app = App(kb_config(docs, WORK / "index", "papers"))
    app.sync()
    return docs


def write_config(path: Path, docs: Path, issuer: str | None) -> Path:
    lines = [f'storage = "{WORK / "index"}"', "[server]", "read_only = true"]
    if issuer:
        lines += [
            'audit_log = "audit.jsonl"',
            "[[server.tokens]]",
            'name = "bench"',
            'secret_env = "BENCH_TOKEN"',
            'kbs = ["papers"]',
            "[server.oauth]",
            f'issuer = "{issuer}"',
            f'audience = "{AUDIENCE}"',
        ]
    lines += ["[[kb]]", 'name = "papers"', 'description = "papers"', f'paths = ["{docs}"]']
    path.write_text("\n".join(lines) + "\n")
    return path


class Served:
    def __init__(self, config: Path):
        env = {**os.environ, "BENCH_TOKEN": "bench-secret"}
        env.pop("MCP_KB_TOKEN", None)
        self.log = config.with_suffix(".log")
        with self.log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mcp_kb", "serve", "-c", str(config), "--transport", "http", "--port", "0"],
                env=env,
                stderr=stderr,
            )
        while not (match := re.search(r"at (http://\S+/mcp)", self.log.read_text())):
            assert self.process.poll() is None, self.log.read_text()
            time.sleep(0.1)
        self.url = match.group(1)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


async def searches(url: str, token: str | None, count: int, clients: int = 1) -> list[float]:
    """Latencies (ms) of `count` searches split over `clients` sessions searching at once."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []

    async def one_client(share: int) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        async with Client(streamable_http_client(url, http_client=http)) as client:
            for n in range(share):
                started = time.perf_counter()
                result = await client.call_tool("search_papers", {"query": QUERIES[n % len(QUERIES)]})
                latencies.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result.content[0].text

    await asyncio.gather(*(one_client(count // clients) for _ in range(clients)))
    return latencies


async def rate(url: str, token: str | None, count: int, clients: int) -> float:
    started = time.perf_counter()
    await searches(url, token, count, clients)
    return count / (time.perf_counter() - started)


def bad_tokens(issuer, count: int) -> list[str]:
    import jwt

    key = issuer.keys["key-1"]
    forged = issuer.token(AUDIENCE, scope="kb:papers:search")
    head, body, _ = forged.split(".")
    kinds = [
        lambda n: f"wrong-secret-{n}",
        lambda n: f"{head}.{body}.{'A' * 342}",  # a signature that does not verify under the real key id
        lambda n: jwt.encode({"sub": "x"}, key, algorithm="RS256", headers={"kid": f"unknown-{n}"}),
        lambda n: "not.a.jwt",
    ]
    return [kinds[n % len(kinds)](n) for n in range(count)]


async def flood(url: str, tokens: list[str], connections: int = 32) -> tuple[float, dict[int, int]]:
    import httpx

    statuses: dict[int, int] = {}
    queue = list(tokens)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    async def worker(http) -> None:
        while queue:
            token = queue.pop()
            try:
                answer = await http.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
                )
                status = answer.status_code
            except httpx.TransportError as exc:
                status = type(exc).__name__ + " " + token[:20]
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=connections)) as http:
        await asyncio.gather(*(worker(http) for _ in range(connections)))
    return len(tokens) / (time.perf_counter() - started), statuses


def flood_in_process(url: str, tokens: list[str]) -> tuple[float, dict]:
    return asyncio.run(flood(url, tokens))


def gate_cost(issuer) -> str:
    """Microseconds the gate spends refusing each kind of bad token, in this process (no HTTP)."""
    from mcp_kb.access import Gatekeeper
    from mcp_kb.settings import build_config
    from mcp_kb.http.edge import AccessGate, Edge
    from mcp_kb.http.network import rebinding_protection

    config = build_config(
        {
            "storage": str(WORK / "index"),
            "kb": [{"name": "papers", "description": "papers", "paths": [str(WORK / "docs")]}],
            "server": {"token": "bench-secret", "oauth": {"issuer": issuer.url, "audience": AUDIENCE}},
        },
        base_dir=WORK,
        source=None,
    )

    async def nothing(*_args) -> None:
        pass

    gate = AccessGate(nothing, Edge(config, Gatekeeper(config), rebinding_protection("127.0.0.1", [])))
    tokens = bad_tokens(issuer, 4000)
    names = ["unknown secret", "forged signature", "unknown key id", "garbage"]

    async def measure_kinds() -> list[float]:
        costs = []
        for kind in range(len(names)):
            started = time.perf_counter()
            for token in tokens[kind :: len(names)]:
                await gate(
                    {"type": "http", "path": "/mcp", "headers": [(b"authorization", f"Bearer {token}".encode())]},
                    nothing,
                    nothing,
                )
            costs.append((time.perf_counter() - started) / len(tokens[kind :: len(names)]) * 1e6)
        return costs

    costs = asyncio.run(measure_kinds())
    return ", ".join(f"{name} {cost:.0f} µs" for name, cost in zip(names, costs))


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"p50 {statistics.median(ordered):.1f} ms, p95 {ordered[int(len(ordered) * 0.95) - 1]:.1f} ms"


async def measure(open_url: str, gated_url: str, issuer, flood_size: int, gated: Served) -> None:
    jwt_token = issuer.token(AUDIENCE, scope="kb:papers:search", lifetime=3600)
    await searches(open_url, None, 20)  # warm up both (model, caches)
    await searches(gated_url, "bench-secret", 20)
    for clients in (1, 4):
        figures: dict[str, list[float]] = {"no token": [], "scoped token": [], "OAuth JWT": []}
        for _ in range(3):  # interleaved: the machine's load drifts
            figures["no token"].append(await rate(open_url, None, 120, clients))
            figures["scoped token"].append(await rate(gated_url, "bench-secret", 120, clients))
            figures["OAuth JWT"].append(await rate(gated_url, jwt_token, 120, clients))
        base = statistics.median(figures["no token"])
        print(
            f"searches/s with {clients} client(s): "
            + "; ".join(
                f"{name} {statistics.median(v):.1f} ({statistics.median(v) / base:.2f}x)" for name, v in figures.items()
            )
        )

    idle = await searches(gated_url, "bench-secret", 100)
    rss_before = gated.rss_mb()
    # the flood must not share the valid client's event loop; spawned, as LanceDB's runtime does not fork
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as other_process:
        flooding = asyncio.get_running_loop().run_in_executor(
            other_process, flood_in_process, gated_url, bad_tokens(issuer, flood_size)
        )
        during = await searches(gated_url, "bench-secret", 100)
        flood_rate, statuses = await flooding
        rss_after = gated.rss_mb()
        second_rate, _ = await asyncio.get_running_loop().run_in_executor(
            other_process, flood_in_process, gated_url, bad_tokens(issuer, flood_size)
        )
    rss_second = gated.rss_mb()
    print(f"valid client idle: {percentiles(idle)}; during the flood: {percentiles(during)}")
    print(
        f"flood of {flood_size} bad tokens: {flood_rate:.0f} rejections/s, answers {statuses}; "
        f"JWKS fetches {issuer.jwks_fetches}"
    )
    print(
        f"server RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after, {rss_second:.0f} MB after a second "
        f"flood ({second_rate:.0f}/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flood", type=int, default=10_000)
    options = parser.parse_args()
    use_offline_model()
    from fake_issuer import serve_issuer

    docs = prepare()
    with serve_issuer() as issuer:
        print(f"the gate refusing a bad token, in process: {gate_cost(issuer)}")
        servers = [
            Served(write_config(WORK / "open.toml", docs, None)),
            Served(write_config(WORK / "gated.toml", docs, issuer.url)),
        ]
        try:
            asyncio.run(measure(servers[0].url, servers[1].url, issuer, options.flood, servers[1]))
        finally:
            for server in servers:
                server.stop()


if __name__ == "__main__":
    main()
