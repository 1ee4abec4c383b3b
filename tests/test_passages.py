"""Passages: citations where the evidence is, merging adjacent hits, the per-document cap, over-fetch, and the token
budget of a whole answer."""

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from helpers import write
from pdfs import text_pdf

from mcp_kb.settings import ChunkingConfig
from mcp_kb.ingest.chunking import Chunk, chunk_document
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.ingest.reading import render
from mcp_kb.passages import ELLIPSIS, Budget, Hit, Part, add_context, assemble, fit_budget, parts_of
from mcp_kb.api import BrowseRequest, ReadRequest, SearchRequest
from mcp_kb.present import cited_text
from mcp_kb.search import SearchOutput, SearchResult
from helpers import MakeApp
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

STEPS = "\n\n".join(
    f"Step {i} of the rollout updates service s{i}. It drains traffic, swaps the binary and checks health "
    f"probe p{i} before moving on."
    for i in range(30)
)


@pytest.fixture
def chunks(tmp_path: Path, tokenizer: ModelTokenizer) -> list[Chunk]:
    """Real chunks of one document, with the real overlap between neighbours."""
    document = parse_file(write(tmp_path / "rollout.md", "# Rollout\n\n" + STEPS), "rollout.md")
    found = chunk_document(document, ChunkingConfig(max_tokens=64, overlap=16), tokenizer)
    assert len(found) > 8
    return found


def _hit(chunk: Chunk, score: float = 1.0, source: str | None = None) -> Hit:
    """A chunk's hit as a search makes it from the chunk's row."""
    parts = parts_of(chunk.parts_json, Part(chunk.heading))
    return Hit(
        text=chunk.text,
        source=source or chunk.doc_id,
        title=chunk.title,
        heading=parts[0].heading,
        page=chunk.page,
        chunk_index=chunk.chunk_index,
        score=score,
        line_start=parts[0].line_start,
        line_end=parts[0].line_end,
        parts=parts,
    )


def _size(hit: Hit, tokenizer: ModelTokenizer) -> int:
    return sum(tokenizer.count([part])[0] for part in (hit.context_before, hit.text, hit.context_after) if part)


def _answer_size(hits: list[Hit], notes: list[str], tokenizer: ModelTokenizer, name_kb: bool = False) -> int:
    """The tokens of the text a search tool returns."""
    return tokenizer.count([cited_text(SearchResult(hits, "hybrid", notes), name_kb=name_kb)])[0]


def test_adjacent_hits_merge_into_one_passage_with_the_overlap_once(chunks: list[Chunk]) -> None:
    [passage] = assemble([_hit(chunks[4], 0.9), _hit(chunks[3], 0.8)], top_k=5, max_per_document=2)
    assert (passage.chunk_index, passage.chunk_count, passage.score) == (3, 2, 0.9)
    span = (chunks[3].line_start, chunks[4].line_end)  # one section over both chunks: cited with its whole span
    assert (passage.line_start, passage.line_end) == span and [(p.line_start, p.line_end) for p in passage.parts] == [
        span
    ]
    overlap = chunks[4].text.split("\n")[0]
    assert overlap and chunks[3].text.rstrip().endswith(overlap)  # the chunker repeated it
    assert passage.text.count(overlap) == 1
    assert passage.text.startswith(chunks[3].text) and passage.text.endswith(chunks[4].text.split("\n", 1)[1])


def test_a_hit_between_two_passages_joins_them(chunks: list[Chunk]) -> None:
    hits = [_hit(chunks[2]), _hit(chunks[4]), _hit(chunks[3]), _hit(chunks[8])]
    passages = assemble(hits, top_k=5, max_per_document=2)
    assert [(p.chunk_index, p.chunk_count) for p in passages] == [(2, 3), (8, 1)]


def test_non_adjacent_hits_stay_apart_and_the_cap_leaves_the_rest_out(chunks: list[Chunk], tmp_path: Path) -> None:
    other = Hit(text="Another source.", source="other.md", title="", heading="", page=None, chunk_index=0, score=0.1)
    hits = [_hit(chunks[1]), _hit(chunks[5]), _hit(chunks[8]), other]
    passages = assemble(hits, top_k=5, max_per_document=2)
    assert [(p.source, p.chunk_index) for p in passages] == [("rollout.md", 1), ("rollout.md", 5), ("other.md", 0)]
    assert len(assemble(hits, top_k=2, max_per_document=3)) == 2


def test_assembly_reads_only_as_many_hits_as_it_needs(chunks: list[Chunk]) -> None:
    read = []

    def ranked() -> Iterator[Hit]:
        for chunk in chunks:
            read.append(chunk.chunk_index)
            yield _hit(chunk, source=f"doc{chunk.chunk_index}.md")

    assert len(assemble(ranked(), top_k=3, max_per_document=1)) == 3
    assert len(read) == 4  # the fourth showed the list was full


def test_budget_is_never_exceeded_and_trimming_is_marked(chunks: list[Chunk], tokenizer: ModelTokenizer) -> None:
    passages = assemble([_hit(chunks[i]) for i in range(0, 9, 2)], top_k=5, max_per_document=5)
    assert len(passages) == 5
    for budget in (100, 150, 300, 1000):
        fitted, notes = fit_budget(passages, Budget(budget, tokenizer), "health probe p4")
        assert _answer_size(fitted, notes, tokenizer) <= budget  # citations, notes and text: the whole answer
        assert fitted and all(hit.trimmed == (ELLIPSIS in hit.text) for hit in fitted)
    fitted, notes = fit_budget(passages, Budget(250, tokenizer), "health probe p4")
    assert len(fitted) == 2 and "left out" in notes[0]  # 250 tokens make two readable passages, not five stubs


def test_the_budget_holds_the_whole_answer_whatever_its_citations_and_notes(tokenizer: ModelTokenizer) -> None:
    """Long paths and deep heading paths, in a search across KBs with notes: at most max_tokens, or no passage
    with a note saying the budget is too small for one."""
    deep = " › ".join(f"Section {n} about the long heading of the handbook" for n in range(12))
    hits = [
        Hit(
            text="Step one drains traffic. Step two swaps the binary. " * 30,
            kb="handbook",
            source="/".join(f"folder-{n}" for n in range(40)) + f"/rollout-{i}.md",
            title="",
            heading=deep,
            page=None,
            chunk_index=0,
            score=1.0 - i / 10,
        )
        for i in range(5)
    ]
    notes = ["the first sync of this knowledge base did not finish; results may be incomplete"]
    for budget in (100, 200, 400, 800, 1600):
        fitted, left_out = fit_budget(hits, Budget(budget, tokenizer), "swap the binary", notes=notes)
        assert _answer_size(fitted, notes + left_out, tokenizer, name_kb=True) <= budget
        assert len(fitted) < len(hits) and ("left out" in left_out[0] or "no passage fits" in left_out[0])
    fitted, left_out = fit_budget(hits, Budget(100, tokenizer), "swap the binary", notes=notes)
    assert fitted == [] and "a larger budget" in left_out[0]  # its citation alone is over 100 tokens
    answer = cited_text(SearchResult(fitted, "hybrid", notes + left_out))
    assert "no passage fits max_tokens=100" in answer and "Try other words" not in answer


def test_a_long_citation_still_gets_its_passage_when_the_budget_holds_it(tokenizer: ModelTokenizer) -> None:
    path = "/".join(f"very_long_directory_name_segment_{n}" for n in range(8)) + "/pangolins.md"
    hit = Hit(
        text="Body about pangolins in the forest.",
        source=path,
        title="",
        heading="Hdr",
        page=None,
        chunk_index=0,
        score=1.0,
    )
    needed = _answer_size([hit], [], tokenizer)
    fitted, left_out = fit_budget(
        [hit], Budget(needed + 20, tokenizer), "pangolins"
    )  # a frame is counted at its longest
    assert fitted == [hit] and left_out == []


def test_trimming_keeps_the_best_matching_sentence(chunks: list[Chunk], tokenizer: ModelTokenizer) -> None:
    [passage] = assemble([_hit(chunks[i]) for i in range(0, 9)], top_k=1, max_per_document=1)
    assert passage.chunk_count == 9
    [fitted], _ = fit_budget([passage], Budget(100, tokenizer), "which probe does step 5 check")
    assert "probe p5" in fitted.text and fitted.trimmed
    assert fitted.text.startswith(ELLIPSIS) and fitted.text.endswith(ELLIPSIS)


def test_chinese_passages_are_counted_by_tokens(tokenizer: ModelTokenizer) -> None:
    text = "".join(f"第{i}步：系统先检查服务状态，然后切换流量，最后确认健康检查通过。" for i in range(60))
    hit = Hit(text=text, source="上线.md", title="", heading="", page=None, chunk_index=0, score=1.0)
    assert tokenizer.count([text])[0] > 1000
    [fitted], _ = fit_budget([hit], Budget(200, tokenizer), "第7步")
    assert 120 < tokenizer.count([fitted.text])[0] <= 200
    assert "第7步" in fitted.text


def test_context_counts_against_the_budget_and_gives_way_first(chunks: list[Chunk], tokenizer: ModelTokenizer) -> None:
    [passage] = assemble([_hit(chunks[5])], top_k=1, max_per_document=1)
    neighbours = {(c.doc_id, c.chunk_index): c.text for c in chunks}
    [with_context] = add_context([passage], neighbours, 2)
    assert with_context.context_before and with_context.context_after
    overlap = chunks[5].text.split("\n")[0]
    joined = with_context.context_before + with_context.text
    assert joined.count(overlap) == 1  # the neighbour's end is not repeated by the passage
    size = _answer_size([with_context], [], tokenizer)
    [fitted], notes = fit_budget([with_context], Budget(size - 30, tokenizer), "rollout")
    assert _answer_size([fitted], notes, tokenizer) <= size - 30 and fitted.trimmed
    assert fitted.text == with_context.text  # the passage itself is whole; its context was cut


def test_search_over_fetches_until_top_k_distinct_passages(make_app: MakeApp, tmp_path: Path) -> None:
    """One long document matches first on every candidate; the others still come back."""
    parts = [
        f"The quasar beacon setting number {i} is described here in full."
        if i % 2 == 0
        else f"Nothing to see in part {i}, only filler words."
        for i in range(160)
    ]  # no two matches adjacent
    write(
        tmp_path / "docs" / "manual.md",
        "# Manual\n\n" + "\n\n".join(f"## Part {i}\n\n{text}" for i, text in enumerate(parts)),
    )
    for name in ("alpha", "beta", "gamma", "delta"):
        write(tmp_path / "docs" / f"{name}.md", f"# {name}\n\nA note on {name}: it mentions the quasar beacon once.")
    app = make_app(
        {
            "name": "docs",
            "description": "d",
            "paths": [str(tmp_path / "docs")],
            "search": {"candidates": 10},
            "chunking": {"min_tokens": 0},
        }
    )
    app.sync()
    result = app.search(
        "docs", SearchRequest(query="quasar beacon setting", mode="keyword", top_k=5, max_per_document=1)
    )
    assert len(result.hits) == 5 and len({hit.source for hit in result.hits}) == 5
    capped = app.search(
        "docs", SearchRequest(query="quasar beacon setting", mode="keyword", top_k=5, max_per_document=2)
    )
    assert [hit.source for hit in capped.hits].count("manual.md") == 2 and len(capped.hits) == 5
    embedded: list[str] = []
    original = app.embedder.embed_query

    def counted(text: str) -> np.ndarray:
        embedded.append(text)
        return original(text)

    app.embedder.embed_query = counted  # type: ignore[method-assign]  # counts the queries embedded
    deep = app.search(
        "docs", SearchRequest(query="quasar beacon setting part", mode="hybrid", top_k=5, max_per_document=1)
    )
    assert len({hit.source for hit in deep.hits}) == 5 and embedded == ["quasar beacon setting part"]  # once


def test_a_hit_says_how_it_is_cited_and_how_it_ranked_in_its_json_form() -> None:
    hit = Hit(
        text="Apply in the portal.",
        source="leave.md",
        title="",
        heading="Leave › Annual",
        page=3,
        chunk_index=0,
        score=0.7342,
        vector_rank=1,
        keyword_rank=3,
        trimmed=True,
        page_end=4,
    )
    shown = {
        "citation": "leave.md › Leave › Annual (pages 3-4)",
        "ranking": "score 0.734 · vector rank 1 · keyword rank 3 · trimmed to fit the token budget",
    }
    assert (hit.citation, hit.ranking) == (shown["citation"], shown["ranking"])
    assert SearchOutput(results=[hit], mode="hybrid").model_dump(mode="json")["results"][0].items() >= shown.items()
    listed = TypeAdapter(SearchOutput).json_schema()["$defs"]["Hit"]["properties"]  # what the tools publish
    assert {"citation", "ranking"} <= set(listed)
    assert replace(hit, vector_rank=None, trimmed=False).ranking == "score 0.734 · keyword rank 3"


def test_a_passages_stored_token_count_bounds_what_it_holds(chunks: list[Chunk], tokenizer: ModelTokenizer) -> None:
    """The count a sync stores of each chunk (its heading path and text) is never below the tokens of the text a
    search returns, alone or merged with its neighbours: the budget may trust it without counting."""
    assert all(chunk.n_tokens >= tokenizer.count([chunk.text])[0] for chunk in chunks)
    [merged] = assemble([_hit(chunks[i]) for i in range(2, 7)], top_k=1, max_per_document=1)
    assert sum(chunk.n_tokens for chunk in chunks[2:7]) >= tokenizer.count([merged.text])[0]


class _CountingTokenizer:
    """The model's tokenizer, counting the texts it is asked to count."""

    def __init__(self, tokenizer: ModelTokenizer) -> None:
        self._tokenizer, self.counted = tokenizer, 0
        self.max_tokens = tokenizer.max_tokens

    def count(self, texts: list[str]) -> list[int]:
        self.counted += len(texts)
        return self._tokenizer.count(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def test_a_search_whose_passages_fit_counts_no_passage_and_one_over_budget_is_still_cut(
    make_app: MakeApp, tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    write(tmp_path / "docs" / "rollout.md", "# Rollout\n\n" + STEPS)
    app = make_app(
        {
            "name": "docs",
            "description": "d",
            "paths": [str(tmp_path / "docs")],
            "chunking": {"max_tokens": 64, "overlap": 16},
        }
    )
    app.sync()
    counting = app.searcher.tokenizer = _CountingTokenizer(tokenizer)
    result = app.search("docs", SearchRequest(query="health probe p4", mode="keyword", top_k=5, max_per_document=5))
    assert len(result.hits) >= 3 and not any(hit.trimmed for hit in result.hits)
    assert counting.counted <= 2  # at most the citation lines and notes, each as one text: no passage was counted
    for request in (
        SearchRequest(query="health probe p4", mode="keyword", top_k=5, max_per_document=5, max_tokens=100),
        SearchRequest(query="health probe p4", mode="keyword", top_k=2, context=2, max_tokens=200),
    ):
        result = app.search("docs", request)
        assert request.max_tokens is not None
        assert _answer_size(result.hits, result.notes, tokenizer) <= request.max_tokens
        assert any(hit.trimmed for hit in result.hits)
    assert counting.counted > 0


# ---- citations: every part of a chunk is cited where its text is ----------------------------------------------------

_WORDS = "leave travel policy manager request approve days weeks portal rule form team budget claim".split()
_sentence = st.lists(st.sampled_from(_WORDS), min_size=3, max_size=14).map(lambda words: " ".join(words) + ".")
_paragraph = st.lists(_sentence, min_size=1, max_size=6).map(" ".join)
_section = st.tuples(st.booleans(), st.lists(_paragraph, min_size=1, max_size=3))  # (a subsection?, paragraphs)


def _markdown(sections: list[tuple[bool, list[str]]]) -> str:
    """A page with a one-line intro and sections whose own word (`mark3`) only they hold."""
    parts = ["# Page", "This page covers the rules."]
    for number, (sub, paragraphs) in enumerate(sections):
        parts.append(f"{'###' if sub and number else '##'} Topic {number}")
        parts += [f"mark{number} {paragraph}" for paragraph in paragraphs]
    return "\n\n".join(parts) + "\n"


def _python(classes: list[list[list[str]]]) -> tuple[str, int]:
    """Classes of methods whose bodies name their own word (`mark3`)."""
    lines, number = ['"""A module."""', "import os", ""], 0
    for name, methods in enumerate(classes):
        lines += ["", f"class Thing{name}:"]
        for statements in methods:
            lines += [f"    def act{number}(self):", f"        mark{number} = {number}"]
            lines += [f"        self.{word} = os.sep + '{word}'" for word in statements]
            lines.append("")
            number += 1
    return "\n".join(lines) + "\n", number


def _normalized(text: str) -> str:
    """Text compared by its words alone, PDF page markers left out."""
    return " ".join(re.sub(r"--- page \d+ ---", " ", text).replace("…", " ").split())


def _check_citations(
    tmp_path: Path, tokenizer: ModelTokenizer, name: str, source: str, marks: range, chunking: ChunkingConfig
) -> None:
    """For each mark, a hit on a chunk holding it cites the part holding it, and every line of that part's text lies
    inside the section the citation names, read from the reading form (a chunk continuing a section after a merge
    opens with the section's heading line, for context)."""
    document = parse_file(write(tmp_path / name, source), name)
    rendered = render(document)
    chunks = chunk_document(document, chunking, tokenizer)
    sections = {" › ".join(section.path): section for section in rendered.sections}
    for mark in marks:
        for chunk in [chunk for chunk in chunks if f"mark{mark} " in chunk.text]:
            [hit] = assemble([_hit(chunk)], top_k=1, max_per_document=1, query=f"mark{mark}")
            [part] = [part for part in chunk.parts if part.heading == hit.heading and part.line_start == hit.line_start]
            starts = [p.at for p in chunk.parts]
            own = chunk.text[part.at : next((at for at in starts if at > part.at), len(chunk.text))]
            assert f"mark{mark} " in own, (mark, hit.heading)  # cited where the evidence is
            section = _normalized(rendered.text[sections[hit.heading].start : sections[hit.heading].end])
            assert all(_normalized(line) in section for line in own.split("\n"))  # marks make each line unique


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sections=st.lists(_section, min_size=1, max_size=8), max_tokens=st.sampled_from([48, 96, 256]))
def test_markdown_hits_are_cited_by_the_section_their_words_are_in(
    tmp_path_factory: pytest.TempPathFactory,
    tokenizer: ModelTokenizer,
    sections: list[tuple[bool, list[str]]],
    max_tokens: int,
) -> None:
    chunking = ChunkingConfig(max_tokens=max_tokens, overlap=12, min_tokens=max_tokens // 2)
    _check_citations(
        tmp_path_factory.mktemp("md"), tokenizer, "page.md", _markdown(sections), range(len(sections)), chunking
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    classes=st.lists(
        st.lists(st.lists(st.sampled_from(_WORDS), max_size=30), min_size=1, max_size=4), min_size=1, max_size=3
    )
)
def test_code_hits_are_cited_by_the_method_their_words_are_in(
    tmp_path_factory: pytest.TempPathFactory, tokenizer: ModelTokenizer, classes: list[list[list[str]]]
) -> None:
    source, methods = _python(classes)
    _check_citations(
        tmp_path_factory.mktemp("py"),
        tokenizer,
        "module.py",
        source,
        range(methods),
        ChunkingConfig(max_tokens=64, overlap=8, min_tokens=16),
    )


def test_pdf_hits_lie_on_the_pages_they_cite(make_app: MakeApp, tmp_path: Path) -> None:
    pages = [f"Page {n} tells of rule {n}: " + " ".join(f"clause{n}x{k} holds." for k in range(40)) for n in range(6)]
    (tmp_path / "docs").mkdir()
    text_pdf(tmp_path / "docs" / "rules.pdf", pages)
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    for n in range(6):
        for hit in app.search("docs", SearchRequest(query=f"clause{n}x7", mode="keyword", top_k=3)).hits:
            pages_cited = f"{hit.page}-{hit.page_end or hit.page}"
            read = app.read("docs", ReadRequest(kb="docs", path=hit.source, pages=pages_cited, max_tokens=20_000))
            assert _normalized(hit.text) in _normalized(read.text), pages_cited
            assert "extracted from this pdf" in read.note  # its lines are not the file's


_FRUITS = ("Apples are red.", "Pears are green.", "Plums are purple.")


def _three_notes_docx(path: Path) -> None:
    from docx import Document

    document = Document()
    document.add_heading("Guide", level=1)
    for fruit in _FRUITS:
        document.add_heading("Notes", level=2)
        document.add_paragraph(fruit)
    document.save(str(path))


_THREE_NOTES: dict[
    str, Callable[[Path], object]
] = {  # a document with three sections under one heading path, in each format that has headings
    "guide.md": lambda path: write(path, "# Guide\n\n" + "".join(f"## Notes\n\n{fruit}\n\n" for fruit in _FRUITS)),
    "guide.html": lambda path: write(
        path,
        "<html><body><main><h1>Guide</h1>"
        + "".join(f"<h2>Notes</h2><p>{fruit}</p>" for fruit in _FRUITS)
        + "</main></body></html>",
    ),
    "guide.docx": _three_notes_docx,
    "guide.jsonl": lambda path: write(path, "".join(f'{{"title": "Notes", "text": "{fruit}"}}\n' for fruit in _FRUITS)),
}


@pytest.mark.parametrize("name", list(_THREE_NOTES))
def test_sections_of_one_heading_are_cited_apart_as_the_outline_numbers_them(
    make_app: MakeApp, tmp_path: Path, name: str
) -> None:
    """Three sections in a row under one heading path are three outline entries (`Notes`, `Notes (2)`,
    `Notes (3)`): each hit cites its own, and reading it gives that section alone, heading line included."""
    (tmp_path / "docs").mkdir()
    _THREE_NOTES[name](tmp_path / "docs" / name)
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    lead = "" if name.endswith(".jsonl") else "Guide › "
    outline = app.browse("docs", BrowseRequest(kb="docs", path=name, outline=True)).outline
    assert [entry.heading for entry in outline if "Notes" in entry.heading] == [
        f"{lead}Notes",
        f"{lead}Notes (2)",
        f"{lead}Notes (3)",
    ]
    for fruit, number in zip(_FRUITS, ("", " (2)", " (3)")):
        [hit] = app.search("docs", SearchRequest(query=fruit.split()[0], mode="keyword", top_k=1)).hits
        assert hit.heading == f"{lead}Notes{number}"
        read = app.read("docs", ReadRequest(kb="docs", path=name, section=hit.heading))
        assert [f for f in _FRUITS if f in read.text] == [fruit] and "Notes" in read.text
        if name.endswith(".md"):  # a text file's own lines
            assert hit.line_start == hit.line_end == 1 + 4 * (_FRUITS.index(fruit) + 1)


def test_a_long_function_is_cited_by_the_lines_its_chunk_holds(make_app: MakeApp, tmp_path: Path) -> None:
    body = "".join(f"    step_{n} = compute_value({n}) + offset_{n}\n" for n in range(300))
    source = f"def pipeline(offset):\n{body}    return step_299\n"
    write(tmp_path / "code" / "pipeline.py", source)
    app = make_app({"name": "code", "description": "d", "paths": [str(tmp_path / "code")]})
    app.sync()
    lines = source.split("\n")
    for n in (0, 150, 299):
        hits = app.search(
            "code", SearchRequest(query=f"step_{n} offset_{n}", mode="keyword", top_k=3, max_per_document=3)
        ).hits
        assert any(f"step_{n} =" in hit.text for hit in hits)
        for hit in hits:
            assert hit.heading == "pipeline"
            first, last = hit.parts[0].line_start, hit.parts[-1].line_end
            assert first is not None and last is not None
            assert hit.text == "\n".join(lines[first - 1 : last])


def test_neighbouring_code_symbols_are_passages_of_their_own_and_a_long_one_reads_as_one(
    make_app: MakeApp, tmp_path: Path
) -> None:
    methods = "".join(f"    def method_{n}(self):\n        return 'value {n} of the widget'\n\n" for n in range(6))
    long_body = "".join(f"        total += part_{n} * weight_{n}\n" for n in range(120))
    source = f"class Widget:\n{methods}    def weigh(self):\n        total = 0\n{long_body}        return total\n"
    write(tmp_path / "code" / "widget.py", source)
    app = make_app({"name": "code", "description": "d", "paths": [str(tmp_path / "code")]})
    app.sync()
    hits = app.search(
        "code", SearchRequest(query="widget value method", mode="keyword", top_k=5, max_per_document=5)
    ).hits
    assert len(hits) == 5 and all(len(hit.parts) == 1 and hit.heading.startswith("Widget › method_") for hit in hits)
    lines = source.split("\n")
    for hit in hits:
        assert hit.line_start is not None
        assert hit.text == "\n".join(lines[hit.line_start - 1 : hit.line_end])  # its own lines, nothing else
    [weigh] = app.search(
        "code", SearchRequest(query="total part weight", mode="keyword", top_k=1, max_per_document=1, context=0)
    ).hits
    assert weigh.heading == "Widget › weigh" and weigh.chunk_count > 1  # one symbol's chunks: one passage
    assert weigh.text in source and len(weigh.parts) == 1


_LOOKALIKES = {  # headings whose names the numbering could make twice: written `Notes (2)`, or holding the separator
    "guide.md": "# Guide\n\n## Notes\n\nalpha\n\n## Notes\n\nbravo\n\n## Notes (2)\n\ncharlie\n\n## A › B\n\ndelta\n\n"
    "## A\n\n### B\n\necho\n",
    "guide.html": "<html><body><main><h1>Guide</h1><h2>Notes</h2><p>alpha</p><h2>Notes</h2><p>bravo</p>"
    "<h2>Notes (2)</h2><p>charlie</p><h2>A › B</h2><p>delta</p><h2>A</h2><h3>B</h3><p>echo</p>"
    "</main></body></html>",
}


@pytest.mark.parametrize("name", list(_LOOKALIKES))
def test_no_two_sections_share_a_name_and_each_hit_reads_back_its_own(
    make_app: MakeApp, tmp_path: Path, name: str
) -> None:
    """A heading written `Notes (2)` after two `Notes`, and `A › B` beside `A` then `B`: the outline listed a name
    twice and a hit cited one section by the other's name. Each name is now one section's, in the outline and in
    citations alike, and reading a hit's name gives its word alone."""
    write(tmp_path / "docs" / name, _LOOKALIKES[name])
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    outline = [entry.heading for entry in app.browse("docs", BrowseRequest(kb="docs", path=name, outline=True)).outline]
    assert len(outline) == len(set(outline)) == 7, outline
    words = ("alpha", "bravo", "charlie", "delta", "echo")
    for word in words:
        [hit] = app.search("docs", SearchRequest(query=word, mode="keyword", top_k=1)).hits
        assert hit.heading in outline, (word, hit.heading, outline)
        read = app.read("docs", ReadRequest(kb="docs", path=name, section=hit.heading)).text
        assert [w for w in words if w in read] == [word], (word, hit.heading, read)
