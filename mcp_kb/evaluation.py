"""Retrieval evaluation: recall@k, MRR@10, nDCG@10 and latency per mode, from BEIR-style files;
and a label-free hit rate, from queries made out of the KB's own chunks.

Hits are mapped to documents by source path: a file `<doc id>.<ext>` (anywhere in the KB)
counts as document `<doc id>`; the first hit of a document is its rank.

Self-check queries are asked the way a user would: a chunk's longest sentence among its first
three with at least five words, the chunk's heading words removed and cut to its first
SELF_QUERY_WORDS words; a chunk without such a sentence is asked for by its heading path. A query
is served when the chunk's document is among the top k results.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .errors import KBError
from .records import HealthCheck, recorded_now
from .requests import SearchRequest, parse_search
from .stopwatch import Stopwatch
from .text import sentences
from .vocabulary import HEADING_SEPARATOR

__all__ = [
    "ModeScores",
    "SelfCheck",
    "load_qrels",
    "load_queries",
    "load_reviewed_log",
]  # what the core's API (mcp_kb.api) offers from this module

SELF_QUERY_WORDS = 16


@dataclass(frozen=True)
class ModeScores:
    mode: str
    queries: int
    recall_at_k: float
    mrr_at_10: float
    ndcg_at_10: float
    p50_ms: float
    p95_ms: float


# A search request → the source paths of its hits, best first: an evaluation's searches, which a caller records
# nowhere (made-up or labelled queries are not what users asked).
Finder = Callable[[SearchRequest], list[str]]


def asking(find: Finder, settings: Mapping[str, object]) -> Callable[[str], list[str]]:
    """A query → its hits' source paths, searched with `settings` (mode, top_k, ...); bad settings (a k out of
    bounds) are worded at once, before any query."""
    request = parse_search(settings)
    return lambda text: find(request.model_copy(update={"query": text}))


def load_queries(path: Path) -> dict[str, str]:
    """`{"_id": ..., "text": ...}` per line (BEIR queries.jsonl)."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
        return {str(row["_id"]): row["text"] for row in rows}
    except (OSError, ValueError, KeyError) as exc:
        raise KBError(f"{path}: cannot read queries (one JSON object with _id and text per line): {exc}") from exc


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV: query-id, corpus-id, score; a header row is recognised (its score is not a number)."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            for number, row in enumerate(csv.reader(handle, delimiter="\t")):
                if number == 0 and len(row) >= 3 and not row[2].strip().lstrip("-").isdigit():
                    continue  # the header
                if len(row) >= 3 and int(row[2]) > 0:
                    qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    except (OSError, ValueError) as exc:
        raise KBError(f"{path}: cannot read qrels (TSV: query-id, corpus-id, score): {exc}") from exc
    return qrels


def load_reviewed_log(path: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries and judgements from a query log whose reviewer added `"relevant": ["file.md", ...]` to the
    entries they judged (the files that answer the query); entries without it are left out."""
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            entry = json.loads(line) if line.strip() else {}
            if entry.get("relevant"):
                queries[str(number)] = entry["query"]
                qrels[str(number)] = {doc_id_of(source): 1 for source in entry["relevant"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KBError(f"{path}: cannot read the query log (JSON lines, as mcp-kb writes them): {exc}") from exc
    if not qrels:
        raise KBError(
            f'{path}: no entry has a "relevant" list yet; add the files that answer each query you '
            f'reviewed, e.g. "relevant": ["leave.md"]'
        )
    return queries, qrels


def unmatched_documents(qrels: dict[str, dict[str, int]], paths: Iterable[str]) -> str:
    """A warning when judged documents are not among the KB's (its document `paths`, each counting as the document
    doc_id_of names: nothing can find the others); "" when all are.

    Raises when none is: every score would be 0, which says nothing about retrieval.
    """
    judged = {doc for relevant in qrels.values() for doc in relevant}
    documents = {doc_id_of(path) for path in paths}
    missing = sorted(judged - documents)
    if not missing:
        return ""
    hint = (
        f"a hit counts for document X when its file is named X.<ext> (e.g. {missing[0]!r} needs a file "
        f"{missing[0]}.md); ids that carry an extension or a folder never match"
    )
    if len(missing) == len(judged):
        raise KBError(f"none of the {len(judged)} judged documents is in the knowledge base; {hint}")
    return (
        f"{len(missing)} of {len(judged)} judged documents are not in the knowledge base (e.g. "
        f"{', '.join(map(repr, missing[:3]))}); their queries score lower than retrieval deserves. {hint}"
    )


def doc_id_of(source: str) -> str:
    return PurePosixPath(source).stem


def ranked_documents(sources: list[str]) -> list[str]:
    """Documents in the order of their first hit."""
    seen: dict[str, None] = {}
    for source in sources:
        seen.setdefault(doc_id_of(source), None)
    return list(seen)


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]))
    ideal = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def mrr_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    return next((1.0 / (rank + 1) for rank, doc in enumerate(ranked[:10]) if doc in relevant), 0.0)


def recall_at_k(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def evaluate(
    run_query: Callable[[str], list[str]],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    mode: str,
    k: int = 10,
) -> ModeScores:
    """Score one mode; `run_query` returns the source paths of the hits, best first."""
    judged = [qid for qid in queries if qid in qrels]
    if not judged:
        raise KBError("no query has relevance judgements: check that query ids match the qrels file")
    ndcg, mrr, recall, latencies = [], [], [], []
    _run_quietly(run_query, queries[judged[0]])  # warm up (caches, lazy imports): the first call is not timed
    for qid in judged:
        watch = Stopwatch()
        try:
            ranked = ranked_documents(run_query(queries[qid]))
        except KBError:  # e.g. an empty query in the set: it simply finds nothing
            ranked = []
        latencies.append(watch.milliseconds)
        ndcg.append(ndcg_at_10(ranked, qrels[qid]))
        mrr.append(mrr_at_10(ranked, qrels[qid]))
        recall.append(recall_at_k(ranked, qrels[qid], k))
    latencies.sort()
    return ModeScores(
        mode,
        len(judged),
        statistics.fmean(recall),
        statistics.fmean(mrr),
        statistics.fmean(ndcg),
        latencies[len(latencies) // 2],
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))],
    )


def _run_quietly(run_query: Callable[[str], list[str]], query: str) -> None:
    try:
        run_query(query)
    except KBError:
        pass


def evaluate_modes(
    find: Finder, queries: dict[str, str], judgements: dict[str, dict[str, int]], modes: list[str], k: int
) -> list[ModeScores]:
    """The labelled queries scored per mode (evaluate), each asking for the top max(k, 10) (MRR and nDCG are @10)."""
    top_k = max(k, 10)
    return [evaluate(asking(find, {"mode": mode, "top_k": top_k}), queries, judgements, mode, k) for mode in modes]


@dataclass(frozen=True)
class SelfCheck:
    mode: str
    queries: int
    k: int
    hit_rate: float
    least_served: list[tuple[str, int, int]]  # (document, queries served, queries asked), worst first


def self_query(heading: str, text: str) -> str:
    """What a user might type to find this chunk (see the module docstring); "" when nothing fits."""
    heading_words = {word.lower() for word in heading.replace(HEADING_SEPARATOR, " ").split()}
    candidates = []
    for sentence in sentences(text)[:3]:
        words = [w for w in sentence.split() if w.lower() not in heading_words and not w.startswith("#")]
        if len(words) >= 5 or (words and len("".join(words)) >= 12 and not sentence.isascii()):  # CJK: no spaces
            candidates.append(" ".join(words[:SELF_QUERY_WORDS]))
    if candidates:
        return max(candidates, key=len)
    return heading.replace(HEADING_SEPARATOR, " ")


def self_check(run_query: Callable[[str], list[str]], asked: list[tuple[str, str]], mode: str, k: int) -> SelfCheck:
    """How often the document each query was made from comes back in the top k; `asked` holds
    (query, source path) pairs and `run_query` returns the hits' source paths, best first."""
    if not asked:
        raise KBError("no chunk to make a query from: sync the knowledge base first")
    served: dict[str, int] = {}
    asked_of: dict[str, int] = {}
    for query, source in asked:
        asked_of[source] = asked_of.get(source, 0) + 1
        try:
            found = source in run_query(query)[:k]
        except KBError:
            found = False
        served[source] = served.get(source, 0) + found
    least = sorted(
        ((doc, served[doc], n) for doc, n in asked_of.items()), key=lambda item: (item[1] / item[2], item[0])
    )
    return SelfCheck(mode, len(asked), k, sum(served.values()) / len(asked), least)


def check_health(
    rows: list[dict[str, Any]],  # LanceDB's sampled rows
    find: Finder,
    modes: list[str],
    k: int,
) -> tuple[list[SelfCheck], HealthCheck]:
    """The label-free hit rate per mode of queries made from sampled chunk `rows` (one hit per document counts),
    and the health check a KB keeps of it."""
    asked = [(query, row["path"]) for row in rows if (query := self_query(row["heading"] or "", row["text"]))]
    checks = [
        self_check(asking(find, {"mode": mode, "top_k": k, "max_per_document": 1}), asked, mode, k) for mode in modes
    ]
    return checks, HealthCheck(
        recorded_now(), k, len(asked), {check.mode: round(check.hit_rate, 4) for check in checks}
    )
