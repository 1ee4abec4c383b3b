"""Search throughput of a real server over stateless streamable HTTP, and during a sync; run by hand, prints figures.

    python benchmarks/throughput.py                                  # this checkout, 1, 4, 16, 64 clients, 20 s each
    python benchmarks/throughput.py --levels 1,16 --seconds 5 --no-sync
    python benchmarks/throughput.py --tree /work/before --tree .     # two checkouts, level by level in turn
    python benchmarks/throughput.py --workers 1,2                    # one server process, then two (serve --workers)

Needs the SciFact KB of `benchmarks/retrieval.py scifact train` (/tmp/mcp-kb-bench/scifact). Each tree's server
serves its own copy of that KB (index and documents, under /tmp/mcp-kb-bench/throughput/<n>), so the sync phase
never changes the shared one: `mcp-kb serve --transport http --stateless` on a free loopback port, with no sync
of its own ([kb.sync] on_start, watch and interval off). Before the server starts, the tree syncs its copy: nothing
to do, unless the tree's code reads the index otherwise (a newer keyword analysis, say), when that sync rebuilds
the copy and says so; `python benchmarks/retrieval.py scifact train` then brings the shared KB up to date.

Per level: N clients, each sending one search at a time (`search_scifact`, hybrid, top_k 10) as raw JSON-RPC
tools/call POSTs (httpx; the SDK's Client costs ~5x the client CPU per call, which these two cores cannot spare),
every query distinct so that the server's answer cache never answers. `--seconds` measured after a 2 s warm-up:
searches/s, p50/p95/p99 latency, errors (non-200, a JSON-RPC error, or isError), the server's CPU per search
(/proc/<pid>/stat) and this load generator's. Then 16 clients while another process runs `mcp-kb sync` after
200 of the copy's documents were edited: searches/s, p95, errors, and the sync's duration.

First, the engine alone (`--engine-threads`, default 16): the same searches through `App.search` in that many
threads of one process, no HTTP and no MCP, for `--seconds`: what the search itself allows on this machine, the
ceiling of the served figures (16 threads: 96-103/s at 16-17 ms of CPU per search on the 2-core machine of
docs/performance.md).

`--protocol 2025-11-25` (default) takes the stateless transport `--stateless` turns on (a fresh transport per
POST); `--protocol 2026-07-28` the per-request envelope the SDK's own Client negotiates, which a server answers
the same way stateless or not.

`--workers 1,2` serves each tree's copy once per count (`serve --workers N`: N processes on one port): the server's
CPU is that of all its processes, and the end says each one's RSS (a worker after the first: goal <= 150 MB more).

Goals: >= 100 searches/s at 16 clients, p95 <= 30 ms at one client, 0 errors at every level and during the sync.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, use_offline_model

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/tmp/mcp-kb-bench")
SOURCE = WORK / "scifact"
COPIES = WORK / "throughput"
WARMUP_SECONDS = 2.0
EDITED_DOCUMENTS = 200
SYNC_CLIENTS = 16
MODERN = "2026-07-28"
TICKS = os.sysconf("SC_CLK_TCK")


# ---- the machine and the trees ---------------------------------------------------------------


def machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.+)", lscpu)
    return (
        f"CPU: {model.group(1) if model else 'unknown'}; {os.cpu_count()} cores, "
        f"{len(os.sched_getaffinity(0))} usable by this process"
    )


@dataclass
class Tree:
    """A checkout of the project whose `mcp_kb` the server and sync processes import."""

    name: str
    path: Path

    @property
    def label(self) -> str:
        commit = (
            subprocess.run(
                ["git", "-C", str(self.path), "log", "-1", "--format=%h"], capture_output=True, text=True
            ).stdout.strip()
            or "no git"
        )
        dirty = subprocess.run(
            ["git", "-C", str(self.path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"{self.path} ({commit}{' + uncommitted changes' if dirty else ''})"

    def run(self, *arguments: str, **options) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *arguments], env=self.env(), cwd=self.path, capture_output=True, text=True, **options
        )

    def env(self) -> dict[str, str]:
        # First on the path, and the working folder too: `python -m` puts the current folder before PYTHONPATH.
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.path), os.environ.get("PYTHONPATH")])),
        }


def check_imports(tree: Tree) -> None:
    found = tree.run("-c", "import mcp_kb; print(mcp_kb.__file__)").stdout.strip()
    if not found.startswith(str(tree.path)):
        sys.exit(f"tree {tree.name}: its processes import mcp_kb from {found or 'nowhere'}, not {tree.path}")


# ---- the KB: the shared one checked, a copy per tree -----------------------------------------


def write_config(kb: Path, config: Path) -> Path:
    """A kb.toml with _beir.kb_config's settings for the KB in folder `kb` (index/ and docs/), syncing only when
    told to."""
    config.write_text(
        f"""storage = {json.dumps(str(kb / "index"))}

[embedding]
quantize = "int8"

[sync]
workers = 0

[[kb]]
name = "scifact"
description = "scifact"
paths = [{json.dumps(str(kb / "docs"))}]

[kb.sync]  # the figures are of searches: no sync of the server's own
on_start = false
watch = false
interval = 0
""",
        encoding="utf-8",
    )
    return config


def status(tree: Tree, config: Path) -> dict:
    done = tree.run("-m", "mcp_kb", "status", "--json", "-c", str(config))
    if done.returncode:
        sys.exit(f"tree {tree.name}: mcp-kb status failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)[0]


def check_source(tree: Tree) -> None:
    """The shared KB must be there and synced with this model; its status is read, nothing more."""
    missing = (
        "the SciFact KB is missing: build it with `python benchmarks/retrieval.py scifact train` "
        f"(writes {SOURCE}, several minutes), then run this again"
    )
    if not (SOURCE / "index").is_dir() or not (SOURCE / "docs").is_dir():
        sys.exit(missing)
    COPIES.mkdir(parents=True, exist_ok=True)
    kb = status(tree, write_config(SOURCE, COPIES / "source.toml"))  # beside the copies: nothing new in SOURCE
    if not kb["chunks"] or kb["last_outcome"] != "ok" or kb["query_model_differs"]:
        sys.exit(
            f"{missing}\n(status: {kb['chunks']} chunks, last sync {kb['last_outcome']!r}, "
            f"{kb['query_model_differs'] or 'same model'})"
        )


def fresh_copy(number: int) -> Path:
    """A copy of the shared KB (file times kept, so no file looks changed; the index holds paths relative to the
    docs folder); returns its config."""
    folder = COPIES / str(number)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(SOURCE / "docs", folder / "docs")
    shutil.copytree(SOURCE / "index", folder / "index")
    return write_config(folder, folder / "kb.toml")


def edit_documents(config: Path, count: int) -> None:
    for path in sorted((config.parent / "docs").glob("*.md"))[:count]:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("\nThis sentence was appended by benchmarks/throughput.py.\n")


# ---- a server -------------------------------------------------------------------------------


@dataclass
class Server:
    tree: Tree
    config: Path
    tool: str
    last_sync: str  # as copied: a server that syncs at start would change it
    queries: Iterator[str]  # its own stream: distinct for its own answer cache
    process: subprocess.Popen | None = None
    url: str = ""
    workers: int = 1  # serve --workers

    @property
    def label(self) -> str:
        return self.tree.name if self.workers == 1 else f"{self.tree.name}x{self.workers}"

    def start(self, protocol: str, timeout: float = 90) -> None:
        log = (self.config.parent / "server.log").open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mcp_kb",
                "serve",
                "--transport",
                "http",
                "--stateless",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--workers",
                str(self.workers),
                "-c",
                str(self.config),
            ],  # port 0: a free one, printed
            env=self.tree.env(),
            cwd=self.tree.path,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        deadline = time.monotonic() + timeout
        while not (found := re.search(r"at (http://\S+/mcp)", self.log())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"tree {self.tree.name}: the server did not start:\n{self.log()}")
            time.sleep(0.2)
        self.url = found.group(1)
        self.first_search(protocol)

    def first_search(self, protocol: str) -> None:
        """Waits for the model the server loads after it starts, and stops a run whose tree cannot search."""
        headers, body = tools_call(self.tool, "warm up the model and the index", 0, protocol)
        if error := error_of(httpx.post(self.url, json=body, headers=headers, timeout=120)):
            sys.exit(f"tree {self.tree.name}: the first search failed: {error}")

    def log(self) -> str:
        return (self.config.parent / "server.log").read_text(errors="replace")

    def pids(self) -> list[int]:
        """The lead process and its workers (its children serving too, not a sync's parse workers)."""
        found = [self.process.pid]
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                parent = re.search(r"PPid:\s*(\d+)", status.read_text()).group(1)
                serving = b"serve" in (status.parent / "cmdline").read_bytes().split(b"\0")
            except (OSError, AttributeError):
                continue
            if int(parent) == self.process.pid and serving:
                found.append(int(status.parent.name))
        return found

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        return total

    def memory_mb(self, name: str = "VmRSS") -> list[float]:
        """Each process's figure, the lead's first."""
        texts = [Path(f"/proc/{pid}/status").read_text() for pid in self.pids()]
        return [int(re.search(rf"{name}:\s*(\d+)", text).group(1)) / 1024 for text in texts]

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def distinct_queries() -> Iterator[str]:
    """SciFact's queries, then again with a round number appended: no text comes twice."""
    with (EVAL / "scifact" / "queries.jsonl").open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    for round_ in itertools.count():
        for text in texts:
            yield text if round_ == 0 else f"{text} ({round_})"


# ---- the load ---------------------------------------------------------------------------------


def tools_call(tool: str, query: str, number: int, protocol: str) -> tuple[dict, dict]:
    """Headers and body of one search; the SDK's stateless transport needs no session, only both Accept types."""
    params: dict = {"name": tool, "arguments": {"query": query, "mode": "hybrid", "top_k": 10}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": protocol}
    if protocol == MODERN:  # the per-request envelope, and the headers that must repeat it
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": protocol,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": tool}
    return headers, {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}


def error_of(response: httpx.Response) -> str:
    """Why an answer is not a good search result ('' when it is one)."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        message = json.loads([line for line in response.text.splitlines() if line.startswith("data:")][-1][5:])
    else:
        message = response.json()
    if "error" in message:
        return f"JSON-RPC error {message['error'].get('code')}: {message['error'].get('message')}"
    if message["result"].get("isError"):
        return f"isError: {message['result']['content'][0].get('text', '')[:300]}"
    return ""


@dataclass
class Figures:
    seconds: float
    latencies_ms: list[float]
    errors: int
    first_error: str
    server_cpu: float
    client_cpu: float

    @property
    def rate(self) -> float:
        return len(self.latencies_ms) / self.seconds

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


async def measure(server: Server, clients: int, window, protocol: str) -> Figures:
    """`clients` searching one at a time until `window()` returns, which starts after the warm-up; searches that
    ended inside the window are the figures, errors count over the whole run."""
    done: list[tuple[float, float, str]] = []
    stop = asyncio.Event()

    async def client(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            query = next(server.queries)
            headers, body = tools_call(server.tool, query, len(done), protocol)
            started = time.perf_counter()
            try:
                error = error_of(await http.post(server.url, json=body, headers=headers))
            except Exception as exc:  # a refused connection, a timeout, an answer of another shape: an error
                error = f"{type(exc).__name__}: {exc}"
            done.append((started, time.perf_counter(), error))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        tasks = [asyncio.create_task(client(http)) for _ in range(clients)]
        await asyncio.sleep(WARMUP_SECONDS)
        server_cpu, client_cpu, opened = server.cpu_seconds(), own_cpu_seconds(), time.perf_counter()
        await window()
        closed = time.perf_counter()
        server_cpu, client_cpu = server.cpu_seconds() - server_cpu, own_cpu_seconds() - client_cpu
        stop.set()
        await asyncio.gather(*tasks)
    inside = [(end - start) * 1000 for start, end, error in done if opened <= end <= closed and not error]
    errors = [error for _, _, error in done if error]
    return Figures(closed - opened, inside, len(errors), errors[0] if errors else "", server_cpu, client_cpu)


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def row(label: str, what: str, figures: Figures, goal: str = "") -> str:
    count = max(len(figures.latencies_ms), 1)
    text = (
        f"{label:4} {what:>12} {figures.rate:10.1f} {figures.percentile(0.5):7.1f} "
        f"{figures.percentile(0.95):7.1f} {figures.percentile(0.99):7.1f} {figures.errors:6d} "
        f"{figures.server_cpu / count * 1000:10.1f} {figures.client_cpu / count * 1000:10.1f}  {goal}"
    )
    return text + (f"\n     first error: {figures.first_error}" if figures.errors else "")


HEADER = (
    f"{'tree':4} {'clients':>12} {'searches/s':>10} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'errors':>6} "
    f"{'server CPU':>10} {'client CPU':>10}  goal\n{'':46}{'(ms per search)':>37}"
)


def level_goal(clients: int, figures: Figures) -> str:
    goals = []
    if clients == 1:
        goals.append(f"p95 <= 30 ms: {'met' if figures.percentile(0.95) <= 30 else 'MISSED'}")
    if clients == 16:
        goals.append(f">= 100/s: {'met' if figures.rate >= 100 else 'MISSED'}")
    goals.append(f"0 errors: {'met' if not figures.errors else 'MISSED'}")
    return "; ".join(goals)


# ---- the phases ---------------------------------------------------------------------------------

ENGINE = """
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as in a command's process (models.prepare_model_runtimes)
import itertools, json, resource, sys, threading, time
from mcp_kb.api import App, SearchRequest
from mcp_kb.settings import load_config

config, queries_file, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
app = App(load_config(config), serving=True)
kb = app.config.kb[0].name
texts = [json.loads(line)["text"] for line in open(queries_file, encoding="utf-8")]
numbers = itertools.count()
app.search(kb, SearchRequest(query="warm up the model and the index", mode="hybrid", top_k=10), record=False)

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def searcher(until, done):
    while time.perf_counter() < until:
        number = next(numbers)
        query = f"{texts[number % len(texts)]} ({number})"  # distinct: the answer cache never answers
        app.search(kb, SearchRequest(query=query, mode="hybrid", top_k=10), record=False)
        done.append(1)

done, started, used = [], time.perf_counter(), cpu()
workers = [threading.Thread(target=searcher, args=(started + seconds, done)) for _ in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
elapsed = time.perf_counter() - started
print(json.dumps({"rate": len(done) / elapsed, "cpu_ms": (cpu() - used) / len(done) * 1000}))
"""


def run_engine(tree: Tree, config: Path, threads: int, seconds: float) -> None:
    """The searches of a level without the server: App.search in `threads` threads of one process."""
    done = tree.run("-c", ENGINE, str(config), str(EVAL / "scifact" / "queries.jsonl"), str(threads), str(seconds))
    if done.returncode:
        sys.exit(f"tree {tree.name}: the engine run failed:\n{done.stderr.strip()}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"tree {tree.name}: the engine alone, {threads} threads, no HTTP: {figures['rate']:.1f} searches/s, "
        f"{figures['cpu_ms']:.1f} ms of CPU per search",
        flush=True,
    )


def run_levels(servers: list[Server], levels: list[int], seconds: float, protocol: str) -> None:
    print(HEADER, flush=True)
    for number, clients in enumerate(levels):
        # trees in turn, the order flipped every level, so that a drift of the machine hits both alike
        for server in servers if number % 2 == 0 else servers[::-1]:
            figures = asyncio.run(measure(server, clients, lambda: asyncio.sleep(seconds), protocol))
            print(row(server.label, str(clients), figures, level_goal(clients, figures)), flush=True)


def run_sync(server: Server, protocol: str) -> None:
    """16 clients searching while another process syncs 200 edited documents into the KB being served."""
    edit_documents(server.config, EDITED_DOCUMENTS)
    outcome: dict = {}

    async def sync_window() -> None:
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mcp_kb",
            "sync",
            "-c",
            str(server.config),
            env=server.tree.env(),
            cwd=server.tree.path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await process.communicate()
        outcome.update(
            seconds=time.perf_counter() - started,
            code=process.returncode,
            said=sync_said(output.decode(errors="replace")),
        )

    figures = asyncio.run(measure(server, SYNC_CLIENTS, sync_window, protocol))
    goal = f"0 errors: {'met' if not figures.errors else 'MISSED'}"
    print(row(server.label, f"{SYNC_CLIENTS} + sync", figures, goal), flush=True)
    print(
        f"     sync of {EDITED_DOCUMENTS} edited documents: {outcome['seconds']:.1f} s wall, process included, "
        f"exit {outcome['code']}; it said: {' | '.join(outcome['said'])}",
        flush=True,
    )


def prepare_copy(number: int, tree: Tree) -> Path:
    """A fresh copy of the KB for a tree, synced by it; returns its config."""
    config = fresh_copy(number)
    # A sync with nothing to do, unless this tree's code reads the index otherwise (it then rebuilds, reusing
    # the vectors): the server serves what this tree's syncs leave, and the measured sync is the edits alone.
    done = tree.run("-m", "mcp_kb", "sync", "-c", str(config))
    print(f"tree {tree.name}: the copy's sync before serving: {' | '.join(sync_said(done.stdout + done.stderr))}")
    if done.returncode:
        sys.exit(f"tree {tree.name}: that sync failed (exit {done.returncode})")
    return config


def start_server(tree: Tree, config: Path, protocol: str, servers: list[Server], workers: int) -> None:
    kb = status(tree, config)
    server = Server(tree, config, kb["tool"], kb["last_sync"], distinct_queries(), workers=workers)
    servers.append(server)  # before it starts: stopped whatever happens
    server.start(protocol)
    print(
        f"{server.label}: serving a copy of {kb['chunks']} chunks ({kb['index_state']}) at {server.url} from "
        f"{len(server.pids())} process(es), model {kb['model']['name']}, protocol {protocol}",
        flush=True,
    )


def check_no_sync_of_its_own(server: Server) -> None:
    if (last_sync := status(server.tree, server.config)["last_sync"]) != server.last_sync:
        print(f"tree {server.tree.name}: the server synced on its own (last sync {last_sync})", flush=True)


def closing_words(server: Server) -> None:
    each = ", ".join(
        f"{rss:.0f} (peak {peak:.0f}, private {private:.0f})"
        for rss, peak, private in zip(server.memory_mb(), server.memory_mb("VmHWM"), server.memory_mb("RssAnon"))
    )
    print(f"{server.label}: RSS of each server process at the end, lead first, MB: {each}")
    if said := [line for line in server.log().splitlines() if not line.startswith("mcp-kb: serving")]:
        print(f"tree {server.tree.name}: the server said: " + " | ".join(said[:5]))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,4,16,64", help="concurrent clients per level (comma-separated)")
    parser.add_argument("--seconds", type=float, default=20, help="measured seconds per level (after a 2 s warm-up)")
    parser.add_argument("--no-sync", action="store_true", help="skip the phase of searches during a sync")
    parser.add_argument(
        "--engine-threads", type=int, default=16, help="threads of the engine-alone figure (0: skip it)"
    )
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        default=[],
        help="a checkout whose mcp_kb the server and sync run (default: this one); twice: both, level by level in turn",
    )
    parser.add_argument(
        "--workers", default="1", help="server processes (serve --workers), each count in turn (comma-separated)"
    )
    parser.add_argument(
        "--protocol",
        default="2025-11-25",
        choices=["2025-11-25", MODERN],
        help="MCP-Protocol-Version of the POSTs (see above)",
    )
    return parser.parse_args()


def sync_said(output: str) -> list[str]:
    """What a sync reported, without its progress lines."""
    return [line for line in output.strip().splitlines() if not line.startswith("mcp-kb:")][-3:]


def main() -> None:
    args = arguments()
    use_offline_model()
    trees = [Tree(chr(ord("A") + n), path.resolve()) for n, path in enumerate(args.tree or [ROOT])]
    print(machine())
    for tree in trees:
        check_imports(tree)
        print(f"tree {tree.name}: {tree.label}")
    check_source(trees[0])
    servers: list[Server] = []
    try:
        served = [(tree, int(count)) for tree in trees for count in args.workers.split(",")]
        configs = [prepare_copy(number, tree) for number, (tree, _) in enumerate(served)]
        if args.engine_threads:
            for tree in trees:
                run_engine(tree, configs[[t for t, _ in served].index(tree)], args.engine_threads, args.seconds)
        for (tree, count), config in zip(served, configs):
            start_server(tree, config, args.protocol, servers, count)
        run_levels(servers, [int(n) for n in args.levels.split(",")], args.seconds, args.protocol)
        for server in servers:
            check_no_sync_of_its_own(server)
        for server in [] if args.no_sync else servers:
            run_sync(server, args.protocol)
        for server in servers:
            closing_words(server)
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
