"""Citations read back: does reading what a search hit cites return the text that matched, and how much else?

    nice -n 10 .venv/bin/python benchmarks/citations.py              # FastAPI docs, real PDFs, code: 100 questions each
    nice -n 10 .venv/bin/python benchmarks/citations.py --corpora code --questions 20 --misses 5   # a quick check
    PYTHONPATH=/work/before nice -n 10 .venv/bin/python benchmarks/citations.py   # another tree (e.g. a worktree)

Only API that both older and newer trees have is used (`App.sync`, `App.search`, `App.read_through`, `ReadRequest`,
`cited_text`, `read_text`, `App.tokenizer`), so the same script measures an older tree: PYTHONPATH puts that
tree's `mcp_kb` first (the header prints which one was imported). A rendering that fails falls back to plain text
and says so; a search or read that raises is counted, and the run goes on.

Three folder KBs, made anew each run under /tmp/mcp-kb-bench/citations (`--keep` reuses the index, synced again):
- fastapi: FastAPI's English docs (../shared/eval/fastapi-docs/docs/en, Markdown), indexed where they are;
- pdfs: the real PDFs of ../shared/eval/pdfs, copied flat (renamed `NNN-name.pdf`: two sample sets share names),
  OCR off: the files without a text layer fail to sync and are left out (the header counts them);
- code: every .py file of a few installed packages (`--packages`, found by import, not imported), copied as they
  are (`package/sub/module.py`).

Questions (`--questions` per corpus, seeded by corpus; drawn from the sources, not the index, so every tree is asked
the same):
- prose (Markdown, PDFs): the sentences of the source text with 8 to 40 words, most of them words of letters.
  Markdown is read line by line outside fenced blocks and front matter, leaving out headings, tables, HTML, include
  lines (`{* ... *}`) and admonition fences (`///`), with links, emphasis and backticks unwrapped; a PDF's text is
  pypdf's, page by page. Sentences end at `.`, `!` or `?` followed by a space;
- code: per function or method (ast, nested ones too), the first sentence of its docstring when that has 4 words or
  more; else its name followed by the first 6 identifiers of the first line of its body.
Documents take turns (shuffled), each giving a random unused candidate, so no long document fills the sample; a
question asked twice is dropped.

Each question is searched with `App.search(kb, SearchRequest(query, top_k=3))` and the KB's defaults for the rest
(hybrid, its max_tokens and context). For each hit:
- the text that matched: the piece of `hit.text` sharing the most words (lower-cased `\\w+`) with the question, the
  longest of equals (then the first). Pieces are sentences for prose (split at sentence ends and line ends), lines
  for code, and both are split where trimming left text out (`…`). Whitespace is normalised (runs become one space);
- what the hit cites, read through to its end (`App.read_through`, as `mcp-kb read` without --max-tokens: no budget
  cuts it): the section `hit.heading` of `hit.source` when the heading is not empty, else its lines
  `line_start-line_end` when it has them, else its pages `page-page_end` (PDFs), else the whole document;
- right: the read text holds the matched text (both whitespace-normalised), as written or with its Markdown markup
  cleaned as chunk text is (parsers/markup.py: a file read as written keeps `<dfn>` tags and `{ #anchor }`). A read that raises is wrong, tallied by
  its error; a wrong read that did not raise is tallied by where the matched text is: elsewhere in the document
  (read whole; for a hit read by lines that has pages, whether its pages hold it), or nowhere in its text (the
  passage's text is not the reading text).
Printed per corpus and overall: questions, hits, the share right (the goal is 1.00) and the share of questions whose
top hit is right, read errors, median and 90th percentile tokens of a read (errors left out) beside the median
tokens of a hit's own text, the median tokens an agent takes from question to evidence (the search answer as the
search tool renders it, `cited_text`, plus the read of the top hit as the read tool renders it, `read_text`;
questions whose top read failed left out), all counted with the KB's tokenizer, and the median search time. Then
the share right per citation form (section, lines, pages, whole), the kinds of misses, and (`--misses N`) N wrong
cases per corpus.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import random
import re
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: another tree's mcp_kb may come first
from _beir import EVAL, progress, use_offline_model

WORK = Path("/tmp/mcp-kb-bench/citations")
FASTAPI = EVAL / "fastapi-docs" / "docs" / "en"
PDFS = EVAL / "pdfs"
CORPORA = ("fastapi", "pdfs", "code")
TOP_K = 3
SHOWN_CHARS = 200
PROSE_WORDS = (8, 40)  # a prose question's least and most words
CODE_DOC_WORDS = 4  # a docstring's first sentence shorter than this is not a question
CODE_BODY_WORDS = 6  # identifiers of a body's first line after the function's name
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PIECE_END = re.compile(r"(?<=[.!?])\s+|\n|…")
_WORD = re.compile(r"\w+")
_LETTERS = re.compile(r"^[^\W\d_]{2,}[.,;:!?)]*$")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_ANCHOR = re.compile(r"\{\s*#[^}]*\}")
_TAG = re.compile(r"<[^>]+>")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
_SKIPPED_LINE = re.compile(r"^\s*(?:#|\||<|\{[*!]|///|!!!|===|\?\?\?|>|\[\^?\w)")


@dataclass(frozen=True)
class Question:
    corpus: str
    text: str
    document: str  # where it was drawn from (shown with a miss)


@dataclass
class Miss:
    question: Question
    citation: str
    form: str
    matched: str
    read: str


@dataclass
class Tally:
    """One corpus's figures."""

    questions: int = 0
    hits: int = 0
    right: int = 0
    top_right: int = 0
    read_tokens: list[int] = field(default_factory=list)
    hit_tokens: list[int] = field(default_factory=list)
    agent_tokens: list[int] = field(default_factory=list)
    forms: Counter[tuple[str, bool]] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    misses: list[Miss] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in ("questions", "hits", "right", "top_right"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("read_tokens", "hit_tokens", "agent_tokens", "search_ms"):
            getattr(self, name).extend(getattr(other, name))
        self.forms.update(other.forms)
        self.wrong.update(other.wrong)


# ---- questions -------------------------------------------------------------------------------------------------


def spaced(text: str) -> str:
    """Whitespace normalised: runs of it become one space, none at the ends."""
    return " ".join(text.split())


def _prose_sentences(paragraph: str) -> list[str]:
    found = []
    for sentence in _SENTENCE_END.split(spaced(paragraph)):
        words = sentence.split()
        if PROSE_WORDS[0] <= len(words) <= PROSE_WORDS[1] and sum(
            bool(_LETTERS.match(word)) for word in words
        ) >= 0.6 * len(words):
            found.append(sentence)
    return found


def _markdown_prose(text: str) -> list[str]:
    """The sentences of a Markdown file's prose lines (see the module's docstring)."""
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[end + 1 :]
    sentences, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip() or _SKIPPED_LINE.match(line):
            continue
        line = _BULLET.sub("", _ANCHOR.sub("", _TAG.sub("", _LINK.sub(r"\1", line))))
        sentences += _prose_sentences(line.replace("`", "").replace("**", "").replace("__", ""))
    return sentences


def _pdf_prose(path: Path) -> list[str]:
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            return []
        return [sentence for page in reader.pages for sentence in _prose_sentences(page.extract_text() or "")]
    except Exception:  # a malformed PDF gives no questions; the sync reports it
        return []


def _code_questions(text: str) -> list[str]:
    """Per function: its docstring's first sentence, or its name and the first identifiers of its body."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.split("\n")
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        docstring = ast.get_docstring(node) or ""
        first = _SENTENCE_END.split(spaced(docstring.split("\n\n")[0]))[0] if docstring else ""
        if len(first.split()) >= CODE_DOC_WORDS:
            found.append(first)
            continue
        body = [
            statement
            for statement in node.body
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        ]
        if body:
            words = _IDENTIFIER.findall(lines[body[0].lineno - 1])[:CODE_BODY_WORDS]
            if len(words) >= 2:
                found.append(" ".join([node.name, *words]))
    return found


def _take_turns(per_document: dict[str, list[str]], count: int, corpus: str, rng: random.Random) -> list[Question]:
    """Documents in a shuffled order, each giving a random unused candidate in turn, until `count`."""
    pools = {document: rng.sample(items, len(items)) for document, items in sorted(per_document.items()) if items}
    order = sorted(pools)
    rng.shuffle(order)
    chosen: list[Question] = []
    asked: set[str] = set()
    while len(chosen) < count and any(pools.values()):
        for document in order:
            while pools[document] and len(chosen) < count:
                text = pools[document].pop()
                if text.casefold() not in asked:
                    asked.add(text.casefold())
                    chosen.append(Question(corpus, text, document))
                    break
    return chosen


# ---- the corpora -----------------------------------------------------------------------------------------------


def package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not an installed package in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def prepare(corpus: str, packages: list[str], keep: bool) -> tuple[Path, dict[str, list[str]]]:
    """The corpus's folder (written under WORK unless it is read where it is) and its candidates per document."""
    if corpus == "fastapi":
        files = sorted(FASTAPI.rglob("*.md"))
        return FASTAPI, {
            path.relative_to(FASTAPI).as_posix(): _markdown_prose(path.read_text(encoding="utf-8")) for path in files
        }
    folder = WORK / corpus
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    candidates: dict[str, list[str]] = {}
    if corpus == "pdfs":
        for number, path in enumerate(sorted(PDFS.rglob("*.pdf"))):
            name = f"{number:03d}-{path.name}"
            if not (folder / name).exists():
                shutil.copyfile(path, folder / name)
            candidates[name] = _pdf_prose(path)
        return folder, candidates
    for package in packages:
        root = package_root(package)
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            name = f"{package}/{path.relative_to(root).as_posix()}"
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                shutil.copyfile(path, target)
            candidates[name] = _code_questions(path.read_text(encoding="utf-8"))
    return folder, candidates


# ---- judging ---------------------------------------------------------------------------------------------------


def holds(read: str, matched: str) -> bool:
    """Whether a read holds the matched text, as written or as a passage shows it: Markdown read as written keeps
    its markup (`<dfn title=...>`, `{ #anchor }`), which chunk text has cleaned (parsers/markup.py)."""
    from mcp_kb.ingest.parsers.markup import readable

    return matched in spaced(read) or matched in spaced(readable(read))


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def matched_text(question: str, hit_text: str, code: bool) -> str:
    """The piece of a hit's text (a line of code, else a sentence) that shares the most words with the question."""
    pieces = re.split(r"\n|…", hit_text) if code else _PIECE_END.split(hit_text)
    pieces = [spaced(piece) for piece in pieces if _WORD.search(piece)]
    if not pieces:
        return ""
    asked = _words(question)
    return max(pieces, key=lambda piece: (len(asked & _words(piece)), len(piece)))  # of equals: the longest, first


def cited_part(hit) -> tuple[str, dict[str, str]]:
    """How the hit's citation is read: its form and the ReadRequest fields that ask for it."""
    if hit.heading:
        return "section", {"section": hit.heading}
    if hit.line_start is not None and hit.line_end is not None:
        return "lines", {"lines": f"{hit.line_start}-{hit.line_end}"}
    if hit.page is not None:
        return "pages", {"pages": f"{hit.page}-{hit.page_end or hit.page}"}
    return "whole", {}


def error_kind(exc: Exception) -> str:
    """An error's type and the gist of its message, without the names in it."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", str(exc)).split(";")[0]
    return f"{type(exc).__name__}: {message[:70]}"


FALLBACKS: Counter[str] = Counter()  # renderings the tree could not give (printed with the tables)


def render_search(result) -> str:
    """The search answer as the search tool renders it (plain citations and passages when the tree cannot)."""
    try:
        from mcp_kb.present import cited_text

        return cited_text(result)
    except Exception as exc:  # a tree without it, or one in the middle of a change
        FALLBACKS[f"cited_text: {error_kind(exc)}"] += 1
        return "\n\n".join(f"[{n}] {hit.citation}\n{hit.text}" for n, hit in enumerate(result.hits, 1))


def render_read(answer) -> str:
    """A read's answer as the read tool renders it (its text alone when the tree cannot)."""
    try:
        from mcp_kb.present import read_text

        return read_text(answer)
    except Exception as exc:
        FALLBACKS[f"read_text: {error_kind(exc)}"] += 1
        return answer.text


def ask(app, kb: str, question: Question, tally: Tally, code: bool, keep_misses: int) -> None:
    from mcp_kb.api import ReadRequest, SearchRequest

    count = app.tokenizer.count
    started = time.perf_counter()
    tally.questions += 1
    try:
        result = app.search(kb, SearchRequest(query=question.text, top_k=TOP_K), record=False)
    except Exception as exc:  # counted, and the run goes on
        tally.wrong[f"search failed (a question, no hits): {error_kind(exc)}"] += 1
        return
    tally.search_ms.append((time.perf_counter() - started) * 1000)
    top_read = None
    for rank, hit in enumerate(result.hits[:TOP_K]):
        tally.hits += 1
        tally.hit_tokens.append(count([hit.text])[0])
        matched = matched_text(question.text, hit.text, code)
        form, part = cited_part(hit)
        read, right = "", False
        try:
            answer = app.read_through(kb, ReadRequest(kb=kb, path=hit.source, **part))
        except Exception as exc:  # any failure to read a citation back is a wrong citation
            kind = f"error: {error_kind(exc)}"
            read = f"({kind}) {exc}"
        else:
            read = answer.text
            right = bool(matched) and holds(read, matched)
            tally.read_tokens.append(count([read])[0])
            top_read = render_read(answer) if rank == 0 else top_read
            kind = "" if right else _where(app, kb, hit, form, matched)
        tally.forms[(form, right)] += 1
        tally.right += right
        tally.top_right += right and rank == 0
        if not right:
            tally.wrong[kind] += 1
            if len(tally.misses) < keep_misses:
                shown = f"{form} {next(iter(part.values()), '')}".strip()
                merged = f", {hit.chunk_count} chunks merged" if hit.chunk_count > 1 else ""
                tally.misses.append(
                    Miss(question, f"{hit.citation} [read: {shown}{merged}; {kind}]", form, matched, read)
                )
    if top_read is not None:
        tally.agent_tokens.append(count([render_search(result)])[0] + count([top_read])[0])


def _where(app, kb: str, hit, form: str, matched: str) -> str:
    """Why a read that worked missed: the matched text is elsewhere in the document (for a PDF's hit read by its
    lines: also whether its pages would have held it), or nowhere in its text."""
    from mcp_kb.api import ReadRequest

    if not matched:
        return "no text in the hit"
    try:
        whole = app.read_through(kb, ReadRequest(kb=kb, path=hit.source)).text
    except Exception as exc:
        return f"whole document unreadable: {error_kind(exc)}"
    if not holds(whole, matched):
        return "not in the document's text"
    if form == "lines" and hit.page is not None:
        pages = f"{hit.page}-{hit.page_end or hit.page}"
        try:
            held = matched in spaced(app.read_through(kb, ReadRequest(kb=kb, path=hit.source, pages=pages)).text)
        except Exception:
            held = False
        return f"outside the cited lines; its pages {'hold' if held else 'miss'} it"
    return f"outside the cited {form}"


# ---- the run ---------------------------------------------------------------------------------------------------


def _median(values: list[int]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def _p90(values: list[int]) -> str:
    return f"{statistics.quantiles(values, n=10)[-1]:.0f}" if len(values) >= 2 else _median(values)


def print_tables(tallies: dict[str, Tally]) -> None:
    overall = Tally()
    for tally in tallies.values():
        overall.add(tally)
    rows = {**tallies, **({"all": overall} if len(tallies) > 1 else {})}
    print(
        f"\n{'corpus':<8} {'questions':>9} {'hits':>5} {'right':>6} {'top right':>9} {'errors':>6} "
        f"{'read p50':>8} {'read p90':>8} {'hit p50':>7} {'agent p50':>9} {'search ms':>9}"
    )
    for name, tally in rows.items():
        errors = sum(n for kind, n in tally.wrong.items() if kind.startswith("error"))
        print(
            f"{name:<8} {tally.questions:>9} {tally.hits:>5} {tally.right / max(tally.hits, 1):>6.3f} "
            f"{tally.top_right / max(tally.questions, 1):>9.3f} {errors:>6} {_median(tally.read_tokens):>8} "
            f"{_p90(tally.read_tokens):>8} {_median(tally.hit_tokens):>7} {_median(tally.agent_tokens):>9} "
            f"{statistics.median(tally.search_ms or [0]):>9.1f}"
        )
    print(
        "right: share of hits whose cited part holds the text that matched; top right: of questions, the top hit; "
        "read/hit: tokens of a read (errors left out) and of a hit's text; agent: the search answer as rendered plus "
        "the read of the top hit"
    )
    print(f"\n{'corpus':<8} " + " ".join(f"{form:>16}" for form in ("section", "lines", "pages", "whole")))
    for name, tally in rows.items():
        cells = []
        for form in ("section", "lines", "pages", "whole"):
            right, wrong = tally.forms[(form, True)], tally.forms[(form, False)]
            cells.append(f"{right}/{right + wrong} {right / (right + wrong):.3f}" if right + wrong else "-")
        print(f"{name:<8} " + " ".join(f"{cell:>16}" for cell in cells))
    print("per citation form read: right/hits and the share right")
    for what, n in FALLBACKS.items():
        print(f"note: {n} renderings fell back to plain text ({what})")
    if overall.wrong or any(tally.wrong for tally in tallies.values()):
        print("\nwrong hits by kind:")
        for name, tally in tallies.items():
            for kind, n in tally.wrong.most_common():
                print(f"  {name:<8} {n:>5}  {kind}")


def print_misses(tallies: dict[str, Tally]) -> None:
    for name, tally in tallies.items():
        if not tally.misses:
            continue
        print(f"\nwrong cases in {name} (the first {len(tally.misses)}):")
        for miss in tally.misses:
            print(f"  question: {miss.question.text[:160]!r} (from {miss.question.document})")
            print(f"  citation: {miss.citation}")
            print(f"  matched:  {miss.matched[:SHOWN_CHARS]!r}")
            print(f"  read:     {spaced(miss.read)[:SHOWN_CHARS]!r}\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated, of {', '.join(CORPORA)}")
    parser.add_argument("--questions", type=int, default=100, help="questions per corpus")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--packages", default="click,httpx,jinja2", help="installed packages of the code corpus")
    parser.add_argument("--misses", type=int, default=0, help="wrong cases to print per corpus")
    parser.add_argument("--keep", action="store_true", help="reuse the index of the last run (synced again)")
    args = parser.parse_args()
    corpora = [name.strip() for name in args.corpora.split(",") if name.strip()]
    if unknown := sorted(set(corpora) - set(CORPORA)):
        parser.error(f"unknown corpora {unknown}; known: {', '.join(CORPORA)}")
    use_offline_model()
    import mcp_kb
    from mcp_kb.api import App, SyncRequest
    from mcp_kb.settings import build_config

    begun = time.perf_counter()
    if not args.keep:
        shutil.rmtree(WORK / "index", ignore_errors=True)
    folders, questions = {}, {}
    for corpus in corpora:
        folder, candidates = prepare(corpus, args.packages.split(","), args.keep)
        folders[corpus] = folder
        questions[corpus] = _take_turns(candidates, args.questions, corpus, random.Random(f"{args.seed}-{corpus}"))
    kbs = [
        {"name": corpus, "description": corpus, "paths": [str(folder)], **({"ocr": "off"} if corpus == "pdfs" else {})}
        for corpus, folder in folders.items()
    ]
    app = App(build_config({"storage": str(WORK / "index"), "kb": kbs}, base_dir=WORK, source=None))
    synced = {}
    for corpus in corpora:
        started = time.perf_counter()
        report = app.sync(SyncRequest(kb=corpus), progress=progress)[0]
        synced[corpus] = (report, time.perf_counter() - started)
        print(f"\n{report.summary()}", file=sys.stderr)
    app.embedder.embed_query("warm up")

    try:
        model = app.embedder.identity.name
    except Exception:  # the header only
        model = "?"
    print(
        f"mcp_kb from {Path(mcp_kb.__file__).parent}; model {model}; top_k {TOP_K}, the KBs' default search "
        f"settings; seed {args.seed}"
    )
    for corpus, (report, seconds) in synced.items():
        indexed = sum(getattr(report, name, 0) for name in ("files_added", "files_changed", "files_unchanged"))
        print(
            f"  {corpus:<8} {folders[corpus]}: {indexed} files indexed, {report.files_failed} failed, "
            f"{report.chunks_total} chunks, sync {seconds:.1f} s; {len(questions[corpus])} questions"
        )
    tallies = {}
    for corpus in corpora:
        tallies[corpus] = tally = Tally()
        for number, question in enumerate(questions[corpus], 1):
            ask(app, corpus, question, tally, corpus == "code", args.misses)
            progress(number, len(questions[corpus]), f"{corpus}: {number}/{len(questions[corpus])} questions")
        print(file=sys.stderr)
    print_tables(tallies)
    print_misses(tallies)
    print(f"\nwall time {time.perf_counter() - begun:.0f} s")


if __name__ == "__main__":
    main()
