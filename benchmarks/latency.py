"""Search latency per mode at 10k and 100k chunks, model already loaded; run by hand.

    python benchmarks/latency.py

Needs the SciFact KB from `benchmarks/retrieval.py scifact train` (11k real chunks). Larger
tables are made from copies of its rows under new paths with slightly perturbed vectors, then
indexed exactly as a sync would (full-text index; HNSW vector index from 20k chunks on).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, use_offline_model
from mcp_kb.api import SearchRequest

WORK = Path("/tmp/mcp-kb-bench")


def build(app, source_rows, size: int) -> None:
    import pyarrow as pa

    from mcp_kb.index.contract import new_generation

    store = app.store
    schema = app.store.chunk_table("scifact").schema
    store.drop_generations("lat", keep=set())
    generation = new_generation()
    store.create_generation("lat", generation, schema)
    store.write_state("lat", dataclasses.replace(store.read_state("scifact"), generation=generation))
    rng = np.random.default_rng(0)
    written = 0
    copy = 0
    while written < size:
        batch = source_rows[: size - written]
        vectors = np.asarray([row["vector"] for row in batch], dtype=np.float32)
        if copy:
            vectors += rng.normal(0, 0.02, vectors.shape).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [
            {**row, "id": f"{copy}-{row['id']}", "path": f"copy{copy}/{row['path']}", "vector": vector}
            for row, vector in zip(batch, vectors.tolist())
        ]
        table = pa.Table.from_pylist(rows, schema=schema)
        store.replace_documents("lat", generation, sorted({r["path"] for r in rows}), table)
        written += len(rows)
        copy += 1
    print(f"built {written} chunks; index: {store.refresh_indexes('lat', generation, changed=True)}", file=sys.stderr)


def main() -> None:
    use_offline_model()
    from mcp_kb.app import App
    from mcp_kb.evaluation import load_queries

    folder = WORK / "scifact"
    app = App(kb_config(folder / "docs", folder / "index", "scifact"))
    kb = app.config.kb[0].model_copy(update={"name": "lat"})
    app.config = app.config.model_copy(update={"kb": [kb]})
    source_rows = app.store.chunk_table("scifact").to_arrow().to_pylist()
    queries = list(load_queries(EVAL / "scifact" / "queries.jsonl").values())[:200]
    app.embedder.embed_query("warm up")
    print(f"{'chunks':>7} {'mode':8} {'p50 ms':>7} {'p95 ms':>7}")
    for size in (10_000, 100_000):
        build(app, source_rows, size)
        for mode in ("keyword", "vector", "hybrid"):
            for query in queries[:10]:  # warm caches
                app.search("lat", SearchRequest(query=query + " warm", mode=mode, top_k=10))
            times = []
            for query in queries:
                started = time.perf_counter()
                app.search("lat", SearchRequest(query=query, mode=mode, top_k=10))
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            print(f"{size:7d} {mode:8} {statistics.median(times):7.1f} {times[int(len(times) * 0.95)]:7.1f}")
    app.store.drop_generations("lat", keep=set())


if __name__ == "__main__":
    main()
