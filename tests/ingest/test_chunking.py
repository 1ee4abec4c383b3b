from helpers import write

import re
from pathlib import Path

import pytest

from mcp_kb.ingest.chunking import Chunk, chunk_document, overlap_text
from mcp_kb.settings import ChunkingConfig
from mcp_kb.ingest.document import Block, Document
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

LONG_SECTION = "\n\n".join(
    f"Paragraph {i} explains step {i} of the deployment in detail, with enough words to take space. "
    f"It mentions configuration option opt_{i} and the error code E{5000 + i}."
    for i in range(40)
)


def _markdown(tmp_path: Path, text: str) -> Document:
    return parse_file(write(tmp_path / "doc.md", text), "doc.md")


def test_chunks_carry_heading_paths_and_are_embedded_with_them(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    text = "# Guide\n\n## Errors\n\n### Auth\n\nE002: auth failed because the token expired. Renew it.\n"
    chunks = chunk_document(_markdown(tmp_path, text), ChunkingConfig(), tokenizer)
    assert chunks[0].heading == "Guide › Errors › Auth"
    assert chunks[0].embed_text.startswith("Guide › Errors › Auth\n")
    assert "E002" in chunks[0].embed_text


def test_no_chunk_exceeds_the_token_limit(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    settings = ChunkingConfig(max_tokens=128, overlap=16)
    chunks = chunk_document(_markdown(tmp_path, "# Deploy\n\n" + LONG_SECTION), settings, tokenizer)
    assert len(chunks) > 5
    assert all(chunk.n_tokens <= 128 for chunk in chunks)
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))


def test_limit_is_capped_at_what_the_model_reads(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    chunks = chunk_document(
        _markdown(tmp_path, "# Deploy\n\n" + LONG_SECTION), ChunkingConfig(max_tokens=4096, overlap=32), tokenizer
    )
    assert max(c.n_tokens for c in chunks) <= tokenizer.max_tokens - 2


def test_consecutive_chunks_of_a_section_overlap(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    chunks = chunk_document(
        _markdown(tmp_path, "# Deploy\n\n" + LONG_SECTION), ChunkingConfig(max_tokens=128, overlap=24), tokenizer
    )
    first, second = chunks[0], chunks[1]
    tail_words = first.text.split()[-5:]
    assert " ".join(tail_words) in second.text


def test_overlap_begins_at_a_sentence(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    chunks = chunk_document(
        _markdown(tmp_path, "# Deploy\n\n" + LONG_SECTION), ChunkingConfig(max_tokens=128, overlap=24), tokenizer
    )
    for chunk in chunks[1:]:
        assert re.match(r"(Paragraph \d+ explains|It mentions) ", chunk.text), chunk.text[:60]


def test_overlap_without_sentences_begins_at_a_word(tokenizer: ModelTokenizer) -> None:
    previous = "see docs_src/query_params/tutorial001_py310.py hl[2,6:11,13:19] *} and the `:80`-backend options here"
    overlap = overlap_text(previous, 12, tokenizer)
    assert previous.endswith(overlap) and overlap
    assert previous[len(previous) - len(overlap) - 1] == " "  # the character before it ends a word


def test_chinese_overlap_begins_after_a_sentence_or_clause_mark(tokenizer: ModelTokenizer) -> None:
    previous = "所有的请求都会被转发到后端服务。然后由后端服务处理请求，并返回结果给客户端。" * 3
    overlap = overlap_text(previous, 16, tokenizer)
    assert previous.endswith(overlap) and overlap
    assert previous[len(previous) - len(overlap) - 1] in "。，"


def test_overlap_keeps_a_useful_length_when_the_sentence_starts_late(tokenizer: ModelTokenizer) -> None:
    """A sentence beginning in the last words loses to a word start that keeps most of the overlap."""
    previous = (
        "The gateway forwards every request to the backend service which answers it and logs the "
        "outcome for auditing purposes. Done."
    )
    overlap = overlap_text(previous, 16, tokenizer)
    assert overlap != "Done." and len(overlap.split()) > 5


def test_code_fence_is_never_split(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    fence = "```python\n" + "\n".join(f"# step {i}\nvalue_{i} = compute({i})" for i in range(12)) + "\n```"
    text = "# Code\n\n" + LONG_SECTION[:1500] + "\n\n" + fence + "\n\nAfter the code.\n"
    chunks = chunk_document(_markdown(tmp_path, text), ChunkingConfig(max_tokens=200, overlap=16), tokenizer)
    holding = [c for c in chunks if "```python" in c.text]
    assert len(holding) == 1 and fence in holding[0].text


def test_tiny_sections_are_merged_up_to_the_floor(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    text = "# FAQ\n\n## One\n\nYes.\n\n## Two\n\nNo.\n\n## Three\n\nMaybe.\n"
    chunks = chunk_document(_markdown(tmp_path, text), ChunkingConfig(min_tokens=40), tokenizer)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("FAQ",)
    assert "One\nYes." in chunks[0].text and "Three\nMaybe." in chunks[0].text


def test_chinese_text_splits_at_sentence_punctuation(tokenizer: ModelTokenizer) -> None:
    sentence = "员工每年享有十五天带薪年假，须提前两周在系统中提交申请。"
    document = Document("zh.txt", "text", "zh", (Block(sentence * 30),))
    chunks = chunk_document(document, ChunkingConfig(max_tokens=100, overlap=0, min_tokens=0), tokenizer)
    assert len(chunks) > 1
    assert all(c.text.endswith("。") for c in chunks[:-1])
    assert all(c.n_tokens <= 100 for c in chunks)


def test_text_without_any_boundary_is_hard_cut(tokenizer: ModelTokenizer) -> None:
    document = Document("x.txt", "text", "x", (Block("数据库索引同步" * 100),))  # no spaces, no punctuation
    chunks = chunk_document(document, ChunkingConfig(max_tokens=64, overlap=0, min_tokens=0), tokenizer)
    assert len(chunks) > 1 and all(c.n_tokens <= 64 for c in chunks)


def test_json_records_are_never_packed_together(tokenizer: ModelTokenizer) -> None:
    blocks = tuple(Block(f"question: q{i}\nanswer: a{i}", heading_path=(f"q{i}",)) for i in range(3))
    document = Document("faq.json", "json", "faq", blocks, one_chunk_per_block=True)
    chunks = chunk_document(document, ChunkingConfig(), tokenizer)
    assert [c.heading for c in chunks] == ["q0", "q1", "q2"]


def test_pdf_chunks_keep_their_page(tokenizer: ModelTokenizer) -> None:
    blocks = (Block("Page one text about setup.", page=1), Block("Page two text about errors.", page=2))
    chunks = chunk_document(Document("m.pdf", "pdf", "m", blocks), ChunkingConfig(min_tokens=0), tokenizer)
    assert [c.page for c in chunks] == [1, 2]


def test_content_hash_changes_only_with_embedded_text(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    a = chunk_document(_markdown(tmp_path, "# A\n\nSame text here.\n"), ChunkingConfig(), tokenizer)[0]
    b = chunk_document(_markdown(tmp_path, "# A\n\nSame text here.\n"), ChunkingConfig(), tokenizer)[0]
    c = chunk_document(_markdown(tmp_path, "# B\n\nSame text here.\n"), ChunkingConfig(), tokenizer)[0]
    assert a.content_hash == b.content_hash != c.content_hash


def test_a_table_larger_than_a_chunk_is_cut_between_rows_under_its_header(
    tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    rows = "\n".join(f"| service-{i} | owner team {i} | runs on cluster c{i % 3} |" for i in range(40))
    text = "# Services\n\n| Service | Owner | Where |\n| --- | --- | --- |\n" + rows + "\n"
    chunks = chunk_document(_markdown(tmp_path, text), ChunkingConfig(max_tokens=96, overlap=0), tokenizer)
    assert len(chunks) > 3
    for chunk in chunks:
        body = chunk.text.split("\n")
        assert body[0] == "| Service | Owner | Where |" and body[1] == "| --- | --- | --- |"
        assert all(line.startswith("| service-") and line.endswith("|") for line in body[2:])
        assert chunk.n_tokens <= 96
    assert sum(chunk.text.count("| service-") for chunk in chunks) == 40  # every row once


class _Counting:
    """A token counter that counts what it is asked: calls, texts per call, characters encoded."""

    def __init__(self, counter: ModelTokenizer) -> None:
        self.counter = counter
        self.max_tokens = counter.max_tokens
        self.characters = 0
        self.largest_batch = 0

    def count(self, texts: list[str]) -> list[int]:
        self.characters += sum(map(len, texts))
        self.largest_batch = max(self.largest_batch, len(texts))
        return self.counter.count(texts)

    def head(self, text: str, n_tokens: int) -> str:
        self.characters += len(text)
        return self.counter.head(text, n_tokens)

    def tail(self, text: str, n_tokens: int) -> str:
        self.characters += len(text)
        return self.counter.tail(text, n_tokens)

    def unknown_share(self, text: str) -> float:
        return self.counter.unknown_share(text)


def _encoded_characters(text: str, tokenizer: ModelTokenizer) -> tuple[int, list[Chunk]]:
    counting = _Counting(tokenizer)
    document = Document("x.txt", "text", "x", (Block(text),))
    chunks = chunk_document(document, ChunkingConfig(max_tokens=128, overlap=0, min_tokens=0), counting)
    return counting.characters, chunks


@pytest.mark.parametrize("unit", ["数据库索引同步", "a.a.a.a."], ids=["Chinese", "Latin"])
def test_text_without_split_points_is_chunked_in_linear_time(tokenizer: ModelTokenizer, unit: str) -> None:
    """Characters encoded grow with the text, not with its square (each hard cut re-encoded the rest)."""
    small, _ = _encoded_characters(unit * 2_000, tokenizer)
    large, chunks = _encoded_characters(unit * 8_000, tokenizer)
    assert large / small < 5  # four times the text; quadratic work would be sixteen times
    assert all(chunk.n_tokens <= 128 for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == unit * 8_000  # nothing lost, nothing doubled


def test_a_windowed_cut_is_the_cut_over_the_whole_text(tokenizer: ModelTokenizer) -> None:
    from mcp_kb.ingest.chunking import _head

    for text in ("数据库索引同步" * 3_000, "a.a.a.a." * 3_000, "supercalifragilistic" * 2_000, "x" * 50_000):
        for window in (128, 512, 4096):
            assert _head(text, 0, 128, tokenizer, window)[0] == tokenizer.head(text, 128)


def test_one_huge_line_of_words_is_counted_in_bounded_slices(tokenizer: ModelTokenizer) -> None:
    from mcp_kb.ingest.chunking import _COUNT_SLICE

    counting = _Counting(tokenizer)
    document = Document("x.md", "markdown", "x", (Block(" ".join(f"word{n}" for n in range(50_000))),))
    chunks = chunk_document(document, ChunkingConfig(max_tokens=256, overlap=0, min_tokens=0), counting)
    assert counting.largest_batch <= _COUNT_SLICE and all(chunk.n_tokens <= 256 for chunk in chunks)
