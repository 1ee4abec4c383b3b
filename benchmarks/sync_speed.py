"""Sync speed and memory, run by hand; prints figures.

    python benchmarks/sync_speed.py scifact     # full SciFact sync vs raw fastembed throughput, peak RSS
    python benchmarks/sync_speed.py scifact --limit 1000 --quantize none   # [embedding] quantize = "none" (fp32)
    python benchmarks/sync_speed.py scifact --limit 1000 --model-path ../shared/models/all-MiniLM-L6-v2-onnx-int8
    python benchmarks/sync_speed.py noop        # 10,000 files: no-op resync, what status counts as pending, and
                                                # one changed file
    python benchmarks/sync_speed.py workers --workers 1 2   # the real-PDF set: files/s by parsing processes
    python benchmarks/sync_speed.py engines     # the real-PDF set: 1 worker, every core, a Ray cluster of two
    python benchmarks/sync_speed.py engines --corpus scifact --limit 1000   # nodes (pip install '.[ray]')
    python benchmarks/sync_speed.py commit      # a Ray wave's commit on tables of 100 to 3,000 fragments: new
                                                # documents, and changed ones (pip install '.[ray]')
    python benchmarks/sync_speed.py threads     # raw embedding of 500 SciFact abstracts: int8 vs fp32, 1 vs 2
                                                # ONNX threads, passages per second and per CPU-second
    python benchmarks/sync_speed.py served --limit 800   # the same corpus through `mcp-kb sync` and through the
                                                # sync tool of a running stdio server: wall, CPU per wall second,
                                                # and a search's latency during the server's sync

Everything is written under /tmp/mcp-kb-bench.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import kb_config, progress, use_offline_model, write_corpus

WORK = Path("/tmp/mcp-kb-bench")


def scifact(args: argparse.Namespace) -> None:
    from mcp_kb.app import App

    folder = WORK / f"scifact-speed-{args.limit or 'all'}"
    shutil.rmtree(folder / "index", ignore_errors=True)
    count = write_corpus("scifact", folder / "docs", limit=args.limit)
    app = App(kb_config(folder / "docs", folder / "index", "scifact", quantize=args.quantize))
    app.releases_model = True  # as `mcp-kb sync` does
    app.embedder.embed_query("load the model before timing")
    started = time.perf_counter()
    report = app.sync(progress=progress)[0]
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{report.summary()}", file=sys.stderr)
    pipeline_rate = report.chunks_embedded / seconds
    texts = [
        f"{r['heading']}\n{r['text']}" if r["heading"] else r["text"]
        for r in app.store.chunk_table("scifact").to_arrow().select(["heading", "text"]).to_pylist()
    ]
    sample = random.Random(0).sample(texts, min(1500, len(texts)))
    started = time.perf_counter()
    app.embedder.embed_batch(sample)
    raw_rate = len(sample) / (time.perf_counter() - started)
    print(f"files {count}, chunks {report.chunks_embedded}, sync {seconds:.1f}s")
    print(
        f"end-to-end {pipeline_rate:.1f} chunks/s; raw fastembed {raw_rate:.1f} chunks/s on {len(sample)} of the "
        f"same chunk texts; ratio {pipeline_rate / raw_rate:.1%}"
    )
    print(f"stages (s): {report.seconds}")
    print(f"peak RSS of the sync: {peak_mb:.0f} MB (goal for the full set: <= 700 MB)")


def noop(args: argparse.Namespace) -> None:
    from mcp_kb.app import App

    folder = WORK / "tenk"
    shutil.rmtree(folder, ignore_errors=True)
    for i in range(10_000):
        path = folder / "docs" / f"d{i // 1000}" / f"note{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}\n\nShort note number {i} about topic {i % 97}.\n", encoding="utf-8")
    app = App(kb_config(folder / "docs", folder / "index", "tenk"))
    started = time.perf_counter()
    first = app.sync(progress=progress)[0]
    print(f"\ninitial sync of 10,000 files: {time.perf_counter() - started:.1f}s, {first.chunks_embedded} embedded")
    timings = []
    for _ in range(3):
        before = app.embedder.calls
        started = time.perf_counter()
        report = app.sync()[0]
        timings.append(time.perf_counter() - started)
        assert app.embedder.calls == before and report.files_unchanged == 10_000
    print(
        f"no-op resync of 10,000 files: best {min(timings):.2f}s, median {sorted(timings)[1]:.2f}s, 0 embedded "
        f"({10_000 / min(timings):.0f} files/s)"
    )
    counts = []
    for _ in range(5):  # what `mcp-kb status` counts: listing and stat alone (goal: <= 0.5 s)
        started = time.perf_counter()
        pending = app.pending("tenk")
        counts.append(time.perf_counter() - started)
        assert pending is not None and not pending.behind
    print(
        f"pending count of 10,000 unchanged files: best {min(counts):.2f}s, median {sorted(counts)[2]:.2f}s "
        f"(goal <= 0.5 s; {sorted(counts)[2] / sorted(timings)[1]:.0%} of a no-op sync)"
    )
    target = folder / "docs" / "d5" / "note05000.md"
    target.write_text("# Note 5000\n\nThis note was edited: it now covers release planning.\n", encoding="utf-8")
    pending = app.pending("tenk")
    assert pending is not None and (pending.added, pending.changed, pending.deleted) == (0, 1, 0), pending
    before = app.embedder.calls
    started = time.perf_counter()
    report = app.sync()[0]
    total = time.perf_counter() - started
    embed_seconds = report.seconds.get("embed", 0.0)
    print(
        f"one changed file among 10,000: {total:.2f}s total, {app.embedder.calls - before} chunk embedded "
        f"({embed_seconds:.2f}s in the embed stage); stages {report.seconds}"
    )


def workers(args: argparse.Namespace) -> None:
    """The real PDFs of ../shared/eval/pdfs synced with each number of workers, in one run: files/s of the
    whole sync and of its parse stage, the share of each stage, the peak memory of the sync and a worker."""
    from mcp_kb.app import App

    folder = WORK / "pdfs"
    pdfs = list(_pdf_folder(folder).glob("*.pdf"))
    for count in args.workers:
        shutil.rmtree(folder / "index", ignore_errors=True)
        app = App(kb_config(folder / "docs", folder / "index", "pdfs", workers=count))
        started = time.perf_counter()
        app.check()  # parsing and chunking alone, in the same workers
        print(f"workers {count}: parsing alone (check) {len(pdfs) / (time.perf_counter() - started):.2f} files/s")
        app.embedder.embed_query("load the model before timing")
        started = time.perf_counter()
        report = app.sync()[0]
        seconds = time.perf_counter() - started
        stages = {
            stage: round(value / report.seconds["total"], 2)
            for stage, value in report.seconds.items()
            if stage in ("parse", "embed", "write", "index")
        }
        print(
            f"workers {count}: {len(pdfs)} files ({report.files_failed} failed), {report.chunks_embedded} chunks in "
            f"{seconds:.1f}s: {len(pdfs) / seconds:.2f} files/s; parse stage {report.seconds['parse']:.1f}s "
            f"({len(pdfs) / report.seconds['parse']:.2f} files/s, runs a batch ahead of embedding); share of the "
            f"total {stages}; peak RSS: sync {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, "
            f"a worker {report.worker_peak_mb} MB"
        )


def engines(args: argparse.Namespace) -> None:
    """One corpus synced in one run by a local sync with one parsing process, one with every core, and a Ray sync on
    a cluster of two local nodes of one CPU each (loopback): files/s, chunks/s, each stage's seconds (the cluster's
    summed over its workers), the peak memory of the coordinator, of a parsing process and of a Ray indexer."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # Ray would name the nodes by the network address
    from ray.cluster_utils import Cluster

    from mcp_kb.app import App
    from mcp_kb.settings import usable_cores

    folder = WORK / f"engines-{args.corpus}"
    docs = _pdf_folder(folder) if args.corpus == "pdfs" else folder / "docs"
    files = len(list(docs.glob("*"))) if args.corpus == "pdfs" else write_corpus("scifact", docs, limit=args.limit)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"}
    )
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    try:
        for label, sync in (
            ("local, 1 worker", {"workers": 1}),
            (f"local, {usable_cores()} workers", {}),
            ("ray, 2 nodes x 1 CPU", {"engine": "ray", "ray_address": cluster.address}),
        ):
            shutil.rmtree(folder / "index", ignore_errors=True)
            config = kb_config(docs, folder / "index", "corpus")
            app = App(config.model_copy(update={"sync": config.sync.model_copy(update=sync)}))
            app.embedder.embed_query("load the model before timing")
            started = time.perf_counter()
            report = app.sync()[0]
            seconds = time.perf_counter() - started
            stages = {stage: round(value, 1) for stage, value in report.seconds.items() if stage != "total"}
            print(
                f"{label}: {files} files ({report.files_failed} failed), {report.chunks_total} chunks "
                f"({report.chunks_embedded} embedded) in {seconds:.1f}s: {files / seconds:.2f} files/s, "
                f"{report.chunks_total / seconds:.1f} chunks/s; stage seconds {stages} (parse, embed and write: "
                f"summed over the processes doing them; cluster: the waves' wall time); peak RSS: coordinator "
                f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (so far), a parsing process "
                f"{report.worker_peak_mb} MB"
                + (f", an indexer {report.indexer_peak_mb} MB" if sync.get("engine") else "")
            )
    finally:
        cluster.shutdown()


def commit(args: argparse.Namespace) -> None:
    """Seconds of one wave's commit (the coordinator's serial part of a Ray sync) as the chunk table grows in
    fragments: a wave of 1,024 new documents, and one of 1,024 changed documents spread over the table."""
    import pyarrow as pa

    from mcp_kb.index.contract import new_generation
    from mcp_kb.index.store import LanceStore
    from mcp_kb.schema import ChunkRow, chunk_schema

    def rows(store: LanceStore, generation: str, paths: list[str]) -> pa.Table:
        chunks = [
            ChunkRow(
                id=f"{path}#0",
                path=path,
                chunk_index=0,
                heading="H",
                title="T",
                page=None,
                line_start=1,
                line_end=1,
                text=path,
                search_text=path,
                field_text="",
                content_hash=path,
                file_hash="f",
                n_tokens=1,
                vector=[0.1] * 4,
            ).as_dict()
            for path in paths
        ]
        return pa.Table.from_pylist(chunks, schema=store.chunk_schema("bench", generation))

    print(f"{'fragments':>9} {'new docs (s)':>12} {'changed docs (s)':>16}")
    for fragments in (100, 1000, 3000):
        shutil.rmtree(WORK / "commit", ignore_errors=True)
        store, generation = LanceStore(str(WORK / "commit")), new_generation()
        store.create_generation("bench", generation, chunk_schema(4, {}))
        table = store.chunk_table("bench", generation)
        for number in range(fragments):  # a batch's fragment each, as a Ray sync leaves them before compaction
            table.add(rows(store, generation, [f"doc{number}-{i}.md" for i in range(32)]))
        figures = []
        for paths in (
            [f"new{i}.md" for i in range(1024)],
            [f"doc{number}-0.md" for number in range(0, fragments, max(1, fragments // 1024))][:1024],
        ):
            written = [store.write_fragments("bench", generation, rows(store, generation, paths))]
            started = time.perf_counter()
            store.commit_fragments("bench", generation, paths, written)
            figures.append(time.perf_counter() - started)
        print(f"{fragments:9} {figures[0]:12.2f} {figures[1]:16.2f}", flush=True)


def _pdf_folder(folder: Path) -> Path:
    """../shared's real PDFs, flat and renamed (two sample sets share file names)."""
    pdfs = sorted((Path(__file__).resolve().parents[2] / "shared" / "eval" / "pdfs").rglob("*.pdf"))
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "docs").mkdir(parents=True)
    for i, pdf in enumerate(pdfs):
        shutil.copyfile(pdf, folder / "docs" / f"{i:03d}-{pdf.name}")
    return folder / "docs"


def threads(args: argparse.Namespace) -> None:
    """Passages per second and per CPU-second of the model alone, by quantization and ONNX threads (the sync
    embeds one batch at a time: what a thread count buys shows here first)."""
    import json

    from mcp_kb.models.fastembed import FastEmbedder
    from mcp_kb.settings import build_config

    with (Path(__file__).resolve().parents[2] / "shared" / "eval" / "scifact" / "corpus.jsonl").open() as handle:
        texts = [json.loads(line)["text"] for _, line in zip(range(500), handle)]
    print(f"{'quantize':8} {'threads':>7} {'passages/s':>10} {'per CPU-s':>9}")
    for quantize in ("int8", "none"):
        for count in (1, 2):
            config = build_config({"embedding": {"quantize": quantize, "threads": count}}, Path.cwd(), None).embedding
            embedder = FastEmbedder(config)
            embedder.embed_batch(texts[:16])  # loaded, warm
            cpu, wall = time.process_time(), time.perf_counter()
            embedder.embed_batch(texts)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"{quantize:8} {count:7} {len(texts) / wall:10.1f} {len(texts) / cpu:9.1f}", flush=True)
            embedder.release()


def served(args: argparse.Namespace) -> None:
    """One corpus synced by `mcp-kb sync` and by the sync tool of a running `mcp-kb serve` (stdio, as a client
    launches it), each into an index of its own; meanwhile a small KB the server already holds is searched, one
    search after the other, for the latency a user sees during a sync."""
    import anyio

    folder = WORK / f"served-{args.limit or 'all'}"
    count = write_corpus("scifact", folder / "docs", limit=args.limit)
    probe = folder / "probe"
    for n in range(40):
        (probe / f"p{n}.md").parent.mkdir(parents=True, exist_ok=True)
        (probe / f"p{n}.md").write_text(f"# Probe {n}\n\nA note about topic {n} and leave policy {n % 7}.\n")
    configs = {}
    for who in ("cli", "server"):
        shutil.rmtree(folder / who, ignore_errors=True)
        configs[who] = folder / who / "kb.toml"
        configs[who].parent.mkdir(parents=True)
        configs[who].write_text(
            f'storage = "{folder / who / "index"}"\n[embedding]\nquantize = "{args.quantize}"\n'
            f'[[kb]]\nname = "scifact"\ndescription = "SciFact"\npaths = ["{folder / "docs"}"]\n'
            f'[[kb]]\nname = "again"\ndescription = "SciFact again"\n'
            f'paths = ["{folder / "docs"}"]\n'
            f'[[kb]]\nname = "probe"\ndescription = "Probe"\npaths = ["{probe}"]\n'
        )
    command = [sys.executable, "-m", "mcp_kb"]
    subprocess.run([*command, "sync", "probe", "-c", str(configs["server"])], check=True, capture_output=True)
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([*command, "sync", "scifact", "-c", str(configs["cli"])], check=True, capture_output=True)  # alone
    after, cli_wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - wall
    cli_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    server_wall, server_cpu, quiet, during = anyio.run(_sync_through_the_server, configs["server"])
    print(f"{count} SciFact documents, quantize {args.quantize}")
    print(f"{'path':18} {'wall s':>7} {'CPU-s per s':>11}")
    print(f"{'mcp-kb sync':18} {cli_wall:7.1f} {cli_cpu / cli_wall:11.2f}")
    print(f"{'the sync tool':18} {server_wall:7.1f} {server_cpu / server_wall:11.2f}")
    print(f"ratio (tool / CLI): {server_wall / cli_wall:.2f} (goal <= 1.1)")
    for label, seconds in (("quiet", quiet), ("during the sync", during)):
        ordered = sorted(seconds)
        print(
            f"one client's search {label}: {len(ordered)} searches, p50 {ordered[len(ordered) // 2] * 1000:.1f} ms, "
            f"p95 {ordered[int(len(ordered) * 0.95)] * 1000:.1f} ms"
        )


async def _sync_through_the_server(config: Path) -> tuple[float, float, list[float], list[float]]:
    """Wall and CPU seconds (the server's and its reaped children's) of the sync tool's call alone; the latencies of
    searches, five a second, while the server is quiet and while it syncs the same corpus into another KB."""
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
    )
    async with Client(params) as client:
        server = _child_pid()

        async def searches(latencies: list[float], until: anyio.Event | None, count: int = 0) -> None:
            number = 0
            while (until is not None and not until.is_set()) or number < count:
                started = time.perf_counter()
                await client.call_tool("search_probe", {"query": f"leave policy topic {number}"})
                latencies.append(time.perf_counter() - started)
                number += 1
                await anyio.sleep(max(0.2 - latencies[-1], 0))  # five a second: a person or two asking

        cpu, wall = _cpu_seconds(server), time.perf_counter()
        answer = await client.call_tool("sync_knowledge_base", {"kb": "scifact"})
        wall, cpu = time.perf_counter() - wall, _cpu_seconds(server) - cpu
        assert not answer.is_error, answer.content[0].text
        quiet: list[float] = []
        during: list[float] = []
        await searches(quiet, None, count=50)
        done = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(searches, during, done)
            await client.call_tool("sync_knowledge_base", {"kb": "again"})
            done.set()
        return wall, cpu, quiet, during


def _child_pid() -> int:
    """The `mcp-kb serve` the stdio client started (a child of this process)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields["PPid"]) == os.getpid():
            return int(status.parent.name)
    raise RuntimeError("no server process")


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and of its children it has reaped (parse workers)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[index]) for index in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def _cpu() -> str:
    """The CPU's model and whether it has the int8 dot-product instructions int8 speed depends on."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = [flag for flag in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f" {flag}" in info]
    return f"{name}, {os.cpu_count()} cores, {' '.join(flags) or 'no AVX2'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["scifact", "noop", "workers", "engines", "commit", "threads", "served"])
    parser.add_argument("--corpus", choices=["pdfs", "scifact"], default="pdfs", help="engines: what to sync")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="workers: the counts to compare")
    parser.add_argument("--limit", type=int, help="scifact: the first N documents only")
    parser.add_argument("--model-path", help="another local model folder, e.g. the int8 export")
    parser.add_argument("--quantize", choices=["none", "int8"], default="int8", help="scifact: [embedding] quantize")
    args = parser.parse_args()
    if args.model_path:
        os.environ["MCP_KB_EMBEDDING_MODEL_PATH"] = str(Path(args.model_path).resolve())
    use_offline_model()
    print(f"model: {os.environ.get('MCP_KB_EMBEDDING_MODEL_PATH')}, quantize {args.quantize}; CPU: {_cpu()}")
    {
        "scifact": scifact,
        "noop": noop,
        "workers": workers,
        "engines": engines,
        "commit": commit,
        "threads": threads,
        "served": served,
    }[args.scenario](args)


if __name__ == "__main__":
    main()
