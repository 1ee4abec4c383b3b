"""The workbench tools (read, browse, search across KBs), measured; run by hand, one subcommand at a time.

    nice -n 10 .venv/bin/python benchmarks/workbench.py evidence    # CMRC 2018 trial: search alone vs search then read
    nice -n 10 .venv/bin/python benchmarks/workbench.py right-kb    # four KBs in one storage: is the top hit's KB right?
    nice -n 10 .venv/bin/python benchmarks/workbench.py latency     # read and browse on 100,000 documents, folder and S3

evidence: the CMRC KB of `benchmarks/retrieval.py cmrc2018 trial` (under /tmp/mcp-kb-bench/cmrc2018; a full sync
adds its reading table when it has none). For each trial question and token budget B, whether the answer string is
in what the model receives: (a) the search tool's text with max_tokens=B; (b) a search with B/2, then a read of the
top hit's section (by chunk when it has no heading) with what is left of B. Tokens are the app's tokenizer's, of
the whole text received: citation lines, the read's location line and its cursor line count too.

right-kb: scifact, fastapi (English docs), cmrc2018 and pdfs in one storage (/tmp/mcp-kb-bench/workbench/index; a
second run syncs incrementally). Queries: SciFact's train and CMRC's trial questions (300 each, sampled), made-up
queries from random chunks of fastapi and pdfs (200 each, as `mcp-kb self-check` makes them). Prints the share whose
top search_across hit is from their own KB, the share a model choosing by tool description alone would send to the
right KB (cosine of the query to each description: the per-KB tool's, and the one-line description), and latency of
search_across vs a single-KB search.

latency: a KB of 100,000 documents written straight into the store (reading rows, manifest, a few chunks: nothing is
embedded), in a folder and on a local S3-compatible server (moto, in its own process); p50/p95 of 200 warm calls of
read by section (each document read for the first time, then again), browse by prefix, by glob, by last change, and
a browse's second page; on S3 also how many requests reach the store per call. Moto answers a ranged GET in time
that grows with the object's size (about 60 ms for a 4 KB range of a 128 MB object, 3 ms of a 1 MB one), so a read
that misses the read cache costs more there than on a real store: count the requests too.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, kb_config, progress, use_offline_model, write_corpus
from mcp_kb.api import (
    READ_TOKENS_MAX,
    BrowseRequest,
    KBError,
    ReadRequest,
    SearchRequest,
    SyncRequest,
    load_qrels,
    load_queries,
)
from mcp_kb.present import cited_text, read_text

WORK = Path("/tmp/mcp-kb-bench")
BENCH = WORK / "workbench"
TESTS = Path(__file__).resolve().parents[1] / "tests"
FASTAPI = EVAL / "fastapi-docs" / "docs" / "en"
DESCRIPTIONS = {
    "scifact": "Scientific claims and abstracts (biomedical research)",
    "fastapi": "FastAPI web framework documentation",
    "cmrc2018": "Chinese Wikipedia passages (CMRC 2018 reading comprehension)",
    "pdfs": "Sample PDF files: manuals, papers and test documents",
}


# ---- shared --------------------------------------------------------------------------------


def percentiles(times_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(times_ms)
    return statistics.median(ordered), ordered[min(int(len(ordered) * 0.95), len(ordered) - 1)]


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def synced(app) -> None:
    """An incremental sync of every KB, with progress and what it did."""
    started = time.perf_counter()
    for report in app.sync(progress=progress):
        print(f"\n{report.summary()}", file=sys.stderr)
    print(f"sync {time.perf_counter() - started:.1f}s", file=sys.stderr)


def readable(app, kb: str) -> None:
    """A KB indexed before reading tables gets one from a full sync (vectors reused: it only parses again)."""
    if app.store.reading_listing(kb, app.store.active_generation(kb)) is None:
        print(f"{kb}: no reading table, full sync", file=sys.stderr)
        started = time.perf_counter()
        app.sync(SyncRequest(kb=kb, full=True), progress=progress)
        print(f"\nfull sync {time.perf_counter() - started:.1f}s", file=sys.stderr)


def dev_questions(dataset: str, split: str) -> dict[str, str]:
    """The split's queries, by id."""
    queries = load_queries(EVAL / dataset / "queries.jsonl")
    return {qid: queries[qid] for qid in load_qrels(EVAL / dataset / "qrels" / f"{split}.tsv") if qid in queries}


# ---- evidence: search alone vs search then read -----------------------------------------------


def trial_questions() -> list[tuple[str, list[str], str]]:
    """CMRC's trial questions: (question, answers, the labelled passage's file)."""
    qrels = load_qrels(EVAL / "cmrc2018" / "qrels" / "trial.tsv")
    asked = []
    with (EVAL / "cmrc2018" / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            answers = [answer.strip() for answer in row["metadata"]["answers"] if answer.strip()]
            if row["_id"] in qrels and answers and row["text"].strip():  # two trial questions are empty
                asked.append((row["text"], answers, f"{next(iter(qrels[row['_id']]))}.md"))
    return asked


def top_is(app, kb: str, question: str, doc: str) -> bool:
    hits = app.search(kb, SearchRequest(query=question), record=False).hits
    return bool(hits) and hits[0].source == doc


def search_alone(app, kb: str, question: str, budget: int) -> str:
    return cited_text(app.search(kb, SearchRequest(query=question, max_tokens=budget), record=False))


def search_then_read(app, kb: str, question: str, budget: int) -> tuple[str, str]:
    """What the model receives from a search with half the budget then a read of the top hit's section with the
    rest; and the read's error ("" when it answered)."""
    result = app.search(kb, SearchRequest(query=question, max_tokens=max(budget // 2, 100)), record=False)
    found = cited_text(result)
    left = budget - app.tokenizer.count([found])[0]
    if not result.hits or left < 100:  # ReadRequest's smallest budget
        return found, ""
    top = result.hits[0]
    request = ReadRequest(
        kb=kb,
        path=top.source,
        section=top.heading or None,
        chunk=None if top.heading else top.chunk_index,
        max_tokens=min(left, READ_TOKENS_MAX),
    )
    try:
        return f"{found}\n\n{read_text(app.read(kb, request))}", ""
    except KBError as exc:
        return found, str(exc)


def evidence(args: argparse.Namespace) -> None:
    from mcp_kb.app import App

    folder = WORK / "cmrc2018"
    write_corpus("cmrc2018", folder / "docs")
    app = App(kb_config(folder / "docs", folder / "index", "cmrc2018"))
    synced(app)
    readable(app, "cmrc2018")
    asked = trial_questions()[: args.limit]
    app.embedder.embed_query("warm up")
    top_right = sum(top_is(app, "cmrc2018", question, doc) for question, _, doc in asked)
    print(f"{len(asked)} trial questions; top hit is the labelled passage for {top_right / len(asked):.3f}")
    print(
        f"{'budget':>6} {'alone: answer in':>17} {'tokens':>7} {'>budget':>8}   {'search+read':>11} {'tokens':>7} "
        f"{'>budget':>8} {'read errors':>11}"
    )
    for budget in args.budgets:
        alone, both, errors = [], [], Counter()
        for question, _, _ in asked:
            alone.append(search_alone(app, "cmrc2018", question, budget))
            text, error = search_then_read(app, "cmrc2018", question, budget)
            both.append(text)
            errors.update([error[:80]] if error else [])
        print(
            f"{budget:6d} {_row(app, alone, asked, budget)}   {_row(app, both, asked, budget)} "
            f"{sum(errors.values()):11d}"
        )
        for error, count in errors.most_common(5):
            print(f"       read error x{count}: {error}")


def _row(app, received: list[str], asked: list[tuple[str, list[str], str]], budget: int) -> str:
    """Share with the answer in, mean tokens received, share over the budget."""
    tokens = app.tokenizer.count(received)
    hits = sum(any(answer in text for answer in answers) for text, (_, answers, _) in zip(received, asked))
    over = sum(count > budget for count in tokens)
    return f"{hits / len(asked):17.3f} {statistics.mean(tokens):7.0f} {over / len(asked):8.3f}"


# ---- right-kb: four KBs, does the top hit come from the right one? -----------------------------


def workbench_app():
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    write_corpus("scifact", BENCH / "scifact")
    write_corpus("cmrc2018", BENCH / "cmrc2018")
    paths = {"scifact": BENCH / "scifact", "fastapi": FASTAPI, "cmrc2018": BENCH / "cmrc2018", "pdfs": EVAL / "pdfs"}
    raw = {
        "storage": str(BENCH / "index"),
        "embedding": {"quantize": "int8"},
        "kb": [{"name": name, "description": DESCRIPTIONS[name], "paths": [str(paths[name])]} for name in paths],
    }
    return App(build_config(raw, base_dir=BENCH, source=None))


def self_queries(app, kb: str, n: int, seed: int) -> list[str]:
    """Queries made from random chunks of the KB as `mcp-kb self-check` makes them: up to `n`, no repeats."""
    from mcp_kb.evaluation import self_query

    view = app.store.view(kb, app.store.active_generation(kb))
    made = [self_query(row["heading"] or "", row["text"]) for row in view.sample(n * 2, seed)]
    return list(dict.fromkeys(query for query in made if query))[:n]


def sampled(queries: dict[str, str], n: int, seed: int) -> list[str]:
    """Up to `n` of the queries at random (none empty)."""
    ids = sorted(qid for qid, text in queries.items() if text.strip())
    return [queries[qid] for qid in random.Random(seed).sample(ids, min(n, len(ids)))]


def query_sets(app, seed: int) -> dict[str, list[str]]:
    return {
        "scifact": sampled(dev_questions("scifact", "train"), 300, seed),
        "fastapi": self_queries(app, "fastapi", 200, seed),
        "cmrc2018": sampled(dev_questions("cmrc2018", "trial"), 300, seed),
        "pdfs": self_queries(app, "pdfs", 200, seed),
    }


def description_vectors(app, texts: list[str]) -> np.ndarray:
    vectors = np.asarray(app.embedder.embed_batch(texts), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def right_kb(args: argparse.Namespace) -> None:
    from mcp_kb.mcp.descriptions import tool_description

    app = workbench_app()
    synced(app)
    names = list(DESCRIPTIONS)
    tools = [tool_description(app, app.config.get_kb(name)) for name in names]
    for name, text in zip(names, tools):
        print(f"{name} tool: {text}")
    by_description = {
        "tool": description_vectors(app, tools),
        "line": description_vectors(app, [DESCRIPTIONS[name] for name in names]),
    }
    sets = query_sets(app, args.seed)
    for query in ("warm up one", "warm up two", "warm up three"):  # the model, and every KB's tables opened
        app.search_across(names, SearchRequest(query=query))
        for name in names:
            app.search(name, SearchRequest(query=query), record=False)
    print(
        f"\n{'set':9} {'queries':>7} {'across: own KB':>14} {'tool desc':>9} {'one line':>8}   wrong KB of the top hit"
    )
    totals: Counter[str] = Counter()
    latencies: dict[str, tuple[list[float], list[float]]] = {}
    for own, queries in sets.items():
        counts, wrong, latencies[own] = picks(app, names, own, queries, by_description)
        totals.update(counts + Counter(queries=len(queries)))
        n = max(len(queries), 1)
        print(
            f"{own:9} {len(queries):7d} {counts['across'] / n:14.3f} {counts['tool'] / n:9.3f} "
            f"{counts['line'] / n:8.3f}   {dict(wrong.most_common())}"
        )
    n = totals["queries"]
    print(f"{'overall':9} {n:7d} {totals['across'] / n:14.3f} {totals['tool'] / n:9.3f} {totals['line'] / n:8.3f}")
    print(f"\n{'latency ms':9} {'across p50':>10} {'p95':>6}   {'one KB p50':>10} {'p95':>6}")
    latencies["all"] = (
        [ms for pair in latencies.values() for ms in pair[0]],
        [ms for pair in latencies.values() for ms in pair[1]],
    )
    for own, (across_ms, single_ms) in latencies.items():
        (across_p50, across_p95), (single_p50, single_p95) = percentiles(across_ms), percentiles(single_ms)
        print(f"{own:9} {across_p50:10.1f} {across_p95:6.1f}   {single_p50:10.1f} {single_p95:6.1f}")


def picks(
    app, names: list[str], own: str, queries: list[str], by_description: dict[str, np.ndarray]
) -> tuple[Counter[str], Counter[str], tuple[list[float], list[float]]]:
    """For one set: how often the search across KBs, and each description, picks its own KB; the KBs the search
    picked instead; the latency of the search across and of a search of the own KB alone."""
    counts: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    across_ms, single_ms = [], []
    for query in queries:
        started = time.perf_counter()
        hits = app.search_across(names, SearchRequest(query=query)).hits
        across_ms.append((time.perf_counter() - started) * 1000)
        single_ms.append(timed(lambda query=query: app.search(own, SearchRequest(query=query), record=False)))
        top = hits[0].kb if hits else "(none)"
        counts["across"] += top == own
        wrong.update([top] if top != own else [])
        vector = app.embedder.embed_query(query)
        vector = vector / np.linalg.norm(vector)
        for label, vectors in by_description.items():
            counts[label] += names[int(np.argmax(vectors @ vector))] == own
    return counts, wrong, (across_ms, single_ms)


# ---- latency: read and browse on 100,000 documents -------------------------------------------

_WORDS = (
    "index search token budget cursor section outline document reader storage bucket folder query vector "
    "keyword chunk passage citation heading page line model embedding generation manifest table commit "
    "version cache listing prefix glob order change team department policy release deploy service client "
    "server request answer report figure measure latency shared object write read browse sync"
).split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(8, 20))
    return " ".join(words).capitalize() + "."


def synthetic_document(i: int):
    """Document i: a title, then 5 to 20 headings (some nested) of a few paragraphs each, about 3 KB in all."""
    from mcp_kb.ingest.document import Block, Document

    rng = random.Random(i)
    blocks, top = [], ""
    for number in range(rng.randint(5, 20)):
        if number == 0 or rng.random() < 0.6:
            top = f"Part {number + 1}: {rng.choice(_WORDS)} {rng.choice(_WORDS)}"
            path: tuple[str, ...] = (top,)
        else:
            path = (top, f"{rng.choice(_WORDS).capitalize()} {number + 1}")
        for _ in range(rng.randint(1, 2)):
            blocks.append(Block(" ".join(_sentence(rng) for _ in range(rng.randint(1, 3))), heading_path=path))
    return Document(doc_id=synthetic_path(i), kind="markdown", title=f"Document {i}", blocks=tuple(blocks))


def synthetic_path(i: int) -> str:
    return f"dept-{i % 50}/team-{i % 997}/doc-{i}.md"


def reading_row(i: int, synced_at: str) -> dict[str, Any]:
    from mcp_kb.ingest.reading import outline_json, render
    from mcp_kb.schema import ReadingRow

    rendered = render(synthetic_document(i))
    chunk_starts = list(rendered.block_starts[::2])  # a chunk per two blocks
    return ReadingRow(
        path=synthetic_path(i),
        title=f"Document {i}",
        kind="markdown",
        size=len(rendered.text.encode()),
        mtime_ns=1_700_000_000_000_000_000 + i * 1_000_000_007 % 10**15,
        file_hash=f"h{i}",
        synced_at=synced_at,
        pages=None,
        lines=rendered.text.count("\n") + 1,
        tokens=len(rendered.text) // 5,
        chunks=len(chunk_starts),
        text=rendered.text,
        outline=outline_json(rendered.sections),
        page_numbers=[],
        page_starts=[],
        chunk_starts=chunk_starts,
    ).as_dict()


def chunk_rows(rows: list[dict[str, Any]], dimension: int) -> dict[str, list[dict[str, Any]]]:
    """The first chunk of a few documents (a generation with no chunk at all gets no indexes)."""
    from mcp_kb.schema import ChunkRow

    rng = np.random.default_rng(0)
    chunks = {}
    for row in rows:
        vector = rng.normal(size=dimension).astype(np.float32)
        text = row["text"][:600]
        chunks[row["path"]] = [
            ChunkRow(
                id=f"{row['path']}#0",
                path=row["path"],
                chunk_index=0,
                heading="",
                title=row["title"],
                page=None,
                line_start=1,
                line_end=5,
                text=text,
                search_text=text.lower(),
                field_text=row["title"].lower(),
                content_hash=f"c{row['file_hash']}",
                file_hash=row["file_hash"],
                n_tokens=120,
                vector=(vector / np.linalg.norm(vector)).tolist(),
            ).as_dict()
        ]
    return chunks


def build_big(app, kb: str, count: int, batch: int = 5_000) -> None:
    """A generation of `count` documents written straight into the store and made the active one, as a sync ends."""
    from mcp_kb.index.contract import FileRecord, new_generation
    from mcp_kb.records import KBState, SyncReport, recorded_now
    from mcp_kb.schema import chunk_schema
    from mcp_kb.sync import _fingerprints  # what a sync records: a later sync of this KB would not rebuild

    store, kb_config = app.store, app.config.get_kb(kb)
    started, clock = recorded_now(), time.perf_counter()
    dimension = app.embedder.identity.dimension
    generation = new_generation()
    store.drop_generations(kb, keep=set())
    store.create_generation(kb, generation, chunk_schema(dimension, {}))
    for first in range(0, count, batch):
        rows = [reading_row(i, started) for i in range(first, min(first + batch, count))]
        store.write_readings(kb, generation, [row["path"] for row in rows], rows)
        store.write_files(
            kb,
            generation,
            [
                FileRecord(row["path"], row["file_hash"], row["size"], row["mtime_ns"], row["chunks"], "indexed")
                for row in rows
            ],
        )
        if first == 0:
            store.write_chunks(kb, generation, chunk_rows(rows[:20], dimension))
        progress(
            first + len(rows),
            count,
            f"{kb}: {first + len(rows)}/{count} documents written ({time.perf_counter() - clock:.0f}s)",
        )
    index_state = store.refresh_indexes(kb, generation, True)
    fingerprints = _fingerprints(kb_config, app.embedder, app.tokenizer, store.layout)
    store.write_state(kb, KBState.active(fingerprints, generation, complete=True).ended(started, "ok", SyncReport(kb)))
    print(f"\n{kb}: {count} documents built in {time.perf_counter() - clock:.0f}s ({index_state})", file=sys.stderr)


def big_app(storage: dict[str, Any] | str, read_cache: Path | None = None):
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    if read_cache is not None:
        storage = {**storage, "read_cache_dir": str(read_cache)}  # type: ignore[dict-item]
    docs = BENCH / "big-docs"  # never synced: the documents exist only in the index
    docs.mkdir(parents=True, exist_ok=True)
    raw = {"storage": storage, "kb": [{"name": "big", "description": "Synthetic team documents", "paths": [str(docs)]}]}
    return App(build_config(raw, base_dir=BENCH, source=None))


def document_count(app, kb: str) -> int:
    generation = app.store.active_generation(kb)
    listing = app.store.reading_listing(kb, generation) if generation else None
    return 0 if listing is None else listing.num_rows


def read_requests(kb: str, count: int, n: int, rng: random.Random) -> list[ReadRequest]:
    """Reads of one section of `n` documents drawn at random."""
    from mcp_kb.ingest.reading import render
    from mcp_kb.vocabulary import HEADING_SEPARATOR

    reads = []
    for i in rng.sample(range(count), n):
        sections = render(synthetic_document(i)).sections
        reads.append(
            ReadRequest(kb=kb, path=synthetic_path(i), section=HEADING_SEPARATOR.join(rng.choice(sections).path))
        )
    return reads


def operations(app, kb: str, reads: list[ReadRequest]) -> dict[str, Callable[[int], Any]]:
    """Each measured call, given the call's number (a read takes its document and section by it: "read section"
    reads each document for the first time, "read again" the same ones a second time)."""
    second_page = app.browse(kb, BrowseRequest(kb=kb, path="dept-7/")).cursor
    return {
        "read section": lambda n: app.read(kb, reads[n]),
        "read again": lambda n: app.read(kb, reads[n]),
        "browse prefix": lambda n: app.browse(kb, BrowseRequest(kb=kb, path="dept-7/")),
        "browse glob": lambda n: app.browse(kb, BrowseRequest(kb=kb, path="dept-*/team-12/*")),
        "browse changed": lambda n: app.browse(kb, BrowseRequest(kb=kb, sort="changed")),
        "browse page 2": lambda n: app.browse(kb, BrowseRequest(kb=kb, cursor=second_page)),
    }


def measure(app, label: str, count: int, calls: int, seed: int) -> None:
    """p50/p95 of `calls` warm calls of each operation (after 5 others: the model, tables and listing loaded)."""
    reads = read_requests("big", count, calls + 5, random.Random(seed))
    for name, call in operations(app, "big", reads).items():
        answers = [call(calls + n) for n in range(5)]  # warm up
        p50, p95 = percentiles([timed(lambda n=n: call(n)) for n in range(calls)])
        print(
            f"{label:6} {count:8d} {name:15} {p50:7.1f} {p95:7.1f}  {_gist(answers[-1])}"
            f"{'' if p95 <= 50 else '  p95 > 50 ms'}",
            flush=True,
        )


def store_requests(app, storage: dict[str, Any], count: int, seed: int) -> None:
    """How many requests reach the store (moto's recorder counts them) when documents are read for the first
    time, and when they are browsed: on a real store each is a round trip."""
    sys.path.insert(0, str(TESTS))
    from s3_server import S3Server

    server = S3Server(storage["options"]["aws_endpoint"])
    reads = read_requests("big", count, 10, random.Random(seed + 1))
    for label, calls in (
        ("read section (new documents)", [lambda r=r: app.read("big", r) for r in reads]),
        ("browse prefix", [lambda: app.browse("big", BrowseRequest(kb="big", path="dept-9/"))] * 10),
    ):
        server.start_recording()
        for call in calls:
            call()
        print(f"s3 requests per {label}: {len(server.recorded()) / len(calls):.1f}")


def _gist(answer: Any) -> str:
    """What a call answered, in brief (a read's text, a listing's size)."""
    if hasattr(answer, "documents"):
        return f"{len(answer.documents)} of {answer.total} documents"
    return f"{len(answer.text)} characters of {answer.section!r}"


def _serve_s3(queue: Any, stop: Any) -> None:
    """tests/s3_server.py's moto server with a fresh bucket, in a process of its own (its Python does not share
    the measured process's interpreter lock, as a real store would not)."""
    sys.path.insert(0, str(TESTS))
    from s3_server import serve_s3

    with serve_s3() as s3:
        queue.put(s3.storage(s3.new_bucket()))
        stop.wait()


@contextmanager
def s3_storage() -> Iterator[dict[str, Any]]:
    """`[storage]` on a local S3-compatible server, for as long as the context lasts."""
    context = multiprocessing.get_context("spawn")
    queue, stop = context.Queue(), context.Event()
    server = context.Process(target=_serve_s3, args=(queue, stop), daemon=True)
    server.start()
    try:
        yield queue.get(timeout=120)
    finally:
        stop.set()
        server.join(30)


def latency(args: argparse.Namespace) -> None:
    print(f"{'store':6} {'docs':>8} {'operation':15} {'p50 ms':>7} {'p95 ms':>7}  answer")
    if "folder" in args.storages:
        app = big_app(str(BENCH / "big-index"))
        if document_count(app, "big") != args.docs:
            build_big(app, "big", args.docs)
        measure(app, "folder", args.docs, args.calls, args.seed)
    if "s3" in args.storages:
        with s3_storage() as storage, tempfile.TemporaryDirectory(prefix="mcp-kb-read-cache-") as cache:
            app = big_app(storage, Path(cache))
            build_big(app, "big", args.s3_docs)
            measure(app, "s3", args.s3_docs, args.calls, args.seed)
            store_requests(app, storage, args.s3_docs, args.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ask = commands.add_parser("evidence", help="CMRC 2018 trial: is the answer in what the model receives?")
    ask.add_argument("--budgets", type=lambda text: [int(b) for b in text.split(",")], default=[1000, 2000])
    ask.add_argument("--limit", type=int, default=None, help="only the first N questions")
    pick = commands.add_parser(
        "right-kb", help="four KBs: does the top hit of a search across them come from the right one?"
    )
    pick.add_argument("--seed", type=int, default=0)
    speed = commands.add_parser("latency", help="read and browse a 100,000-document KB, folder and S3")
    speed.add_argument("--docs", type=int, default=100_000)
    speed.add_argument("--s3-docs", type=int, default=100_000)
    speed.add_argument("--calls", type=int, default=200)
    speed.add_argument("--seed", type=int, default=0)
    speed.add_argument("--storages", default="folder,s3")
    args = parser.parse_args()
    use_offline_model()
    {"evidence": evidence, "right-kb": right_kb, "latency": latency}[args.command](args)


if __name__ == "__main__":
    main()
