"""A KB's versions (mcp_kb/history.py, mcp_kb/index/versions.py) and library versions ([[kb.versions]]), measured;
run by hand, one subcommand at a time.

    nice -n 10 .venv/bin/python benchmarks/versions.py history               # SciFact, 20 syncs of 1 % each
    nice -n 10 .venv/bin/python benchmarks/versions.py history --docs 300    # a quick check on 300 documents
    nice -n 10 .venv/bin/python benchmarks/versions.py as-of --also 16       # as_of search on history's index
    nice -n 10 .venv/bin/python benchmarks/versions.py library               # FastAPI docs A, then A and B

history: the SciFact corpus as one Markdown file per document (/tmp/mcp-kb-bench/versions/history-*/docs, the
index beside it, both made anew each run; [kb.history] keep = 200 so that nothing is pruned), a first sync (version
1), then 20 syncs each rewriting 1 % of the documents (their sentences shuffled, or a sentence appended to a
one-sentence text; seeded). After each sync: the index folder's size (bytes of every file under it), its growth
as a share of the size after the first sync beside the changed documents' share (target: growth per version
<= 1.2x the changed share), the sync's seconds, and whether it compacted a table (a Rewrite transaction among
the table versions it wrote; LanceDB compacts from 17 small fragments or 2,000 rows the full-text index lacks).
Syncs that compacted are reported apart (the compaction's cost: the bytes such a sync added), with where the
growth of the others went (table, and data / manifests / deletions / indexes / transactions). Then 200 SciFact
queries (hybrid, the default) searched now, `as_of` version 1 and `as_of` the current version (the same tables as
now: what as_of itself costs), in rotating order after a warm-up: p50/p95 of each (target: as_of p95 within 1.2x).
Then syncs of one changed document each until the KB has 100 versions, the size then (and how much of it only
table versions no KB version pins hold), `App.versions(kb)` timed from a fresh App over the same storage (cold:
the store opened by the call) and on a warm one (target <= 100 ms), and as_of search again at 100 versions.

as-of: the search comparison alone, on the index `history` left (no sync); --also adds versions to search as of
(a version that was current with many rows the full-text index lacked is as slow as it was then).

library: FastAPI's English docs (../shared/eval/fastapi-docs/docs/en) copied as version A, and again as version
B with 5 % of its files edited (a sentence appended to one prose line each), 2 files added and 2 removed (seeded),
under /tmp/mcp-kb-bench/versions/library. One KB syncs [[kb.versions]] A alone, then A and B: the second sync's
files added, chunks embedded vs reused (the reuse share), seconds and index growth, beside the fewest chunks B
could need embedded (its distinct content hashes A lacks) and a separate KB of B alone synced from scratch. A
sanity check: a version-B search for an edited sentence answers from B/, a version-A one does not. Then (unless
--no-zh) the English and the Chinese trees as two versions of one KB: the Chinese sync should reuse ~nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, progress, use_offline_model, write_corpus
from mcp_kb.api import SearchRequest, SyncRequest, load_queries

WORK = Path("/tmp/mcp-kb-bench/versions")
FASTAPI = EVAL / "fastapi-docs" / "docs"
KB = "scifact"


# ---- shared --------------------------------------------------------------------------------


def config_of(storage: Path, kb: dict[str, Any], base: Path):
    """A config of one KB (`kb`: its kb.toml table; description: its name unless given) stored in `storage`."""
    from mcp_kb.settings import build_config

    raw = {
        "storage": str(storage),
        "kb": [{"description": kb["name"], **kb}],
        "embedding": {"quantize": "int8"},
        "sync": {"workers": 0},
    }
    return build_config(raw, base_dir=base, source=None)


def percentiles(times_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(times_ms)
    return statistics.median(ordered), ordered[min(int(len(ordered) * 0.95), len(ordered) - 1)]


def sized(root: Path) -> tuple[int, Counter[str]]:
    """Bytes of every file under `root`, and by part: `table/subfolder` (chunks/data, files/_versions, ...)."""
    total, parts = 0, Counter[str]()
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # a cleanup between the listing and the stat
                continue
            total += size
            parts[_part_of(path.relative_to(root))] += size
    return total, parts


def _part_of(relative: Path) -> str:
    top = relative.parts[0]
    if not top.endswith(".lance"):
        return "other files"
    name = top.removesuffix(".lance")
    table = next((kind for kind in ("chunks", "files", "reading") if f"__{kind}__" in name), name)
    sub = relative.parts[1] if len(relative.parts) > 2 else "(top)"
    return f"{table}/{sub}"


def mb(size: float) -> str:
    return f"{size / 1e6:.2f} MB"


def kb_tables(app, kb: str) -> dict[str, Path]:
    """The active generation's tables of the KB: kind -> folder."""
    from mcp_kb.index.generations import chunk_table_name, file_table_name
    from mcp_kb.index.readings import reading_table_name

    generation = app.store.active_generation(kb)
    root = Path(app.config.storage.uri)
    return {
        "chunks": root / f"{chunk_table_name(kb, generation)}.lance",
        "files": root / f"{file_table_name(kb, generation)}.lance",
        "reading": root / f"{reading_table_name(kb, generation)}.lance",
    }


def table_versions(tables: dict[str, Path]) -> dict[str, tuple[int, int, int]]:
    """Per table: (latest version, fragments, small fragments as LanceDB counts them)."""
    import lancedb

    found = {}
    for kind, path in tables.items():
        if path.exists():
            table = lancedb.connect(str(path.parent)).open_table(path.name.removesuffix(".lance"))
            stats = table.stats()["fragment_stats"]  # a dict in lancedb 0.40 (as upkeep.py reads it)
            found[kind] = (table.version, stats["num_fragments"], stats["num_small_fragments"])
    return found


def live_bytes(tables: dict[str, Path]) -> int:
    """Bytes of the files the tables' latest versions read (Lance's own count: data and deletion files), i.e. what
    the index would hold with no history kept, indexes aside."""
    import lance

    return sum(
        int(lance.dataset(str(path)).versions()[-1]["metadata"].get("total_files_size", 0))
        for path in tables.values()
        if path.exists()
    )


def referenced_bytes(app, tables: dict[str, Path]) -> tuple[int, int]:
    """(bytes of the files that the table versions the KB's kept versions pin, and the latest, read: data, deletion
    and index files, manifests; bytes of every file of those tables). The rest is kept only by the cleanup rule
    (every table version written since the oldest kept version's sync started): versions a sync wrote on its way
    (a batch's commit, the state before its compaction) that no KB version pins."""
    import lance

    kept = app.versions(KB)
    pins = {
        "chunks": {v.pinned.chunks for v in kept},
        "files": {v.pinned.files for v in kept},
        "reading": {v.pinned.reading for v in kept if v.pinned.reading is not None},
    }
    read: set[Path] = set()
    on_disk = 0
    for kind, path in tables.items():
        latest = lance.dataset(str(path))
        for number in pins[kind] | {latest.version}:
            dataset = lance.dataset(str(path), version=number)
            read.add(path / "_versions" / f"{2**64 - 1 - number}.manifest")
            for fragment in dataset.get_fragments():
                meta = fragment.metadata
                read.update(path / "data" / data.path for data in meta.files)
                if meta.deletion_file is not None:
                    read.add(path / meta.deletion_file.path(meta.id))
            for index in dataset.list_indices():
                read.update(file for file in (path / "_indices" / index["uuid"]).rglob("*") if file.is_file())
        on_disk += sized(path)[0]
    return sum(file.stat().st_size for file in read if file.exists()), on_disk


def compacted(
    tables: dict[str, Path], before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
) -> list[str]:
    """The tables with a Rewrite (compaction) among the versions written between `before` and `after`."""
    import lance

    rewritten = []
    for kind, (latest, _, _) in after.items():
        first = before.get(kind, (0, 0, 0))[0] + 1
        dataset = lance.dataset(str(tables[kind]))
        for version in range(first, latest + 1):
            try:
                operation = type(dataset.read_transaction(version).operation).__name__
            except TypeError as exc:  # pylance 14 cannot build a Rewrite that carries rewritten indexes
                operation = "Rewrite" if "RewrittenIndex" in str(exc) else "?"
            except Exception:  # a version cleaned up since, or without a transaction file
                operation = "?"
            if operation == "Rewrite":
                rewritten.append(kind)
                break
    return rewritten


# ---- history: storage per version, as_of search, the listing ----------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def rewrite(path: Path, rng: random.Random, note: str) -> None:
    """The document's sentences shuffled (its title kept); a sentence appended when that changes nothing."""
    text = path.read_text(encoding="utf-8")
    title, _, body = text.partition("\n\n") if text.startswith("# ") else ("", "", text)
    sentences = _SENTENCE_END.split(body.strip())
    shuffled = sentences[:]
    for _ in range(5):
        rng.shuffle(shuffled)
        if shuffled != sentences:
            break
    new_body = " ".join(shuffled)
    if new_body == body.strip():
        new_body += f" {note}"
    path.write_text(f"{title}\n\n{new_body}\n" if title else f"{new_body}\n", encoding="utf-8")


def append_note(path: Path, note: str) -> None:
    text = path.read_text(encoding="utf-8").rstrip("\n")
    path.write_text(f"{text} {note}\n", encoding="utf-8")


def history_app(folder: Path, keep: int, embedder=None):
    from mcp_kb.app import App

    kb = {
        "name": KB,
        "description": "Scientific claims and abstracts",
        "paths": [str(folder / "docs")],
        "history": {"keep": keep},
    }
    return App(config_of(folder / "index", kb, folder), embedder=embedder)


def synced(app, show: bool = False):
    started = time.perf_counter()
    report = app.sync(SyncRequest(kb=KB), progress=progress if show else None)[0]
    seconds = time.perf_counter() - started
    if show:
        print(f"\n{report.summary()}", file=sys.stderr)
    return report, seconds


def history(args: argparse.Namespace) -> None:
    folder = WORK / f"history-{args.docs or 'all'}"
    shutil.rmtree(folder, ignore_errors=True)
    count = write_corpus("scifact", folder / "docs", limit=args.docs)
    files = sorted((folder / "docs").glob("*.md"))
    app = history_app(folder, args.keep)
    app.embedder.embed_query("load the model before timing")
    report, seconds = synced(app, show=True)
    tables = kb_tables(app, KB)
    base, parts = sized(folder / "index")
    print(
        f"documents {count}; first sync: {report.chunks_embedded} chunks embedded in {seconds:.1f}s; "
        f"index {mb(base)} ({report.index_state})"
    )
    print("  by part: " + ", ".join(f"{part} {mb(size)}" for part, size in parts.most_common(8)))
    print(
        f"  the latest table versions' data files (chunks, files, reading): {mb(live_bytes(tables))}; chunk table "
        f"{table_versions(tables)['chunks'][1]} fragments"
    )
    per_sync = max(1, round(count * args.share))
    share = per_sync / count
    print(
        f"\n{args.syncs} syncs of {per_sync} changed documents each ({share:.2%} of {count}); growth as a share of "
        f"the index after the first sync ({mb(base)}); target: <= 1.2x the changed share = {1.2 * share:.2%}"
    )
    print(
        f"{'sync':>4} {'ver':>4} {'s':>6} {'index MB':>9} {'growth KB':>10} {'growth':>7} {'x share':>7} "
        f"{'chunk frags':>12}  compacted"
    )
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    size, before_parts = base, parts
    for number in range(1, args.syncs + 1):
        for path in rng.sample(files, per_sync):
            rewrite(path, rng, f"Revised in update {number}.")
        before = table_versions(tables)
        report, seconds = synced(app)
        after = table_versions(tables)
        now, now_parts = sized(folder / "index")
        rewritten = compacted(tables, before, after)
        growth = now - size
        row = {
            "sync": number,
            "version": app.versions(KB)[-1].number,
            "seconds": seconds,
            "size": now,
            "growth": growth,
            "share": growth / base,
            "compacted": rewritten,
            "changed": report.files_changed,
            "parts": now_parts - before_parts,
            "shrunk": before_parts - now_parts,
        }
        rows.append(row)
        frags = f"{before['chunks'][1]}->{after['chunks'][1]}"
        print(
            f"{number:4d} {row['version']:4d} {seconds:6.1f} {now / 1e6:9.2f} {growth / 1e3:10.1f} "
            f"{row['share']:7.2%} {row['share'] / share:7.2f} {frags:>12}  {','.join(rewritten) or '-'}"
            + ("" if report.files_changed == per_sync else f"  (sync saw {report.files_changed} changed)"),
            flush=True,
        )
        size, before_parts = now, now_parts
    _growth_summary(rows, base, share)
    print(f"index now {mb(size)}; the latest table versions' data files: {mb(live_bytes(tables))}")
    print("  by part: " + ", ".join(f"{part} {mb(size)}" for part, size in sized(folder / "index")[1].most_common(8)))
    _referenced(app, tables)
    listed = app.versions(KB)
    wrong = [v.number for v in listed[1:] if v.changed != per_sync]
    print(
        f"\nversions listed: {len(listed)} (numbers {listed[0].number}..{listed[-1].number}); each sync's version "
        f"records {per_sync} changed: {'yes' if not wrong else f'NO for {wrong}'}"
    )
    as_of_latency(app, args.queries, f"{len(listed)} versions")
    to_versions(app, folder, files, args, rng)
    listing_latency(folder, args.keep, app.embedder)
    as_of_latency(app, args.queries, f"{len(app.versions(KB))} versions", offset=args.queries + 10)


def _growth_summary(rows: list[dict[str, Any]], base: int, share: float) -> None:
    plain = [row for row in rows if not row["compacted"]]
    compacting = [row for row in rows if row["compacted"]]
    if plain:
        shares = [row["share"] for row in plain]
        worst = max(shares)
        print(
            f"\nsyncs without compaction: {len(plain)}; growth per version: mean {statistics.mean(shares):.3%}, "
            f"median {statistics.median(shares):.3%}, max {worst:.3%} of the index = "
            f"{statistics.mean(shares) / share:.2f}x / {statistics.median(shares) / share:.2f}x / "
            f"{worst / share:.2f}x the changed share ({share:.2%}); target <= 1.2x: "
            f"{'met' if statistics.mean(shares) <= 1.2 * share else 'NOT met'} (mean), "
            f"{'met' if worst <= 1.2 * share else 'NOT met'} (every sync)"
        )
        grown = sum((row["parts"] for row in plain), Counter())
        print(
            "  where it went (mean bytes per version): "
            + ", ".join(f"{part} {size / len(plain) / 1e3:.1f} KB" for part, size in grown.most_common(10))
        )
    if compacting:
        print(f"syncs with compaction (compaction cost = the bytes such a sync added): {len(compacting)}")
        for row in compacting:
            print(
                f"  sync {row['sync']}: +{row['growth'] / 1e6:.2f} MB ({row['share']:.1%} of the index, "
                f"{row['share'] / share:.1f}x the changed share), {row['seconds']:.1f}s; compacted "
                f"{', '.join(row['compacted'])}; grew: "
                + ", ".join(f"{part} {size / 1e6:.2f} MB" for part, size in row["parts"].most_common(4))
            )
    total = sum(row["growth"] for row in rows)
    print(
        f"over all {len(rows)} syncs: +{mb(total)} = {total / base:.1%} of the index after the first sync "
        f"({total / base / len(rows):.2%} per version, {total / base / len(rows) / share:.2f}x the changed share, "
        f"compactions included)"
    )


def _referenced(app, tables: dict[str, Path]) -> None:
    read, on_disk = referenced_bytes(app, tables)
    print(
        f"  chunk, file and reading tables: {mb(on_disk)} on disk, of which {mb(read)} is read by the table "
        f"versions the {len(app.versions(KB))} kept versions pin (and the latest); {mb(on_disk - read)} only by "
        "table versions no KB version pins"
    )


def as_of_latency(app, count: int, label: str, offset: int = 0, also: tuple[str, ...] = ()) -> None:
    """p50/p95 of the same queries now, as_of the oldest version and as_of the current one (the same tables as now:
    what as_of itself costs), and as_of each of `also`; the order rotating from query to query."""
    queries = list(dict.fromkeys(load_queries(EVAL / "scifact" / "queries.jsonl").values()))  # 2 texts repeat
    warm, asked = queries[offset : offset + 10], queries[offset + 10 : offset + 10 + count]
    kept = app.versions(KB)
    variants = [
        ("now", None),
        (f"as_of {kept[0].number} (oldest)", str(kept[0].number)),
        (f"as_of {kept[-1].number} (current)", str(kept[-1].number)),
        *((f"as_of {number}", number) for number in also),
    ]
    for query in warm:
        for _, as_of in variants:
            app.search(KB, SearchRequest(query=query, as_of=as_of), record=False)
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    stages: dict[str, Counter[str]] = {name: Counter() for name, _ in variants}
    notes, cached = Counter[str](), 0
    for i, query in enumerate(asked):
        shift = i % len(variants)
        for name, as_of in variants[shift:] + variants[:shift]:
            started = time.perf_counter()
            result = app.search(KB, SearchRequest(query=query, as_of=as_of), record=False)
            times[name].append((time.perf_counter() - started) * 1000)
            stages[name].update(result.timings_ms)
            cached += result.cached
            notes.update(note.split(" of ")[0] for note in result.notes)
    print(
        f"\nsearch at {label}: {len(asked)} SciFact queries, hybrid, each asked {len(variants)} ways in rotating "
        f"order after {len(warm)} warm-up rounds ({cached} answers from the cache; notes {dict(notes)})"
    )
    _, now95 = percentiles(times["now"])
    for name, _ in variants:
        p50, p95 = percentiles(times[name])
        verdict = (
            ""
            if name == "now"
            else (f"; p95 / now's {p95 / now95:.2f} (target <= 1.2: {'met' if p95 <= 1.2 * now95 else 'NOT met'})")
        )
        print(
            f"  {name:22} p50 {p50:6.1f} ms, p95 {p95:6.1f} ms{verdict}; mean ms by stage: "
            + ", ".join(f"{stage} {total / len(asked):.1f}" for stage, total in stages[name].most_common())
        )


def as_of(args: argparse.Namespace) -> None:
    """as_of search latency on the index `history` left (no sync)."""
    folder = WORK / f"history-{args.docs or 'all'}"
    app = history_app(folder, args.keep)
    if not app.versions(KB):
        raise SystemExit(f"no versions in {folder / 'index'}: run `history` first")
    app.embedder.embed_query("load the model before timing")
    as_of_latency(app, args.queries, f"{len(app.versions(KB))} versions", args.offset, tuple(args.also))


def to_versions(app, folder: Path, files: list[Path], args: argparse.Namespace, rng: random.Random) -> None:
    """Syncs of one changed document each until the KB has `args.versions` versions."""
    have = len(app.versions(KB))
    if have >= args.versions:
        return
    (started, parts), clock, seconds, compactions = sized(folder / "index"), time.perf_counter(), [], Counter[str]()
    tables = kb_tables(app, KB)
    for number in range(have + 1, args.versions + 1):
        append_note(rng.choice(files), f"Note {number}.")
        before = table_versions(tables)
        _, taken = synced(app)
        compactions.update(compacted(tables, before, table_versions(tables)))
        seconds.append(taken)
    now, now_parts = sized(folder / "index")
    print(
        f"\n{len(seconds)} more syncs of one changed document each ({time.perf_counter() - clock:.0f}s; a sync p50 "
        f"{statistics.median(seconds):.2f}s, max {max(seconds):.2f}s; compactions by table {dict(compactions)}): "
        f"{len(app.versions(KB))} versions, index {mb(started)} -> {mb(now)} "
        f"(+{(now - started) / len(seconds) / 1e3:.1f} KB per version); the latest table versions' data files: "
        f"{mb(live_bytes(tables))}"
    )
    print("  grew by part: " + ", ".join(f"{part} {mb(size)}" for part, size in (now_parts - parts).most_common(8)))
    _referenced(app, tables)


def listing_latency(folder: Path, keep: int, embedder) -> None:
    """App.versions from fresh Apps (the store opened by the call) and on a warm one."""
    cold, second = [], []
    for _ in range(5):
        app = history_app(folder, keep, embedder)
        started = time.perf_counter()
        listed = app.versions(KB)
        cold.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        app.versions(KB)
        second.append((time.perf_counter() - started) * 1000)
    warm = []
    for _ in range(50):
        started = time.perf_counter()
        app.versions(KB)
        warm.append((time.perf_counter() - started) * 1000)
    warm50, warm95 = percentiles(warm)
    print(
        f"\nApp.versions with {len(listed)} versions: fresh App (store opened by the call) median "
        f"{statistics.median(cold):.1f} ms, max {max(cold):.1f} ms (5 Apps); its second call median "
        f"{statistics.median(second):.1f} ms; warm p50 {warm50:.1f} ms, p95 {warm95:.1f} ms (50 calls); target "
        f"<= 100 ms: {'met' if max(cold) <= 100 and warm95 <= 100 else 'NOT met'}"
    )


# ---- library: two versions of a documentation set in one KB -----------------------------------

_EDIT = "This behaviour changed in version B, see the release notes for update {n}."


def edit_file(path: Path, rng: random.Random, n: int) -> None:
    """A sentence appended to one prose line (outside code fences) of the file, or a paragraph at its end."""
    lines = path.read_text(encoding="utf-8").split("\n")
    prose, fenced = [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line[:1].isalpha() and len(line) > 40:
            prose.append(i)
    if prose:
        i = rng.choice(prose)
        lines[i] = f"{lines[i]} {_EDIT.format(n=n)}"
    else:
        lines += ["", _EDIT.format(n=n), ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def new_page(rng: random.Random, n: int) -> str:
    words = (
        "request response dependency router middleware schema model validation header cookie token async "
        "database session background task websocket upload form query path parameter status error handler "
        "security scope client test deployment worker proxy cache event lifespan"
    ).split()
    sections = []
    for s in range(rng.randint(3, 5)):
        paragraphs = [
            " ".join(
                " ".join(rng.choices(words, k=rng.randint(8, 16))).capitalize() + "." for _ in range(rng.randint(2, 4))
            )
            for _ in range(rng.randint(2, 3))
        ]
        sections.append(f"## Part {s + 1}\n\n" + "\n\n".join(paragraphs))
    return f"# New in version B: page {n}\n\n" + "\n\n".join(sections) + "\n"


def make_versions(args: argparse.Namespace) -> tuple[Path, Path, dict[str, list[str]]]:
    """Version A (the English tree) and B (A edited, with pages added and removed), made anew."""
    root = WORK / "library"
    shutil.rmtree(root, ignore_errors=True)
    a, b = root / "A", root / "B"
    shutil.copytree(FASTAPI / "en", a)
    if args.limit:  # a quick check: the first N files only
        for path in sorted(a.rglob("*.md"))[args.limit :]:
            path.unlink()
    shutil.copytree(a, b)
    rng = random.Random(args.seed)
    files = sorted(path.relative_to(b) for path in b.rglob("*.md"))
    edited = rng.sample(files, max(1, round(len(files) * args.edit_share)))
    removed = rng.sample([path for path in files if path not in edited], args.removed)
    for n, path in enumerate(edited):
        edit_file(b / path, rng, n)
    for path in removed:
        (b / path).unlink()
    added = [Path("docs") / "new-in-b" / f"page-{n}.md" for n in range(args.added)]
    for n, path in enumerate(added):
        (b / path).parent.mkdir(parents=True, exist_ok=True)
        (b / path).write_text(new_page(rng, n), encoding="utf-8")
    return (
        a,
        b,
        {
            "edited": [str(p) for p in edited],
            "removed": [str(p) for p in removed],
            "added": [str(p) for p in added],
            "files": [str(p) for p in files],
        },
    )


def versions_app(storage: Path, named: list[tuple[str, Path]], embedder=None, name: str = "fastapi"):
    from mcp_kb.app import App

    kb = {
        "name": name,
        "description": "FastAPI web framework documentation",
        "versions": [{"name": version, "paths": [str(path)]} for version, path in named],
    }
    return App(config_of(storage, kb, storage.parent), embedder=embedder)


def sync_one(app, kb: str) -> tuple[Any, float]:
    started = time.perf_counter()
    report = app.sync(SyncRequest(kb=kb))[0]
    return report, time.perf_counter() - started


def reuse(report) -> str:
    done = report.chunks_embedded + report.chunks_reused
    return (
        f"{report.files_added} files added, {report.files_changed} changed, {report.files_deleted} deleted; "
        f"chunks {report.chunks_embedded} embedded, {report.chunks_reused} reused "
        f"(reuse share {report.chunks_reused / max(done, 1):.1%}), {report.chunks_total} in the index"
        + (f"; REBUILT: {report.rebuilt}" if report.rebuilt else "")
    )


def library(args: argparse.Namespace) -> None:
    from mcp_kb.app import App

    a, b, made = make_versions(args)
    root = WORK / "library"
    print(
        f"version A: {len(made['files'])} files ({a}); version B: {len(made['edited'])} edited "
        f"({len(made['edited']) / len(made['files']):.1%}), {len(made['added'])} added, {len(made['removed'])} "
        f"removed ({b})"
    )
    first = versions_app(root / "index", [("A", a)])
    embedder = first.embedder
    embedder.embed_query("load the model before timing")
    report, seconds = sync_one(first, "fastapi")
    size_a = sized(root / "index")[0]
    print(f"sync 1 ([[kb.versions]] A): {reuse(report)}; {seconds:.1f}s; index {mb(size_a)}")
    both = versions_app(root / "index", [("A", a), ("B", b)], embedder)
    tables = kb_tables(both, "fastapi")
    before, parts_a = table_versions(tables), sized(root / "index")[1]
    report, seconds = sync_one(both, "fastapi")
    size_ab, parts_ab = sized(root / "index")
    rewritten = compacted(tables, before, table_versions(tables))
    print(
        f"sync 2 (A and B): {reuse(report)}; {seconds:.1f}s; index {mb(size_a)} -> {mb(size_ab)} "
        f"(+{(size_ab - size_a) / size_a:.0%}); compacted: {', '.join(rewritten) or '-'}; the latest table "
        f"versions' data files {mb(live_bytes(tables))}"
    )
    print("  grew by part: " + ", ".join(f"{part} {mb(size)}" for part, size in (parts_ab - parts_a).most_common(6)))
    fewest = _fewest_to_embed(both, "fastapi")
    print(f"  the fewest B could need embedded (B's distinct content hashes A lacks): {fewest}")
    scratch = App(
        config_of(root / "scratch-index", {"name": "fastapi_b", "description": "B alone", "paths": [str(b)]}, root),
        embedder=embedder,
    )
    alone, alone_seconds = sync_one(scratch, "fastapi_b")
    print(
        f"B alone from scratch (a KB of its own): {reuse(alone)}; {alone_seconds:.1f}s; index "
        f"{mb(sized(root / 'scratch-index')[0])}"
    )
    print(
        f"  B as a second version embedded {report.chunks_embedded} chunks vs {alone.chunks_embedded} from scratch "
        f"({1 - report.chunks_embedded / max(alone.chunks_embedded, 1):.1%} fewer); {seconds:.1f}s vs "
        f"{alone_seconds:.1f}s"
    )
    _version_check(both)
    if not args.no_zh:
        languages(embedder)


def _fewest_to_embed(app, kb: str) -> int:
    rows = app.store.chunk_table(kb).to_arrow().select(["path", "content_hash"]).to_pylist()
    in_a = {row["content_hash"] for row in rows if row["path"].startswith("A/")}
    return len({row["content_hash"] for row in rows if row["path"].startswith("B/")} - in_a)


def _version_check(app) -> None:
    """A search for an edited sentence: from B/ with version B; not that sentence with version A."""
    query = _EDIT.format(n=0)
    answers = {}
    for version in ("A", "B"):
        hits = app.search("fastapi", SearchRequest(query=query, version=version, mode="keyword"), record=False).hits
        answers[version] = (
            sorted({hit.source.split("/")[0] for hit in hits}),
            any("changed in version B" in hit.text for hit in hits),
        )
    print(
        f"version check (keyword search for an edited sentence): version A hits from {answers['A'][0]}, edit "
        f"found {answers['A'][1]}; version B hits from {answers['B'][0]}, edit found {answers['B'][1]}"
    )


def languages(embedder) -> None:
    """English and Chinese as two versions: the Chinese sync should reuse ~no vectors."""
    root = WORK / "library-en-zh"
    shutil.rmtree(root, ignore_errors=True)
    en_only = versions_app(root / "index", [("en", FASTAPI / "en")], embedder, name="fastapi_langs")
    report, seconds = sync_one(en_only, "fastapi_langs")
    print(f"\nen/zh: sync 1 (en): {reuse(report)}; {seconds:.1f}s")
    both = versions_app(
        root / "index", [("en", FASTAPI / "en"), ("zh", FASTAPI / "zh")], embedder, name="fastapi_langs"
    )
    report, seconds = sync_one(both, "fastapi_langs")
    print(f"en/zh: sync 2 (en and zh): {reuse(report)}; {seconds:.1f}s")
    rows = both.store.chunk_table("fastapi_langs").to_arrow().select(["path", "content_hash", "text"]).to_pylist()
    en = {row["content_hash"] for row in rows if row["path"].startswith("en/")}
    shared = [row for row in rows if row["path"].startswith("zh/") and row["content_hash"] in en]
    print(
        f"  zh chunks whose content is also an en chunk: {len(shared)}"
        + (f", e.g. {json.dumps(shared[0]['text'][:80], ensure_ascii=False)}" if shared else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    hist = commands.add_parser("history", help="SciFact: storage per version, as_of search, the versions listing")
    hist.add_argument("--docs", type=int, default=None, help="the first N SciFact documents only (default: all)")
    hist.add_argument("--syncs", type=int, default=20, help="syncs changing --share of the documents each")
    hist.add_argument("--share", type=float, default=0.01, help="share of the documents each sync changes")
    hist.add_argument("--versions", type=int, default=100, help="versions the KB reaches for the listing's timing")
    hist.add_argument("--queries", type=int, default=200)
    hist.add_argument("--keep", type=int, default=200, help="[kb.history] keep")
    hist.add_argument("--seed", type=int, default=0)
    old = commands.add_parser("as-of", help="as_of search latency on the index `history` left (no sync)")
    old.add_argument("--docs", type=int, default=None, help="the index of `history --docs N`")
    old.add_argument("--queries", type=int, default=200)
    old.add_argument("--offset", type=int, default=0, help="skip the first N queries")
    old.add_argument("--also", nargs="*", default=[], help="more versions to search as of (numbers, tags, times)")
    old.add_argument("--keep", type=int, default=200, help="[kb.history] keep")
    lib = commands.add_parser("library", help="FastAPI docs A, then A and B ([[kb.versions]]): vectors reused")
    lib.add_argument("--edit-share", type=float, default=0.05, help="share of B's files edited")
    lib.add_argument("--added", type=int, default=2)
    lib.add_argument("--removed", type=int, default=2)
    lib.add_argument("--limit", type=int, default=None, help="the first N files of the English tree only")
    lib.add_argument("--no-zh", action="store_true", help="skip the English/Chinese sanity check")
    lib.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    use_offline_model()
    {"history": history, "as-of": as_of, "library": library}[args.command](args)


if __name__ == "__main__":
    main()
