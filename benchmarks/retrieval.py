"""Retrieval quality and latency per mode on the shared BEIR sets (dev splits).

    python benchmarks/retrieval.py scifact train      # SciFact, train queries
    python benchmarks/retrieval.py cmrc2018 trial     # CMRC 2018 (Chinese), trial queries

Builds (or incrementally refreshes) the KB under /tmp/mcp-kb-bench/<set>, then prints
recall@10, MRR@10, nDCG@10, p50/p95 latency and the average tokens returned per call for each mode,
through the same search path the tools use (`--top-k`, default 10: what clients ask for; hits are
mapped to documents, the first hit of a document is its rank).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, progress, use_offline_model, write_corpus
from mcp_kb.api import SearchRequest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=["scifact", "cmrc2018"])
    parser.add_argument("split")
    parser.add_argument("--modes", default="keyword,vector,hybrid")
    parser.add_argument("--work", default="/tmp/mcp-kb-bench")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument(
        "--quantize",
        choices=["none", "int8"],
        default="int8",
        help="[embedding] quantize (an fp32 index is kept apart, under <work>/<set>-fp32)",
    )
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [kb.search] setting to measure, e.g. title_weight=1 or max_per_document=1",
    )
    args = parser.parse_args()
    use_offline_model()
    from mcp_kb.app import App
    from mcp_kb.evaluation import evaluate, load_qrels, load_queries
    from mcp_kb.present import scores_text

    work = Path(args.work) / (args.dataset + ("-fp32" if args.quantize == "none" else ""))
    write_corpus(args.dataset, work / "docs")
    search = {key: json.loads(value) for key, value in (setting.split("=", 1) for setting in args.search)}
    app = App(kb_config(work / "docs", work / "index", args.dataset, search=search, quantize=args.quantize))
    started = time.perf_counter()
    report = app.sync(progress=progress)[0]
    print(f"\n{report.summary()}\nsync {time.perf_counter() - started:.1f}s", file=sys.stderr)
    queries = load_queries(EVAL / args.dataset / "queries.jsonl")
    qrels = load_qrels(EVAL / args.dataset / "qrels" / f"{args.split}.tsv")
    app.embedder.serve_queries()  # queries embedded as a server embeds them
    app.embedder.embed_query("warm up")
    scores, tokens = [], {}
    for mode in args.modes.split(","):
        returned: list[int] = []

        def run(query: str, mode: str = mode, returned: list[int] = returned) -> list[str]:
            hits = app.search(args.dataset, SearchRequest(query=query, mode=mode, top_k=args.top_k)).hits
            returned.append(sum(app.tokenizer.count([hit.text])[0] for hit in hits))
            return [hit.source for hit in hits]

        scores.append(evaluate(run, queries, qrels, mode))
        tokens[mode] = sum(returned) / len(returned)
    settings = app.config.kb[0].search
    print(
        f"top_k {args.top_k}, title_weight {settings.title_weight:g}, max_per_document {settings.max_per_document}, "
        f"model {app.embedder.identity.name}"
    )
    print(scores_text(scores, 10))
    print("tokens/call " + "  ".join(f"{mode} {value:.0f}" for mode, value in tokens.items()))


if __name__ == "__main__":
    main()
