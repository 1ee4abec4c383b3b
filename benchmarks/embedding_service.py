"""The OpenAI-compatible provider against local fastembed, run by hand; prints figures.

    python benchmarks/embedding_service.py [--docs 300] [--queries 100]

Serves the offline model over HTTP on 127.0.0.1 (the tests' service, tests/fake_embeddings.py), then
syncs the same SciFact documents with local fastembed and through the service at concurrency 1, 2
and 4 (chunks/s and the ratio to local), and times query embeddings (p50/p95) both ways. The service
runs on the same CPUs, so the ratios show the provider's overhead, not a remote GPU's speed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from _beir import EVAL, MODEL, use_offline_model, write_corpus  # noqa: E402

WORK = Path("/tmp/mcp-kb-bench/embedding-service")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    use_offline_model()
    from fake_embeddings import EmbeddingService, serve_embeddings

    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    write_corpus("scifact", WORK / "docs", limit=args.docs)
    local = App(build_config({}, WORK, None))
    local.embedder.embed_query("load the model before timing")
    queries = [json.loads(line)["text"] for line in (EVAL / "scifact" / "queries.jsonl").open()][: args.queries]
    with serve_embeddings(EmbeddingService(local.embedder)) as service:
        service_settings = {
            "provider": "openai",
            "base_url": service.url,
            "model": service.model,
            "tokenizer_path": str(MODEL),
            "max_input_tokens": 256,
        }
        rates = {"local fastembed": _sync_rate(local.config.embedding.model_dump())}
        for concurrency in (1, 2, 4):
            rates[f"service, concurrency {concurrency}"] = _sync_rate(
                {**service_settings, "max_concurrency": concurrency}
            )
        remote = App(build_config({"embedding": service_settings}, WORK, None))
        query_ms = {"local fastembed": _query_ms(local, queries), "service": _query_ms(remote, queries)}
    base = rates["local fastembed"]
    for name, rate in rates.items():
        print(f"sync {name:26} {rate:6.1f} chunks/s  ratio {rate / base:.2f}")
    for name, times in query_ms.items():
        print(
            f"query embedding {name:16} p50 {statistics.median(times):6.1f} ms  "
            f"p95 {statistics.quantiles(times, n=20)[-1]:6.1f} ms"
        )


def _sync_rate(embedding: dict) -> float:
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    index = WORK / "index"
    shutil.rmtree(index, ignore_errors=True)
    app = App(
        build_config(
            {
                "storage": str(index),
                "embedding": embedding,
                "kb": [{"name": "scifact", "description": "d", "paths": [str(WORK / "docs")]}],
            },
            WORK,
            None,
        )
    )
    app.embedder.embed_query("warm up")
    started = time.perf_counter()
    report = app.sync()[0]
    return report.chunks_embedded / (time.perf_counter() - started)


def _query_ms(app, queries: list[str]) -> list[float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        app.embedder.embed_query(query)
        times.append((time.perf_counter() - started) * 1000)
    return times


if __name__ == "__main__":
    main()
