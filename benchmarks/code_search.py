"""Code search measured the CodeSearchNet way: a function's docstring asks for the function, whose docstring is gone.

    nice -n 10 .venv/bin/python benchmarks/code_search.py                       # click, httpx, jinja2; 300 queries
    nice -n 10 .venv/bin/python benchmarks/code_search.py --queries 100 --modes hybrid   # a quick check

The corpus is the source of a few installed packages (`--packages`, found by import, not imported): every .py file,
rewritten with the docstrings of the module, its classes and its functions cut out. The cuts follow the ast's line
ranges in the original text, so the rest keeps its formatting (a docstring alone on its lines loses those lines; one
that is a body's only statement becomes `...`; one sharing a line with code becomes `...` in place) and the result is
checked to parse with no docstring left. Queries: the first sentence of each docstring of a function or method
(functions nested in functions aside), kept when it has 4 words or more and no other function's docstring begins
with the same sentence; a seeded sample of `--queries`. The relevant document of a query is the function it came
from, by its line range in the stripped file (decorators included).

Two folder KBs over the same stripped files, made anew each run under /tmp/mcp-kb-bench/code-search:
- syntax: the files as .py, cut by mcp_kb/ingest/parsers/code.py (tree-sitter): one section per function or
  method, headed by its qualified name (`Class › method`), with its line range;
- windows: the same files renamed `<name>.py.cfg`. `.cfg` is one of that parser's PLAIN_SUFFIXES (code with no
  grammar), so the same parser cuts them into its plain line windows (about 50 lines, ended at a blank line): the
  fallback for code without a grammar, with nothing else changed (the document kind is "code" either way; only the
  "language" metadata is missing). The suffix is checked against PLAIN_SUFFIXES.

Each query is searched in each KB and mode through `App.search` with top_k 10, max_per_document 10 (several
functions of one file may be returned) and the largest max_tokens (no passage trimmed). A hit is relevant when it
is in the query's file and its line range overlaps the function's; the rule is the same for both variants. MRR@10
and recall@10 (one relevant function per query: the share found in the top 10) follow from the first relevant hit.
Beside them: recall@10 by a stricter rule (the hit's text holds the function's `def` line), and the mean line span
of the hits. A chunk cut out of a block too long for one chunk keeps the whole block's line range (chunking.py),
so a window split into several chunks claims all of the window's lines: the line span and the stricter figure
show how much that lends the windows. Also printed: queries, files, chunks and sync seconds per variant, and
(`--misses`) a few queries hybrid search on the syntax KB missed, with what it returned first.
"""

from __future__ import annotations

import argparse
import json
import ast
import importlib.util
import random
import re
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import progress, use_offline_model
from mcp_kb.api import SearchRequest, SyncRequest
from mcp_kb.ingest.parsers.code import PLAIN_SUFFIXES
from mcp_kb.settings import MAX_TOKENS_MAX
from mcp_kb.vocabulary import HEADING_SEPARATOR

WORK = Path("/tmp/mcp-kb-bench/code-search")
WINDOW_SUFFIX = ".cfg"  # a plain-code suffix: line windows from the code parser
VARIANTS = {"syntax": "", "windows": WINDOW_SUFFIX}  # variant -> what is appended to each file's name
MIN_WORDS = 4
TOP_K = 10
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_OWNERS = (ast.Module, ast.ClassDef, *_FUNCTIONS)


@dataclass(frozen=True)
class Target:
    """A query and the function it asks for: its file (relative to the KB root) and lines in the stripped file."""

    query: str
    file: str
    name: str
    first: int
    last: int
    def_line: str


# ---- the corpus ------------------------------------------------------------------------------------------------


def package_files(package: str) -> dict[str, str]:
    """The package's .py files by path (`package/sub/module.py`), read as text, not imported."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not an installed package in this environment")
    root = Path(next(iter(spec.submodule_search_locations)))
    return {
        f"{package}/{path.relative_to(root).as_posix()}": path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _docstring_node(owner: ast.AST) -> ast.Expr | None:
    body = getattr(owner, "body", [])
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def _column(line: str, byte_offset: int) -> int:
    """ast's column (UTF-8 bytes) as a character index."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _strip_once(text: str) -> tuple[str, int]:
    """The text with each docstring cut out (bottom up, so earlier positions hold), and how many were cut."""
    lines = text.split("\n")
    cuts = []
    for owner in ast.walk(ast.parse(text)):
        node = _docstring_node(owner) if isinstance(owner, _OWNERS) else None
        if node is not None:
            cuts.append((owner, node))
    for owner, node in sorted(cuts, key=lambda cut: -cut[1].lineno):
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start = _column(lines[first], node.col_offset)
        end = _column(lines[last], node.end_col_offset or 0)
        before, after = lines[first][:start], lines[last][end:]
        alone = not before.strip() and (not after.strip() or after.strip().startswith("#"))
        only = len(owner.body) == 1 and not isinstance(owner, ast.Module)  # a module may be empty
        if alone and not only:
            del lines[first : last + 1]
        elif alone:
            lines[first : last + 1] = [before + "..."]
        else:
            lines[first : last + 1] = [before + "..." + after]
    return "\n".join(lines), len(cuts)


def strip_docstrings(text: str) -> str:
    """The source without docstrings; a string that moves up into a docstring's place is cut in the next round."""
    for _ in range(4):
        text, cut = _strip_once(text)
        if not cut:
            return text
    raise ValueError("docstrings left after 4 rounds")


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Functions and methods (classes in classes included, functions in functions not), each with its qualified
    name made unique by its occurrence (a property's getter and setter), in source order."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    seen: Counter[str] = Counter()

    def visit(node: ast.AST, path: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _FUNCTIONS):
                name = HEADING_SEPARATOR.join((*path, child.name))
                seen[name] += 1
                found.append((f"{name}#{seen[name]}" if seen[name] > 1 else name, child))
            elif isinstance(child, ast.ClassDef):
                visit(child, (*path, child.name))
            elif not isinstance(child, ast.Lambda):
                visit(child, path)  # `if TYPE_CHECKING:` and `try:` blocks at module or class level

    visit(tree, ())
    return found


def first_sentence(docstring: str) -> str:
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    found = _SENTENCE.match(paragraph)
    return found.group(1) if found else paragraph


def build_corpus(packages: list[str]) -> tuple[dict[str, str], list[Target]]:
    """The stripped files by path, and every usable query with the function it came from."""
    stripped: dict[str, str] = {}
    targets: list[Target] = []
    for package in packages:
        for path, text in package_files(package).items():
            original = ast.parse(text)
            without = strip_docstrings(text)
            tree = ast.parse(without)  # raises if a cut broke the file
            assert not any(_docstring_node(node) for node in ast.walk(tree) if isinstance(node, _OWNERS)), path
            stripped[path] = without
            lines = without.split("\n")
            ranges = {name: node for name, node in _functions(tree)}
            for name, node in _functions(original):
                docstring = ast.get_docstring(node)
                if not docstring:
                    continue
                new = ranges[name]
                first = min([new.lineno] + [decorator.lineno for decorator in new.decorator_list])
                targets.append(
                    Target(
                        first_sentence(docstring),
                        path,
                        name,
                        first,
                        new.end_lineno or new.lineno,
                        lines[new.lineno - 1].strip(),
                    )
                )
    counts = Counter(target.query.lower() for target in targets)
    usable = [
        target for target in targets if len(target.query.split()) >= MIN_WORDS and counts[target.query.lower()] == 1
    ]
    return stripped, usable


def write_variants(stripped: dict[str, str]) -> dict[str, Path]:
    """One folder per variant under WORK, the same files with the variant's suffix appended."""
    assert WINDOW_SUFFIX in PLAIN_SUFFIXES, "pick a suffix the code parser cuts into line windows"
    shutil.rmtree(WORK, ignore_errors=True)
    folders = {}
    for variant, suffix in VARIANTS.items():
        folders[variant] = WORK / variant
        for path, text in stripped.items():
            target = folders[variant] / (path + suffix)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return folders


# ---- judging ---------------------------------------------------------------------------------------------------


def _is_function(hit, target: Target, suffix: str) -> bool:
    return (
        hit.source == target.file + suffix
        and hit.line_start is not None
        and hit.line_end is not None
        and hit.line_start <= target.last
        and hit.line_end >= target.first
    )


@dataclass
class Scores:
    """One (variant, mode): the rank of each query's function (None: not in the top 10), and more."""

    ranks: list[int | None]
    held_ranks: list[int | None]  # the first passage holding the function's `def` line, however it is cited
    strict_found: int
    spans: list[int]
    ms: list[float]

    def mrr(self) -> float:
        return sum(1 / rank for rank in self.ranks if rank) / len(self.ranks)

    def held_mrr(self) -> float:
        return sum(1 / rank for rank in self.held_ranks if rank) / len(self.held_ranks)

    def recall(self) -> float:
        return sum(1 for rank in self.ranks if rank) / len(self.ranks)


def evaluate(app, kb: str, mode: str, targets: list[Target], suffix: str) -> tuple[Scores, list]:
    scores = Scores([], [], 0, [], [])
    tops = []
    for target in targets:
        started = time.perf_counter()
        hits = app.search(
            kb,
            SearchRequest(
                query=target.query, mode=mode, top_k=TOP_K, max_per_document=TOP_K, max_tokens=MAX_TOKENS_MAX
            ),
            record=False,
        ).hits
        scores.ms.append((time.perf_counter() - started) * 1000)
        rank = next((i for i, hit in enumerate(hits, 1) if _is_function(hit, target, suffix)), None)
        scores.ranks.append(rank)
        scores.held_ranks.append(
            next(
                (
                    i
                    for i, hit in enumerate(hits, 1)
                    if hit.source == target.file + suffix and target.def_line in hit.text
                ),
                None,
            )
        )
        scores.strict_found += any(_is_function(hit, target, suffix) and target.def_line in hit.text for hit in hits)
        scores.spans.extend(hit.line_end - hit.line_start + 1 for hit in hits if hit.line_start and hit.line_end)
        tops.append(hits[0] if hits else None)
    return scores, tops


# ---- the run ---------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--packages", default="click,httpx,jinja2", help="installed packages, comma-separated")
    parser.add_argument("--queries", type=int, default=300, help="seeded sample of the usable queries (0: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default="hybrid,keyword,vector")
    parser.add_argument("--misses", type=int, default=8, help="hybrid misses on the syntax KB to print")
    parser.add_argument(
        "--search",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [kb.search] setting of both KBs, e.g. title_weight=2 (repeatable)",
    )
    args = parser.parse_args()
    use_offline_model()
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    stripped, usable = build_corpus(args.packages.split(","))
    targets = sorted(usable, key=lambda target: (target.file, target.first))
    if args.queries and args.queries < len(targets):
        targets = random.Random(args.seed).sample(targets, args.queries)
    folders = write_variants(stripped)
    search = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.search)}
    kbs = [
        {"name": f"code-{variant}", "description": variant, "paths": [str(folder)], "search": search}
        for variant, folder in folders.items()
    ]
    app = App(build_config({"storage": str(WORK / "index"), "kb": kbs}, base_dir=WORK, source=None))
    synced = {}
    for variant in VARIANTS:
        started = time.perf_counter()
        report = app.sync(SyncRequest(kb=f"code-{variant}"), progress=progress)[0]
        synced[variant] = (report, time.perf_counter() - started)
        print(f"\n{report.summary()}", file=sys.stderr)
    app.embedder.embed_query("warm up")

    lines = sum(text.count("\n") + 1 for text in stripped.values())
    print(
        f"packages {args.packages}: {len(stripped)} files, {lines} lines (docstrings cut); "
        f"{len(usable)} usable queries, {len(targets)} asked (seed {args.seed}); model {app.embedder.identity.name}"
    )
    for variant, (report, seconds) in synced.items():
        how = (
            "tree-sitter sections per function/method (.py)"
            if variant == "syntax"
            else f"line windows of the code parser (files renamed *.py{WINDOW_SUFFIX})"
        )
        print(
            f"  {variant:<8} {how}: {report.files_added} files, {report.chunks_total} chunks, "
            f"{report.files_failed} failed, sync {seconds:.1f} s"
        )
    print(f"\ntop_k {TOP_K}, max_per_document {TOP_K}; relevant: same file, line ranges overlap")
    print(
        f"{'variant':<8} {'mode':<8} {'MRR@10':>7} {'R@10':>6} {'MRR def':>8} {'R@10 def':>9} {'lines/hit':>9} "
        f"{'p50 ms':>7}"
    )
    misses = []
    for variant, suffix in VARIANTS.items():
        for mode in args.modes.split(","):
            scores, tops = evaluate(app, f"code-{variant}", mode, targets, suffix)
            print(
                f"{variant:<8} {mode:<8} {scores.mrr():>7.3f} {scores.recall():>6.3f} {scores.held_mrr():>8.3f} "
                f"{scores.strict_found / len(targets):>9.3f} {statistics.mean(scores.spans or [0]):>9.1f} "
                f"{statistics.median(scores.ms):>7.1f}",
                flush=True,
            )
            if variant == "syntax" and mode == "hybrid":
                misses = [(target, top) for target, rank, top in zip(targets, scores.ranks, tops) if rank is None]
    print(
        "R@10 def: the hit that overlaps also holds the function's `def` line; MRR def: the first passage holding "
        "that line, however it is cited; lines/hit: mean line span of hits"
    )
    if misses and args.misses:
        print(f"\nhybrid misses on the syntax KB ({len(misses)}), the first {args.misses}: query -> wanted | got first")
        for target, top in misses[: args.misses]:
            got = f"{top.source} {top.heading}" if top else "(nothing)"
            print(f"  {target.query[:90]!r}\n      -> {target.file} {target.name} | {got}")


if __name__ == "__main__":
    main()
