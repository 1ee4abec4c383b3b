"""A document's reading form (ingest/reading.py): its text, outline and pages, and where each chunk begins in it."""

from pathlib import Path

import pytest

from mcp_kb.ingest.chunking import chunk_document
from mcp_kb.ingest.document import Block, Document
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.ingest.reading import outline_json, outline_of, reading_of, render
from mcp_kb.settings import ChunkingConfig
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer


def test_a_document_reads_with_its_headings_pages_and_outline() -> None:
    blocks = (
        Block("Intro text.", ("Guide",)),
        Block("Run it.", ("Guide", "Install")),
        Block("More.", ("Guide", "Install")),
        Block("Sign in.", ("Guide", "Use")),
        Block("Page two.", (), page=2),
    )
    rendered = render(Document("g.md", "markdown", "Guide", blocks))
    assert rendered.text == (
        "# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\nMore.\n\n## Use\n\nSign in.\n\n--- page 2 ---\n\nPage two."
    )
    spans = {" › ".join(s.path): rendered.text[s.start : s.end] for s in rendered.sections}
    assert spans == {
        "Guide": "# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\nMore.\n\n## Use\n\nSign in.",
        "Guide › Install": "## Install\n\nRun it.\n\nMore.",
        "Guide › Use": "## Use\n\nSign in.",
    }
    assert [rendered.text[start:].split("\n")[0] for start in rendered.block_starts] == [
        "Intro text.",
        "Run it.",
        "More.",
        "Sign in.",
        "Page two.",
    ]
    assert rendered.page_starts == ((2, rendered.text.index("--- page 2 ---")),)
    assert outline_of(outline_json(rendered.sections)) == rendered.sections


@pytest.mark.parametrize("overlap", [0, 40])
def test_each_chunk_begins_where_its_own_text_is_in_the_reading_form(tokenizer: ModelTokenizer, overlap: int) -> None:
    """Long paragraphs split into pieces, a table split under its header, small sections merged, Chinese
    without spaces: the text at each chunk's offset is in that chunk, and offsets only go forward."""
    long_english = " ".join(f"Sentence {n} tells of step {n} in the process." for n in range(300))
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| row {n} | value {n} |" for n in range(200))
    chinese = "".join(f"第{n}条规定说明了请假的流程和审批的要求" for n in range(150))
    blocks = (
        Block("Tiny.", ("A",)),
        Block("Also tiny.", ("A", "B")),
        Block(long_english, ("C",)),
        Block(table, ("D",), atomic=True),
        Block(chinese, ("E",)),
        Block("End.", ("E",), page=3),
    )
    document = Document("d.md", "markdown", "D", blocks)
    chunks = chunk_document(document, ChunkingConfig(max_tokens=128, overlap=overlap, min_tokens=16), tokenizer)
    reading = reading_of(document, [chunk.offset for chunk in chunks], sum(c.n_tokens for c in chunks))
    assert len(chunks) > 20
    for chunk, start in zip(chunks, reading.chunk_starts):
        assert reading.text[start:].split("\n")[0][:20] in chunk.text  # (merged chunks name headings without #)
    assert list(reading.chunk_starts) == sorted(reading.chunk_starts)
    assert len(set(reading.chunk_starts)) == len(chunks)  # no two pieces point at one place


def test_a_markdown_file_reads_as_itself_with_each_heading_spanning_its_own_lines(tmp_path: Path) -> None:
    """Skipped levels, a repeated heading, a section that runs to the end of the file, and trailing blank lines."""
    text = (
        "---\ntitle: T\n---\n# Guide\n\nIntro.\n\n### Deep\n\nDeep text.\n\n## Notes\n\nOne.\n\n## Notes\n\nTwo.\n\n"
        "# Appendix\n\nLast.\n\n\n"
    )
    (tmp_path / "g.md").write_text(text, encoding="utf-8")
    rendered = render(parse_file(tmp_path / "g.md", "g.md"))
    assert rendered.text == text
    spans = [(" › ".join(s.path), rendered.text[s.start : s.end]) for s in rendered.sections]
    assert spans == [
        ("Guide", text[text.index("# Guide") : text.index("Two.") + 4]),
        ("Guide › Deep", "### Deep\n\nDeep text."),
        ("Guide › Notes", "## Notes\n\nOne."),
        ("Guide › Notes", "## Notes\n\nTwo."),
        ("Appendix", "# Appendix\n\nLast."),
    ]
