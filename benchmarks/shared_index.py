"""A shared index on object storage, and search at a million chunks; run by hand, prints tables.

    python benchmarks/shared_index.py s3        # SciFact: search p50/p95 per mode: a folder, S3 (moto), S3 through the read cache
    python benchmarks/shared_index.py million   # 1,000,000 chunks: per vector index (the one chosen for that size,
                                                # and HNSW-SQ beside it): build time, recall@10 vs exact, p50/p95,
                                                # a server's RSS after 200 hybrid searches
    python benchmarks/shared_index.py rss       # a server process's memory on that KB (million runs it at the end,
                                                # with memory_cache_mb's default and with LanceDB's own 7 GB)

Both need the SciFact KB of `benchmarks/retrieval.py scifact train` (/tmp/mcp-kb-bench/scifact).
`s3` copies its index folder into a bucket of moto's S3 server (started on 127.0.0.1 in its own
process, so it does not share this one's interpreter); the figures are an S3-compatible server on
the same two cores, not AWS. `million` repeats SciFact's 11k real chunks under new paths with
perturbed vectors (synthetic vectors: said so in the output) and writes under /tmp/mcp-kb-bench/million.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, use_offline_model  # noqa: E402
from mcp_kb.api import SearchRequest

WORK = Path("/tmp/mcp-kb-bench")
MODES = ("keyword", "vector", "hybrid")


def _queries(n: int) -> list[str]:
    from mcp_kb.evaluation import load_queries

    return list(load_queries(EVAL / "scifact" / "queries.jsonl").values())[:n]


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(len(times) * 0.95)]


def _timed_searches(app, kb: str, queries: list[str], mode: str) -> list[float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        app.search(kb, SearchRequest(query=query, mode=mode, top_k=10), record=False)
        times.append((time.perf_counter() - started) * 1000)
    return times


# ---- local folder vs S3 ----------------------------------------------------------------------

def s3(count: int, only: list[str]) -> None:
    import boto3

    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    folder = WORK / "scifact"
    local = App(kb_config(folder / "docs", folder / "index", "scifact"))
    queries = _queries(count)
    with _moto_server() as endpoint:
        options = {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": "bench",
                   "aws_secret_access_key": "bench", "aws_region": "us-east-1"}
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                              region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        started = time.perf_counter()
        for path in (folder / "index").rglob("*"):
            if path.is_file():
                client.upload_file(str(path), "bench", f"index/{path.relative_to(folder / 'index').as_posix()}")
        print(f"uploaded the index to the bucket in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        def remote(**storage):
            return build_config({"storage": {"uri": "s3://bench/index", "options": options, **storage},
                                 "kb": [{"name": "scifact", "description": "d", "paths": [str(folder / "docs")]}]},
                                base_dir=folder, source=None)

        cache = WORK / "read-cache"
        shutil.rmtree(cache, ignore_errors=True)
        variants = (("folder", local.config), ("s3", remote(read_cache_mb=0)),
                    ("s3+cache", remote(read_cache_dir=str(cache))))
        print(f"{'storage':9} {'mode':8} {'cold ms':>8} {'p50 ms':>7} {'p95 ms':>7}")
        for label, config in variants:
            if only and label not in only:
                continue
            local.embedder.embed_query("warm up the model")
            for mode in MODES:
                cold = []
                for query in queries[:3]:  # a new process's first search: open the store, read the tables
                    cold += _timed_searches(App(config, embedder=local.embedder), "scifact", [query], mode)
                if label == "s3+cache":  # the disk cache as earlier searches of these queries left it
                    _timed_searches(App(config, embedder=local.embedder), "scifact", queries, mode)
                app = App(config, embedder=local.embedder)
                _timed_searches(app, "scifact", [q + " warm" for q in queries[:10]], mode)
                p50, p95 = _percentiles(_timed_searches(app, "scifact", queries, mode))
                print(f"{label:9} {mode:8} {statistics.median(cold):8.0f} {p50:7.1f} {p95:7.1f}", flush=True)
        print(f"read cache: {sum(f.stat().st_size for f in cache.rglob('*') if f.is_file()) / 2**20:.0f} MB on disk")


class _moto_server:
    """moto's S3 server in its own process on a free loopback port."""

    def __enter__(self) -> str:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto's server did not start")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait()


# ---- a million chunks ------------------------------------------------------------------------

def million(size: int, all_variants: bool) -> None:
    import pyarrow as pa
    from lancedb.index import FTS, BTree

    from mcp_kb.app import App
    from mcp_kb.index.contract import new_generation
    from mcp_kb.index.store import VectorIndex

    source = App(kb_config(WORK / "scifact" / "docs", WORK / "scifact" / "index", "scifact"))
    rows = source.store.chunk_table("scifact").to_arrow()
    storage = WORK / "million"
    shutil.rmtree(storage, ignore_errors=True)
    app = App(kb_config(WORK / "scifact" / "docs", storage, "big"), embedder=source.embedder)
    store = app.store
    generation = new_generation()
    store.create_generation("big", generation, rows.schema)
    store.write_state("big", {**source.store.read_state("scifact"), "generation": generation, "complete": True})
    table = store.chunk_table("big", generation)
    rng = np.random.default_rng(0)
    base_vectors = np.stack(rows.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    started = time.perf_counter()
    written, copy = 0, 0
    while written < size:
        count = min(len(rows), size - written)
        vectors = base_vectors[:count] + rng.normal(0, 0.03, (count, base_vectors.shape[1])).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = rows.slice(0, count)
        batch = batch.set_column(batch.schema.get_field_index("id"), "id",
                                 pa.array([f"{copy}-{i}" for i in batch.column("id").to_pylist()]))
        batch = batch.set_column(batch.schema.get_field_index("path"), "path",
                                 pa.array([f"copy{copy}/{p}" for p in batch.column("path").to_pylist()]))
        batch = batch.set_column(batch.schema.get_field_index("vector"), "vector",
                                 pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]))
        table.add(batch)
        written += count
        copy += 1
    print(f"rows: {written} ({copy} perturbed copies of SciFact's {len(rows)} chunks; vectors synthetic: "
          f"real vectors plus noise); written in {time.perf_counter() - started:.0f} s", flush=True)
    table.optimize()
    started = time.perf_counter()
    table.create_index("search_text", config=FTS(base_tokenizer="whitespace", with_position=False,
                                                 max_token_length=64))
    for column in ("id", "path", "content_hash"):
        table.create_index(column, config=BTree())
    print(f"full-text + scalar indexes: {time.perf_counter() - started:.0f} s", flush=True)

    queries = _queries(200)
    query_vectors = [source.embedder.embed_query(q) for q in queries[:100]]
    exact = [set(table.search(v).metric("cosine").bypass_vector_index().limit(10).select(["id"])
                 .to_arrow().column("id").to_pylist()) for v in query_vectors]
    exact_times = []
    for vector in query_vectors[:30]:
        started = time.perf_counter()
        table.search(vector).metric("cosine").bypass_vector_index().limit(10).select(["id"]).to_arrow()
        exact_times.append((time.perf_counter() - started) * 1000)
    print(f"exact vector search: p50 {statistics.median(exact_times):.0f} ms", flush=True)
    print(f"{'vector index':28} {'build s':>7} {'recall@10':>9} {'ours':>5} {'vec p50':>8} {'vec p95':>8} "
          f"{'hyb p50':>8} {'hyb p95':>8} {'kw p50':>7} {'kw p95':>7}", flush=True)
    chosen = VectorIndex.for_rows(written, base_vectors.shape[1])
    variants = [chosen, VectorIndex(pq=False, partitions=chosen.partitions)]
    if all_variants:  # LanceDB's own choice of partitions (about sqrt(rows)) for each kind
        variants += [VectorIndex(pq=v.pq, partitions=int(written ** 0.5), sub_vectors=v.sub_vectors) for v in variants]
    for index in variants:
        for old in table.list_indices():
            if old.columns == ["vector"]:
                table.drop_index(old.name)
        started = time.perf_counter()
        table.create_index("vector", config=index.config(), name=index.name)
        build = time.perf_counter() - started
        # LanceDB's own top 10 from the index alone
        found = [set(table.search(v).metric("cosine").limit(10).select(["id"]).to_arrow().column("id").to_pylist())
                 for v in query_vectors]
        recall = np.mean([len(a & b) / 10 for a, b in zip(found, exact)])
        # the search path: 50 candidates (refined for IVF-PQ), re-ranked by exact cosine
        view = store.view("big", generation)
        ours = [{c.id for c in view.nearest(np.asarray(v, dtype=np.float32), None, 50)[:10]} for v in query_vectors]
        recall_ours = np.mean([len(a & b) / 10 for a, b in zip(ours, exact)])
        figures = []
        for mode in ("vector", "hybrid", "keyword"):
            _timed_searches(app, "big", [q + " warm" for q in queries[:10]], mode)
            figures += _percentiles(_timed_searches(app, "big", queries, mode))
        label = f"{index.kind} {index.partitions} parts" + (f", {index.sub_vectors} codes" if index.pq else "")
        if index == chosen:
            label += " *"
        print(f"{label:28} {build:7.0f} {recall:9.3f} {recall_ours:5.3f} " + " ".join(f"{f:8.1f}" for f in figures),
              flush=True)
        subprocess.run([sys.executable, __file__, "rss"], check=True)
    print("* the index mcp-kb builds at this size", flush=True)
    print(f"peak RSS of this process (writer and server in one): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)


def server_rss(memory_cache_mb: int | None) -> None:
    """What a server process needs for the million-chunk KB: open it, answer 200 hybrid searches."""
    from mcp_kb.app import App

    config = kb_config(WORK / "scifact" / "docs", WORK / "million", "big")
    if memory_cache_mb:
        config = config.model_copy(update={"storage": config.storage.model_copy(
            update={"memory_cache_mb": memory_cache_mb})})
    app = App(config)
    app.embedder.embed_query("load the model")
    loaded = _memory("VmRSS")
    p50, p95 = _percentiles(_timed_searches(app, "big", _queries(200), "hybrid"))
    print(f"a server process (memory_cache_mb = {config.storage.memory_cache_mb}): {loaded:.0f} MB with the model "
          f"loaded, {_memory('VmRSS'):.0f} MB after 200 hybrid searches ({_memory('RssAnon'):.0f} MB private, "
          f"{_memory('RssFile'):.0f} MB pages of files), peak {_memory('VmHWM'):.0f} MB "
          f"(cold process: p50 {p50:.0f} ms, p95 {p95:.0f} ms)", flush=True)


def _memory(field: str) -> float:
    """MB of this process's memory from /proc (ru_maxrss would include a parent's peak: Linux keeps it across exec)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["s3", "million", "rss"])
    parser.add_argument("--size", type=int, default=1_000_000, help="chunks for `million`")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode for `s3`")
    parser.add_argument("--all-variants", action="store_true", help="`million`: also LanceDB's default and IVF_PQ")
    parser.add_argument("--memory-cache-mb", type=int, help="`rss`: [storage] memory_cache_mb (default: the setting's)")
    parser.add_argument("--only", default="", help="`s3`: these storages only (comma-separated: folder,s3,s3+cache)")
    args = parser.parse_args()
    use_offline_model()
    {"s3": lambda: s3(args.queries, [o for o in args.only.split(",") if o]),
     "million": lambda: million(args.size, args.all_variants),
     "rss": lambda: server_rss(args.memory_cache_mb)}[args.what]()


if __name__ == "__main__":
    main()
