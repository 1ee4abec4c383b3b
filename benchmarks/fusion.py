"""Compare fusion rules for hybrid search on cached candidate lists (dev splits only).

    python benchmarks/fusion.py scifact train
    python benchmarks/fusion.py cmrc2018 trial

Needs the KB built by benchmarks/retrieval.py (`--work` as given there). Fetches each query's
vector and keyword candidates once, then scores every fusion rule offline: this is how the shipped
rule was chosen. Document-level evidence (a document's next-best chunks added to its best) was
tried and dropped: SciFact train 0.736 -> 0.734 (beta 0.1) .. 0.712 (0.5), CMRC trial equal or lower.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, use_offline_model


def rrf(vector, keyword, wv=1.0, wk=1.0, k=60):
    scores = {}
    for weight, rows in ((wv, vector), (wk, keyword)):
        for rank, (doc, _) in enumerate(rows, start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (k + rank)
    return sorted(scores, key=scores.get, reverse=True)


def minmax(vector, keyword, alpha=0.5, floor=True):
    """floor=True: (s - min) / (max - min), the worst candidate scores 0; False: s / max."""

    def norm(rows):
        if not rows:
            return {}
        values = [s for _, s in rows]
        low, high = (min(values) if floor else 0.0), max(values)
        return {doc: (s - low) / (high - low) if high > low else 1.0 for doc, s in rows}

    v, kw = norm(vector), norm(keyword)
    scores = {doc: alpha * v.get(doc, 0.0) + (1 - alpha) * kw.get(doc, 0.0) for doc in set(v) | set(kw)}
    return sorted(scores, key=scores.get, reverse=True)


def mixed(vector, keyword, alpha, vector_floor, keyword_floor):
    scores = mixed_scores(vector, keyword, alpha, vector_floor, keyword_floor)
    return sorted(scores, key=scores.get, reverse=True)


def with_document_evidence(scores, path_by_id, beta, others=2):
    """Chunks ranked by their document's score: its best chunk plus beta times its next `others`."""
    by_document = {}
    for chunk, score in scores.items():
        by_document.setdefault(path_by_id[chunk], []).append(score)
    document_score = {
        doc: values[0] + beta * sum(values[1 : 1 + others])
        for doc, values in ((d, sorted(v, reverse=True)) for d, v in by_document.items())
    }
    return sorted(scores, key=lambda c: (document_score[path_by_id[c]], scores[c]), reverse=True)


def mixed_scores(vector, keyword, alpha, vector_floor, keyword_floor):
    """Per side: floor "min" (min-max), "zero" (s / max) or a number m (min-max with the floor m
    ranges below the minimum, so the last candidate keeps m / (1 + m))."""

    def norm(rows, floor):
        if not rows:
            return {}
        values = [s for _, s in rows]
        high, low = max(values), min(values)
        if floor == "zero":
            low = 0.0
        elif floor != "min":
            low -= floor * (high - low)
        return {doc: (s - low) / (high - low) if high > low else 1.0 for doc, s in rows}

    v, kw = norm(vector, vector_floor), norm(keyword, keyword_floor)
    return {doc: alpha * v.get(doc, 0.0) + (1 - alpha) * kw.get(doc, 0.0) for doc in set(v) | set(kw)}


def dbsf(vector, keyword, alpha=0.5, spread=3.0):
    """Distribution-based: (s - (mean - spread*sd)) / (2*spread*sd), clipped to 0..1 per side, so the
    worst candidate keeps a score that says how far it is from the crowd, not 0."""

    def norm(rows):
        if not rows:
            return {}
        values = [s for _, s in rows]
        mean, sd = statistics.fmean(values), statistics.pstdev(values)
        if sd == 0:
            return {doc: 1.0 for doc, _ in rows}
        low = mean - spread * sd
        return {doc: min(1.0, max(0.0, (s - low) / (2 * spread * sd))) for doc, s in rows}

    v, kw = norm(vector), norm(keyword)
    scores = {doc: alpha * v.get(doc, 0.0) + (1 - alpha) * kw.get(doc, 0.0) for doc in set(v) | set(kw)}
    return sorted(scores, key=scores.get, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("split")
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--work", default="/tmp/mcp-kb-bench")
    args = parser.parse_args()
    use_offline_model()
    from mcp_kb.app import App
    from mcp_kb.evaluation import load_qrels, load_queries, ndcg_at_10, ranked_documents

    work = Path(args.work) / args.dataset
    app = App(kb_config(work / "docs", work / "index", args.dataset))
    table = app.store.chunk_table(args.dataset)
    view = app.store.view(args.dataset, app.store.active_generation(args.dataset))
    searcher = app.searcher
    queries = load_queries(EVAL / args.dataset / "queries.jsonl")
    qrels = load_qrels(EVAL / args.dataset / "qrels" / f"{args.split}.tsv")
    ids = table.to_arrow().select(["id", "path"])
    path_by_id = dict(zip(ids["id"].to_pylist(), ids["path"].to_pylist()))
    cached = []
    for qid, text in queries.items():
        if qid not in qrels or not text.strip():
            continue
        # Candidates are chunks: fusion works on chunks, evaluation maps them to documents.
        vector = [(c.id, c.score) for c in view.nearest(searcher.embedder.embed_query(text), None, args.depth)]
        keyword = [(c.id, c.score) for c in searcher._keyword(view, text, None, args.depth, [])]
        cached.append((qrels[qid], vector, keyword, searcher.vector_weight(text)))
    rules = {
        "keyword": lambda v, k, w: [d for d, _ in k],
        "vector": lambda v, k, w: [d for d, _ in v],
        "rrf k=60": lambda v, k, w: rrf(v, k),
        "rrf k=60 weighted by readability": lambda v, k, w: rrf(v, k, wv=w),
    }
    for alpha in (0.3, 0.4, 0.5, 0.6):
        rules[f"minmax alpha={alpha}"] = lambda v, k, w, a=alpha: minmax(v, k, a)
        rules[f"minmax alpha={alpha} x readability"] = lambda v, k, w, a=alpha: minmax(v, k, a * w)
    for alpha in (0.3, 0.4, 0.5):
        rules[f"max-scaled alpha={alpha} x readability"] = lambda v, k, w, a=alpha: minmax(v, k, a * w, floor=False)
    for alpha in (0.3, 0.4, 0.5):
        for spread in (2.0, 3.0):
            rules[f"dbsf {spread:g}sd alpha={alpha} x readability"] = lambda v, k, w, a=alpha, sp=spread: dbsf(
                v, k, a * w, sp
            )
    for alpha in (0.4, 0.5):
        for floors in (("min", "zero"), (0.1, 0.1), (0.25, 0.25), (0.1, "zero"), (0.25, "zero")):
            shipped = " (shipped)" if (alpha, floors) == (0.4, (0.1, "zero")) else ""
            rules[f"mixed {floors} alpha={alpha} x readability{shipped}"] = lambda v, k, w, a=alpha, f=floors: mixed(
                v, k, a * w, *f
            )
    for beta in (0.1, 0.2, 0.3, 0.5):
        rules[f"shipped + document evidence beta={beta}"] = lambda v, k, w, b=beta: with_document_evidence(
            mixed_scores(v, k, 0.4 * w, 0.1, "zero"), path_by_id, b
        )
    for k_value in (10, 20, 40):
        rules[f"rrf k={k_value} weighted"] = lambda v, k, w, kv=k_value: rrf(v, k, wv=w, k=kv)
    for name, rule in rules.items():
        score = statistics.fmean(
            ndcg_at_10(ranked_documents([path_by_id[c] for c in rule(v, k, w)]), rel) for rel, v, k, w in cached
        )
        print(f"{name:45} nDCG@10 {score:.3f}")


if __name__ == "__main__":
    main()
