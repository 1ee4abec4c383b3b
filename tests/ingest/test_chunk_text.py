"""The text of a chunk is what a reader of the page reads: no MkDocs or HTML markup, no words broken at a line end."""

from pathlib import Path

from helpers import write
from pdfs import text_pdf

from mcp_kb.api import SearchRequest
from mcp_kb.ingest.chunking import chunk_document
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.settings import ChunkingConfig
from helpers import MakeApp
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

# A page as the FastAPI docs write them (../shared/eval/fastapi-docs).
PAGE = """# Request Body { #request-body }

Import an <abbr title="Object-Relational Mapper">ORM</abbr> (the `<abbr>` tag explains a term).

{* ../../docs_src/body/tutorial001_py310.py hl[7] *}

## Data <dfn title="also known as: serialization">conversion</dfn> { #data-conversion }

```Python hl_lines="2  7-10"
class Item(BaseModel):
    name: str = "<b>not markup</b>"
```

```{ .dockerfile .annotate hl_lines="10  13" }
FROM python:3.10
```

/// tip | Technical Details

Run it:

///

<div class="termy">

```console
$ <font color="#4E9A06">fastapi</font> dev <u style="text-decoration-style:solid">main.py</u>
```

</div>
"""


def _chunk_text(tmp_path: Path, tokenizer: ModelTokenizer, name: str) -> str:
    """All a file's chunks as one text, each with its heading path (as it is embedded and keyword-indexed)."""
    document = parse_file(tmp_path / name, name)
    return "\n".join(chunk.embed_text for chunk in chunk_document(document, ChunkingConfig(), tokenizer))


def test_an_include_directive_becomes_the_path_of_the_file_it_names(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    write(tmp_path / "body.md", PAGE)
    text = _chunk_text(tmp_path, tokenizer, "body.md")
    assert "\ndocs_src/body/tutorial001_py310.py\n" in text
    assert "{*" not in text and "hl[" not in text and "*}" not in text


def test_fences_keep_their_code_and_language_without_attributes(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    write(tmp_path / "body.md", PAGE)
    text = _chunk_text(tmp_path, tokenizer, "body.md")
    assert '```Python\nclass Item(BaseModel):\n    name: str = "<b>not markup</b>"\n```' in text
    assert "```dockerfile\nFROM python:3.10\n```" in text
    assert "hl_lines" not in text and ".annotate" not in text


def test_html_tags_leave_their_text_and_a_term_its_explanation(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    write(tmp_path / "body.md", PAGE)
    text = _chunk_text(tmp_path, tokenizer, "body.md")
    assert "Import an ORM (Object-Relational Mapper) (the `<abbr>` tag explains a term)." in text
    assert "$ fastapi dev main.py" in text  # a terminal session without its colours
    assert "<div" not in text and "<font" not in text and "<u " not in text


def test_headings_lose_anchors_and_tags(tmp_path: Path) -> None:
    write(tmp_path / "body.md", PAGE)
    document = parse_file(tmp_path / "body.md", "body.md")
    assert document.title == "Request Body"
    assert {block.heading_path for block in document.blocks} == {("Request Body",), ("Request Body", "Data conversion")}


def test_an_admonition_leaves_its_title(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    write(tmp_path / "body.md", PAGE)
    text = _chunk_text(tmp_path, tokenizer, "body.md")
    assert "Technical Details\n\nRun it:" in text
    assert "///" not in text


def test_pdf_words_broken_at_a_line_end_are_whole(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    text_pdf(tmp_path / "notes.pdf", ["Crossing the river there is dan-\ngerous in spring."])
    assert "there is dangerous in spring." in _chunk_text(tmp_path, tokenizer, "notes.pdf")


def test_pdf_compounds_broken_at_their_hyphen_keep_it(tmp_path: Path, tokenizer: ModelTokenizer) -> None:
    text_pdf(tmp_path / "notes.pdf", ["Cases of COVID-\n19 rose, as is well-\nKnown, and HIV-\npositive ones fell."])
    assert "Cases of COVID-19 rose, as is well-Known, and HIV-positive ones fell." in _chunk_text(
        tmp_path, tokenizer, "notes.pdf"
    )


def test_pdf_keeps_the_hyphen_of_a_compound_the_document_writes_whole(
    tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    text_pdf(tmp_path / "notes.pdf", ["A well-known fact, and\nanother well-\nknown one."])
    assert "another well-known one." in _chunk_text(tmp_path, tokenizer, "notes.pdf")


def test_keyword_search_finds_a_word_a_pdf_broke_across_lines(make_app: MakeApp, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    text_pdf(docs / "river.pdf", ["Crossing the river in spring is dan-\ngerous for small boats."])
    write(docs / "other.md", "# Boats\n\nSmall boats are safe in the harbour.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(docs)]})
    app.sync()
    hits = app.search("docs", SearchRequest(query="dangerous", mode="keyword", top_k=5)).hits
    assert [hit.source for hit in hits] == ["river.pdf"]
    assert "is dangerous for small boats" in hits[0].text
