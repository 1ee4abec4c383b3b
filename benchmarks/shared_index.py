"""A shared index on object storage, and search at a million chunks; run by hand, prints tables.

    python benchmarks/shared_index.py s3        # SciFact: search p50/p95 per mode: a folder, S3 (moto), S3 through the read cache
    python benchmarks/shared_index.py million   # 1,000,000 chunks with the vector index mcp-kb chooses at that size
                                                # (built once, kept; --rebuild builds it again), then per tree a
                                                # server process: p50/p95 per mode and per stage, LanceDB's floor
                                                # of each side, recall@10 vs exact, its RSS after 600 searches
        --tree /work/before --tree /work/main   # each tree first on PYTHONPATH of its process, run A B A B
        --all-variants                          # also HNSW-SQ, on a copy of the table
    python benchmarks/shared_index.py rss       # a server process's memory on that KB (200 hybrid searches)

Both need the SciFact KB of `benchmarks/retrieval.py scifact train` (/tmp/mcp-kb-bench/scifact).
`s3` copies its index folder into a bucket of moto's S3 server (started on 127.0.0.1 in its own
process, so it does not share this one's interpreter); the figures are an S3-compatible server on
the same two cores, not AWS. `million` repeats SciFact's 11k real chunks under new paths with
perturbed vectors (synthetic vectors: said so in the output) and writes under /tmp/mcp-kb-bench/million
(`measure` is its per-tree part, run in a process of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# After PYTHONPATH and the editable install: `million --tree` picks the mcp_kb a measuring process imports.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, use_offline_model
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
        options = {
            "aws_endpoint": endpoint,
            "allow_http": "true",
            "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench",
            "aws_region": "us-east-1",
        }
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bench")
        started = time.perf_counter()
        for path in (folder / "index").rglob("*"):
            if path.is_file():
                client.upload_file(str(path), "bench", f"index/{path.relative_to(folder / 'index').as_posix()}")
        print(f"uploaded the index to the bucket in {time.perf_counter() - started:.1f} s", file=sys.stderr)

        def remote(**storage):
            return build_config(
                {
                    "storage": {"uri": "s3://bench/index", "options": options, **storage},
                    "kb": [{"name": "scifact", "description": "d", "paths": [str(folder / "docs")]}],
                },
                base_dir=folder,
                source=None,
            )

        cache = WORK / "read-cache"
        shutil.rmtree(cache, ignore_errors=True)
        variants = (
            ("folder", local.config),
            ("s3", remote(read_cache_mb=0)),
            ("s3+cache", remote(read_cache_dir=str(cache))),
        )
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
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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
# Built once (rows, the full-text and scalar indexes a sync builds, the vector index mcp-kb chooses at that size, the
# exact top 10 of the queries), then measured by one process per tree, as a server answers searches.

EXACT = "exact.json"  # beside the table: what was built, and the exact top 10 of each query
MEASURED = 200  # distinct queries per mode
WARM_UP = 10


def million(storage: Path, size: int, rebuild: bool, trees: list[str], all_variants: bool) -> None:
    print(f"CPU: {_cpu_model()}; os.cpu_count() = {os.cpu_count()}", flush=True)
    chosen = _build(storage, size, rebuild)
    trees = trees or [str(Path(__file__).resolve().parents[1])]
    rounds = 2 if len(trees) > 1 else 1  # A B A B: a drift of the machine shows as a difference between rounds
    runs = [(f"{Path(tree).name} #{n + 1}", tree) for n in range(rounds) for tree in trees]
    figures = {}
    for number, (label, tree) in enumerate(runs, 1):
        print(f"\n== run {number} of {len(runs)}: {label} (PYTHONPATH={tree}) ==", flush=True)
        figures[label] = _measure_in(tree, storage)
    if all_variants and chosen.pq:
        variant = _hnsw_copy(storage, chosen)
        for tree in trees:
            label = f"{Path(tree).name} HNSW-SQ"
            print(f"\n== {label}: {variant} (PYTHONPATH={tree}) ==", flush=True)
            figures[label] = _measure_in(tree, variant)
    _summary({label: run for label, run in figures.items() if run is not None})


def _build(storage: Path, size: int, rebuild: bool):
    """The table of `size` rows with its indexes and the exact top 10 of the queries: reused when built already."""
    import pyarrow as pa
    from lancedb.index import FTS, BTree

    from mcp_kb.app import App
    from mcp_kb.index.contract import new_generation
    from mcp_kb.index.store import VectorIndex
    from mcp_kb.schema import FIELD_COLUMN, KEYWORD_COLUMN, VECTOR_COLUMN

    source = App(kb_config(WORK / "scifact" / "docs", WORK / "scifact" / "index", "scifact"))
    rows = source.store.chunk_table("scifact").to_arrow()
    dimension = rows.schema.field(VECTOR_COLUMN).type.list_size
    chosen = VectorIndex.for_rows(size, dimension)
    if not rebuild and _built(storage, size, chosen):
        facts = json.loads((storage / EXACT).read_text())
        print(
            f"reusing {storage}: {size} rows, vector index {chosen.name} (built in {facts['build_s']:.0f} s; "
            f"--rebuild builds it again)",
            flush=True,
        )
        return chosen
    began = time.perf_counter()
    shutil.rmtree(storage, ignore_errors=True)
    store = App(kb_config(WORK / "scifact" / "docs", storage, "big"), embedder=source.embedder).store
    generation = new_generation()
    store.create_generation("big", generation, rows.schema)
    store.write_state(
        "big", dataclasses.replace(source.store.read_state("scifact"), generation=generation, filled=True)
    )
    table = store.chunk_table("big", generation)
    rng = np.random.default_rng(0)
    base_vectors = np.stack(rows.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    started = time.perf_counter()
    written, copy = 0, 0
    while written < size:
        count = min(len(rows), size - written)
        vectors = base_vectors[:count] + rng.normal(0, 0.03, (count, dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batch = rows.slice(0, count)
        batch = batch.set_column(
            batch.schema.get_field_index("id"), "id", pa.array([f"{copy}-{i}" for i in batch.column("id").to_pylist()])
        )
        batch = batch.set_column(
            batch.schema.get_field_index("path"),
            "path",
            pa.array([f"copy{copy}/{p}" for p in batch.column("path").to_pylist()]),
        )
        batch = batch.set_column(
            batch.schema.get_field_index("vector"),
            "vector",
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension),
        )
        table.add(batch)
        written += count
        copy += 1
    table.optimize()
    print(
        f"rows: {written} ({copy} perturbed copies of SciFact's {len(rows)} chunks; vectors synthetic: "
        f"real vectors plus noise); written and compacted in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    started = time.perf_counter()
    for column in (KEYWORD_COLUMN, FIELD_COLUMN):  # as a sync builds them (index/upkeep.py)
        if column in table.schema.names:
            table.create_index(
                column, config=FTS(base_tokenizer="whitespace", with_position=False, max_token_length=64)
            )
    for column in ("id", "path", "content_hash"):
        table.create_index(column, config=BTree())
    print(f"full-text + scalar indexes: {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    table.create_index(VECTOR_COLUMN, config=chosen.config(), name=chosen.name)
    index_s = time.perf_counter() - started
    print(
        f"vector index {chosen.name} ({chosen.kind}, {chosen.partitions} partitions"
        + (f", {chosen.sub_vectors} codes" if chosen.pq else "")
        + f"): {index_s:.0f} s",
        flush=True,
    )
    queries = _queries(MEASURED)
    exact, times = [], []
    for query in queries:
        vector = source.embedder.embed_query(query)
        started = time.perf_counter()
        exact.append(
            table.search(vector)
            .distance_type("cosine")
            .bypass_vector_index()
            .limit(10)
            .select(["id", "_distance"])
            .to_arrow()
            .column("id")
            .to_pylist()
        )
        times.append((time.perf_counter() - started) * 1000)
    build_s = time.perf_counter() - began
    print(f"exact top 10 of {len(queries)} queries: p50 {statistics.median(times):.0f} ms each", flush=True)
    print(f"build: {build_s:.0f} s in all", flush=True)
    (storage / EXACT).write_text(
        json.dumps(
            {
                "rows": written,
                "index": chosen.name,
                "build_s": build_s,
                "index_s": index_s,
                "queries": queries,
                "exact": exact,
            }
        )
    )
    return chosen


def _built(storage: Path, size: int, chosen) -> bool:
    """Whether the table holds `size` rows with the chosen vector index, and its exact top 10 were saved (last)."""
    from mcp_kb.app import App

    try:
        facts = json.loads((storage / EXACT).read_text())
        table = App(kb_config(WORK / "scifact" / "docs", storage, "big")).store.chunk_table("big")
        return (
            facts["rows"] == size
            and facts["index"] == chosen.name
            and table is not None
            and table.count_rows() == size
            and chosen.name in {index.name for index in table.list_indices()}
        )
    except (OSError, ValueError, KeyError):
        return False


def _hnsw_copy(storage: Path, chosen) -> Path:
    """A copy of the table with HNSW-SQ of the same partitions in place of the chosen IVF-PQ (the table measured
    first keeps the index mcp-kb builds)."""
    from mcp_kb.app import App
    from mcp_kb.index.store import VectorIndex
    from mcp_kb.schema import VECTOR_COLUMN

    copy = storage.with_name(f"{storage.name}-hnsw")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(storage, copy)
    table = App(kb_config(WORK / "scifact" / "docs", copy, "big")).store.chunk_table("big")
    table.drop_index(chosen.name)
    variant = VectorIndex(pq=False, partitions=chosen.partitions)
    started = time.perf_counter()
    table.create_index(VECTOR_COLUMN, config=variant.config(), name=variant.name)
    print(
        f"\nvector index {variant.name} (HNSW-SQ, {variant.partitions} partitions) on a copy: "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    facts = json.loads((copy / EXACT).read_text())
    (copy / EXACT).write_text(json.dumps({**facts, "index": variant.name}))
    return copy


def _measure_in(tree: str, storage: Path) -> dict | None:
    """`measure` in a process of its own, importing mcp_kb from `tree` (first on PYTHONPATH, before the editable
    install's finder; run outside /work/main so no working directory shadows it); its figures, None if it failed
    (the other runs go on)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "figures.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "measure", "--storage", str(storage), "--json", str(out)],
            cwd=tempfile.gettempdir(),
            env=env,
        )
        if done.returncode:
            print(f"this run failed (exit {done.returncode}); left out of the summary", flush=True)
            return None
        return json.loads(out.read_text())


def measure(storage: Path, out: Path | None) -> None:
    """What a server does with the million-chunk KB: 200 searches per mode, each stage's p50/p95, LanceDB's own
    floor for each side, recall@10 of the search path's vector side, and the process's memory."""
    import inspect

    import mcp_kb
    from mcp_kb.app import App
    from mcp_kb.index.keywords import keyword_terms
    from mcp_kb.index.vector_index import refine_factor
    from mcp_kb.schema import KEYWORD_COLUMN

    load = os.getloadavg()[0]  # the cores are shared: other work shows in the p95s
    facts = json.loads((storage / EXACT).read_text())
    queries = facts["queries"]
    print(
        f"mcp_kb from {Path(mcp_kb.__file__).parent}; {facts['rows']} rows, vector index {facts['index']}", flush=True
    )
    app = App(kb_config(WORK / "scifact" / "docs", storage, "big"))
    if hasattr(app.embedder, "serve_queries"):  # as `mcp-kb serve` sets its model up
        app.embedder.serve_queries()
    record = {"record": False} if "record" in inspect.signature(app.search).parameters else {}

    def search(query: str, mode: str) -> tuple[float, dict[str, float]]:
        started = time.perf_counter()
        result = app.search("big", SearchRequest(query=query, mode=mode, top_k=10), **record)
        return (time.perf_counter() - started) * 1000, dict(result.timings_ms)

    for query in _queries(MEASURED + WARM_UP)[MEASURED:]:
        search(query, "hybrid")
    figures: dict = {"mcp_kb": str(Path(mcp_kb.__file__).parent), "modes": {}}
    print(
        f"{'mode':8} {'stage':9} {'p50 ms':>7} {'p95 ms':>7}   ({len(queries)} searches per mode, after "
        f"{WARM_UP} others; 'other' = wall time minus the stages: Python between them)",
        flush=True,
    )
    for mode in ("vector", "keyword", "hybrid"):
        searches = [search(query, mode) for query in queries]
        stages = list(dict.fromkeys(stage for _, timings in searches for stage in timings))
        columns = {"total": [total for total, _ in searches]}
        columns |= {stage: [timings.get(stage, 0.0) for _, timings in searches] for stage in stages}
        columns["other"] = [total - sum(timings.values()) for total, timings in searches]
        figures["modes"][mode] = {stage: _percentiles(times) for stage, times in columns.items()}
        for stage, (p50, p95) in figures["modes"][mode].items():
            print(f"{mode:8} {stage:9} {p50:7.1f} {p95:7.1f}", flush=True)
    figures["rss"] = {field: _memory(field) for field in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}
    print(
        f"RSS after {3 * len(queries) + WARM_UP} searches: {figures['rss']['VmRSS']:.0f} MB "
        f"({figures['rss']['RssAnon']:.0f} MB private, {figures['rss']['RssFile']:.0f} MB pages of files; "
        f"peak {figures['rss']['VmHWM']:.0f} MB)",
        flush=True,
    )

    # The floor, in this process: each side alone through LanceDB, as the search path asks it.
    generation = app.store.read_state("big").generation
    table = app.store.chunk_table("big", generation)
    factor, depth = refine_factor(table), app.config.get_kb("big").search.candidates
    vectors = [np.asarray(app.embedder.embed_query(query), dtype=np.float32) for query in queries]

    def vector_side(vector):
        search = table.search(vector).distance_type("cosine").limit(depth)
        return (search.refine_factor(factor) if factor else search).select(["id", "_distance"]).to_arrow()

    def keyword_side(query):
        return (
            table.search(keyword_terms(query), query_type="fts", fts_columns=KEYWORD_COLUMN)
            .limit(depth)
            .select(["id", "_score"])
            .to_arrow()
        )

    figures["floor"] = {
        "vector": _percentiles(_timed(vector_side, vectors)),
        "keyword": _percentiles(_timed(keyword_side, queries)),
    }
    print(
        f"floor, vector side alone (LanceDB, limit {depth}, refine factor {factor}): "
        f"p50 {figures['floor']['vector'][0]:.1f} ms, p95 {figures['floor']['vector'][1]:.1f} ms",
        flush=True,
    )
    print(
        f"floor, keyword side alone (LanceDB full-text, limit {depth}): "
        f"p50 {figures['floor']['keyword'][0]:.1f} ms, p95 {figures['floor']['keyword'][1]:.1f} ms",
        flush=True,
    )

    # recall@10 of the search path's vector side (its candidates, exactly re-ranked) vs the exact top 10
    view = app.store.view("big", generation)
    ours = [[c.id for c in view.nearest(vector, None, depth)[:10]] for vector in vectors]
    figures["recall"] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ours, facts["exact"])]))
    print(
        f"recall@10 through the search path ({depth} candidates, top 10) vs exact: {figures['recall']:.3f}", flush=True
    )
    figures["load"] = [load, os.getloadavg()[0]]
    print(
        f"load average (1 min) at the start {load:.1f}, at the end {figures['load'][1]:.1f} ({os.cpu_count()} cores)",
        flush=True,
    )
    if out:
        out.write_text(json.dumps(figures))


def _timed(work, items) -> list[float]:
    times = []
    for item in items:
        started = time.perf_counter()
        work(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _summary(figures: dict[str, dict]) -> None:
    """Each figure of each run side by side (a stage a tree does not time shows as -)."""
    labels = list(figures)
    if not labels:
        return
    rows: dict[str, list[str]] = {"recall@10": [f"{f['recall']:.3f}" for f in figures.values()]}
    for mode in ("vector", "keyword", "hybrid"):
        stages = dict.fromkeys(stage for f in figures.values() for stage in f["modes"][mode])
        for stage in stages:
            for at, name in ((0, "p50"), (1, "p95")):
                rows[f"{mode} {stage} {name}"] = [
                    f"{f['modes'][mode][stage][at]:.1f}" if stage in f["modes"][mode] else "-" for f in figures.values()
                ]
    for side in ("vector", "keyword"):
        for at, name in ((0, "p50"), (1, "p95")):
            rows[f"floor {side} {name}"] = [f"{f['floor'][side][at]:.1f}" for f in figures.values()]
    for field in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
        rows[f"{field} MB"] = [f"{f['rss'][field]:.0f}" for f in figures.values()]
    rows["load average start/end"] = [f"{f['load'][0]:.1f}/{f['load'][1]:.1f}" for f in figures.values()]
    width = max([12, *(len(label) + 1 for label in labels)])
    print(f"\n{'figure (ms unless said)':28}" + "".join(f"{label:>{width}}" for label in labels))
    for name, values in rows.items():
        print(f"{name:28}" + "".join(f"{value:>{width}}" for value in values))
    print("targets: recall@10 >= 0.95, hybrid total p95 <= 50 ms (or the vector floor), VmRSS <= 700 MB", flush=True)


def _cpu_model() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return "unknown"


def server_rss(storage: Path, memory_cache_mb: int | None) -> None:
    """What a server process needs for the million-chunk KB: open it, answer 200 hybrid searches."""
    from mcp_kb.app import App

    config = kb_config(WORK / "scifact" / "docs", storage, "big")
    if memory_cache_mb:
        config = config.model_copy(
            update={"storage": config.storage.model_copy(update={"memory_cache_mb": memory_cache_mb})}
        )
    app = App(config)
    app.embedder.embed_query("load the model")
    loaded = _memory("VmRSS")
    p50, p95 = _percentiles(_timed_searches(app, "big", _queries(200), "hybrid"))
    print(
        f"a server process (memory_cache_mb = {config.storage.memory_cache_mb}): {loaded:.0f} MB with the model "
        f"loaded, {_memory('VmRSS'):.0f} MB after 200 hybrid searches ({_memory('RssAnon'):.0f} MB private, "
        f"{_memory('RssFile'):.0f} MB pages of files), peak {_memory('VmHWM'):.0f} MB "
        f"(cold process: p50 {p50:.0f} ms, p95 {p95:.0f} ms)",
        flush=True,
    )


def _memory(field: str) -> float:
    """MB of this process's memory from /proc (ru_maxrss would include a parent's peak: Linux keeps it across exec)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["s3", "million", "measure", "rss"])
    parser.add_argument("--size", type=int, default=1_000_000, help="chunks for `million`")
    parser.add_argument("--storage", type=Path, default=WORK / "million", help="`million`, `measure`, `rss`: the KB")
    parser.add_argument("--rebuild", action="store_true", help="`million`: build the table again even if it is there")
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="`million`: measure with mcp_kb of this checkout (repeatable; default: this one)",
    )
    parser.add_argument("--json", type=Path, help="`measure`: write its figures here")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode for `s3`")
    parser.add_argument("--all-variants", action="store_true", help="`million`: also HNSW-SQ (on a copy)")
    parser.add_argument("--memory-cache-mb", type=int, help="`rss`: [storage] memory_cache_mb (default: the setting's)")
    parser.add_argument("--only", default="", help="`s3`: these storages only (comma-separated: folder,s3,s3+cache)")
    args = parser.parse_args()
    use_offline_model()
    {
        "s3": lambda: s3(args.queries, [o for o in args.only.split(",") if o]),
        "million": lambda: million(args.storage, args.size, args.rebuild, args.tree, args.all_variants),
        "measure": lambda: measure(args.storage, args.json),
        "rss": lambda: server_rss(args.storage, args.memory_cache_mb),
    }[args.what]()


if __name__ == "__main__":
    main()
