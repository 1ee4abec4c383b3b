"""Reading and browsing documents from the index (reader.py): exact text, sections, pages, lines, passages, budgets,
cursors that cannot be bent, listings that page through everything once, and a KB's own filter."""

import shutil
from dataclasses import replace
from typing import Any
from pathlib import Path

import pytest
from helpers import write
from pdfs import text_pdf

from mcp_kb.api import BrowseRequest, KBError, ReadOutput, ReadRequest, SearchRequest
from mcp_kb.present import read_text
from mcp_kb.app import App
from mcp_kb.index.store import LanceStore
from helpers import MakeApp
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

GUIDE = """---
audience: staff
---
# Leave

Everyone has leave.

## Annual leave

Twenty-five days a year.

### How to apply

Ask your manager in the leave tool, two weeks ahead. Then wait for the answer.

## Sick leave

Call in before nine.
"""


def _long_section(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {n} of the handbook explains rule number {n} in some detail, with an example."
        for n in range(paragraphs)
    )


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(folder / "leave.md", GUIDE)
    write(folder / "handbook.md", f"# Handbook\n\n## Rules\n\n{_long_section(120)}\n\n## End\n\nThe last words.\n")
    text_pdf(folder / "report.pdf", ["First page about budgets.", "Second page about hiring.", "Third page: travel."])
    write(folder / "notes" / "a.txt", "Alpha notes.")
    write(folder / "notes" / "b.txt", "Beta notes.")
    return folder


@pytest.fixture
def app(make_app: MakeApp, docs: Path) -> App:
    app = make_app({"name": "docs", "description": "Guides", "paths": [str(docs)]})
    app.sync()
    return app


def _read_all(app: App, request: ReadRequest) -> list[ReadOutput]:
    """Every part of a read, following its cursors; the answers."""
    answers = [app.read("docs", request)]
    while answers[-1].cursor:
        answers.append(
            app.read("docs", ReadRequest(kb="docs", cursor=answers[-1].cursor, max_tokens=request.max_tokens))
        )
    return answers


def test_a_text_file_reads_from_the_index_as_the_file_itself_even_with_its_sources_gone(app: App, docs: Path) -> None:
    expected = (docs / "handbook.md").read_text()
    shutil.rmtree(docs)
    answer = app.read("docs", ReadRequest(kb="docs", path="handbook.md", max_tokens=20_000))
    assert answer.text == expected and answer.cursor is None and answer.tokens_left == 0
    assert (answer.line_start, answer.line_end) == (1, answer.lines) == (1, len(expected.splitlines()))
    assert app.document_text("docs", "leave.md") == GUIDE  # front matter and all


def test_a_section_by_its_citation_reads_with_its_subsections_and_nothing_else(app: App) -> None:
    hit = app.search("docs", SearchRequest(query="how to apply for annual leave", mode="keyword")).hits[0]
    answer = app.read("docs", ReadRequest(kb="docs", path=hit.source, section="leave.md › Annual leave"))
    assert answer.text == (
        "## Annual leave\n\nTwenty-five days a year.\n\n### How to apply\n\nAsk your manager in the "
        "leave tool, two weeks ahead. Then wait for the answer."
    )
    assert answer.section == "Leave › Annual leave" and answer.cursor is None
    by_tail = app.read("docs", ReadRequest(kb="docs", path="leave.md", section="how to apply"))
    assert by_tail.section == "Leave › Annual leave › How to apply" and by_tail.text.startswith("### How to apply")
    with pytest.raises(KBError, match="no section 'Parental leave'.*Leave › Sick leave"):
        app.read("docs", ReadRequest(kb="docs", path="leave.md", section="Parental leave"))


def test_a_long_section_comes_in_parts_within_the_budget_that_join_up_exactly(
    app: App, tokenizer: ModelTokenizer
) -> None:
    whole = app.read("docs", ReadRequest(kb="docs", path="handbook.md", section="Rules", max_tokens=20_000)).text
    parts = _read_all(app, ReadRequest(kb="docs", path="handbook.md", section="Rules", max_tokens=300))
    assert len(parts) > 3
    assert all(tokenizer.count([read_text(part)])[0] <= 300 for part in parts)  # as the model receives it
    assert "".join(part.text for part in parts) == whole  # put end to end, each part ending at a line's end
    assert all(part.text.endswith("\n") for part in parts[:-1])
    through = app.read_through("docs", ReadRequest(kb="docs", path="handbook.md", section="Rules", max_tokens=300))
    assert (through.text, through.cursor, through.line_end) == (whole, None, parts[-1].line_end)  # `mcp-kb read`
    assert parts[0].tokens_left > parts[1].tokens_left > 0 == parts[-1].tokens_left
    assert [part.line_start for part in parts[1:]] == [part.line_end + 1 for part in parts[:-1]]
    assert "The last words" not in whole  # the section ends where the next one begins


def test_a_line_longer_than_the_budget_is_cut_inside_and_the_parts_put_end_to_end_are_the_file(
    app: App, docs: Path
) -> None:
    text = " ".join(f"word{n}" for n in range(6_000)) + "\nshort second line\n"
    write(docs / "long.txt", text)
    app.sync()
    parts = _read_all(app, ReadRequest(kb="docs", path="long.txt", max_tokens=200))
    assert len(parts) > 5 and "".join(part.text for part in parts) == text
    assert (parts[0].line_start, parts[0].line_end, parts[1].line_start) == (1, 1, 1)  # cut inside line 1
    assert (parts[-1].line_end, parts[-1].lines) == (2, 2)


def test_pages_lines_and_a_passage_read_what_they_name(app: App) -> None:
    pages = app.read("docs", ReadRequest(kb="docs", path="report.pdf", pages="2-3"))
    assert "hiring" in pages.text and "travel" in pages.text and "budgets" not in pages.text
    assert (pages.page_start, pages.page_end, pages.pages) == (2, 3, 3)
    assert pages.location.endswith("pages 2-3 of 3")
    lines = app.read("docs", ReadRequest(kb="docs", path="leave.md", lines="6-8"))
    assert lines.text == "Everyone has leave.\n\n## Annual leave" and (lines.line_start, lines.line_end) == (6, 8)
    assert lines.text.split("\n") == GUIDE.split("\n")[5:8]  # the file's own lines
    chunks = [app.chunk_text("docs", "handbook.md", index) for index in range(30)]
    index = next(i for i, text in enumerate(chunks) if text and "rule number 77 " in text)  # its own text: the first
    around = app.read("docs", ReadRequest(kb="docs", path="handbook.md", chunk=index, max_tokens=2000))
    marked = around.text[around.passage_start : around.passage_end]
    before, own = chunks[index - 1], chunks[index]
    assert before is not None and own is not None
    assert "rule number 77 " in marked and marked in own and (around.passage_start or 0) > 0  # the one before, first
    assert around.text[: around.passage_start].rstrip() in before
    with pytest.raises(KBError, match="no pages"):
        app.read("docs", ReadRequest(kb="docs", path="leave.md", pages="1"))
    with pytest.raises(KBError, match=r"no text on pages 7-9 \(its pages with text: 1-3\)"):
        app.read("docs", ReadRequest(kb="docs", path="report.pdf", pages="7-9"))
    with pytest.raises(KBError, match="one part of a document at a time"):
        app.read("docs", ReadRequest(kb="docs", path="leave.md", pages="1", lines="1-2"))
    with pytest.raises(KBError, match="no document 'nope.md'"):
        app.read("docs", ReadRequest(kb="docs", path="nope.md"))


def test_a_cursor_cannot_be_edited_moved_to_another_kb_or_replayed_after_a_change(
    app: App, make_app: MakeApp, docs: Path
) -> None:
    first = app.read("docs", ReadRequest(kb="docs", path="handbook.md", max_tokens=200))
    cursor = first.cursor
    assert cursor is not None
    for forged in (
        cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB"),
        cursor[:20] + "x" + cursor[21:],
        "not base64 at all!",
        "A" * 3000,
    ):
        with pytest.raises(KBError, match="cursor is not valid here"):
            app.read("docs", ReadRequest(kb="docs", cursor=forged))
    other = make_app({"name": "docs", "description": "Guides", "paths": [str(docs)]})  # another process's key
    with pytest.raises(KBError, match="cursor is not valid here"):
        other.read("docs", ReadRequest(kb="docs", cursor=cursor))
    browse_cursor = app.browse("docs", BrowseRequest(kb="docs", limit=1)).cursor
    with pytest.raises(KBError, match="cursor is not valid here"):
        app.read("docs", ReadRequest(kb="docs", cursor=browse_cursor))
    assert len(cursor) < 120  # the model reads every character of it
    write(docs / "handbook.md", "# Handbook\n\nRewritten.\n")
    app.sync()
    with pytest.raises(KBError, match="handbook.md changed since this cursor"):
        app.read("docs", ReadRequest(kb="docs", cursor=cursor))


def test_browse_lists_by_prefix_glob_and_change_and_pages_through_everything_once(app: App, docs: Path) -> None:
    everything = app.browse("docs", BrowseRequest(kb="docs"))
    assert [d.path for d in everything.documents] == [
        "handbook.md",
        "leave.md",
        "notes/a.txt",
        "notes/b.txt",
        "report.pdf",
    ]
    report = everything.documents[-1]
    assert (report.kind, report.pages, report.chunks >= 1, report.size > 0) == ("pdf", 3, True, True)
    assert [d.path for d in app.browse("docs", BrowseRequest(kb="docs", path="notes/")).documents] == [
        "notes/a.txt",
        "notes/b.txt",
    ]
    assert [d.path for d in app.browse("docs", BrowseRequest(kb="docs", path="**/*.txt")).documents] == [
        "notes/a.txt",
        "notes/b.txt",
    ]
    write(docs / "notes" / "a.txt", "Alpha notes, edited.")
    app.sync()
    assert app.browse("docs", BrowseRequest(kb="docs", sort="changed")).documents[0].path == "notes/a.txt"
    seen, cursor = [], None
    while True:
        page = app.browse("docs", BrowseRequest(kb="docs", limit=2, cursor=cursor))
        seen += [d.path for d in page.documents]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == [d.path for d in everything.documents] and page.total == 5


def test_an_outline_gives_each_heading_its_lines_and_size(app: App) -> None:
    outline = app.browse("docs", BrowseRequest(kb="docs", path="leave.md", outline=True)).outline
    assert [(e.heading, e.depth) for e in outline] == [
        ("Leave", 1),
        ("Leave › Annual leave", 2),
        ("Leave › Annual leave › How to apply", 3),
        ("Leave › Sick leave", 2),
    ]
    annual = outline[1]
    section = app.read("docs", ReadRequest(kb="docs", path="leave.md", section=annual.heading))
    assert (section.line_start, section.line_end) == (annual.line_start, annual.line_end)
    assert outline[0].tokens > annual.tokens > outline[2].tokens > 0
    paged = app.browse("docs", BrowseRequest(kb="docs", path="leave.md", outline=True, limit=3))
    rest = app.browse("docs", BrowseRequest(kb="docs", cursor=paged.cursor))
    assert [e.heading for e in paged.outline + rest.outline] == [e.heading for e in outline] and not rest.cursor


def test_a_kbs_own_filter_hides_documents_from_reading_and_browsing(make_app: MakeApp, docs: Path) -> None:
    app = make_app(
        {
            "name": "docs",
            "description": "Guides",
            "paths": [str(docs)],
            "filterable": {"audience": {"type": "string"}},
            "search": {"filter": {"audience": "staff"}},
        }
    )
    app.sync()
    assert [d.path for d in app.browse("docs", BrowseRequest(kb="docs")).documents] == ["leave.md"]
    with pytest.raises(KBError, match="no document 'handbook.md'"):
        app.read("docs", ReadRequest(kb="docs", path="handbook.md"))


def test_an_index_built_before_reading_says_so_in_one_line_until_a_full_sync(app: App) -> None:
    store = app.store
    assert isinstance(store, LanceStore)
    generation = store.active_generation("docs")
    store.db.drop_table(f"docs__reading__{generation}")
    store._tables.forget(f"docs__reading__{generation}")
    with pytest.raises(KBError, match=r"indexed before documents could be read.*--full") as refused:
        app.read("docs", ReadRequest(kb="docs", path="leave.md"))
    assert "\n" not in str(refused.value)
    with pytest.raises(KBError, match="indexed before documents could be read"):
        app.browse("docs", BrowseRequest(kb="docs"))
    assert app.search("docs", SearchRequest(query="sick leave")).hits  # searching works meanwhile
    app.sync()  # an incremental sync leaves it so
    with pytest.raises(KBError, match="indexed before"):
        app.read("docs", ReadRequest(kb="docs", path="leave.md"))
    from mcp_kb.api import SyncRequest

    [report] = app.sync(SyncRequest(full=True))
    assert report.chunks_embedded == 0  # vectors reused: the rebuild only parsed again
    assert app.read("docs", ReadRequest(kb="docs", path="leave.md")).text.startswith("---\naudience")


def test_deleted_and_failed_documents_leave_the_reading_table(app: App, docs: Path) -> None:
    (docs / "notes" / "b.txt").unlink()
    write(docs / "report.pdf", "%PDF-1.4 broken")
    app.sync()
    assert [d.path for d in app.browse("docs", BrowseRequest(kb="docs")).documents] == [
        "handbook.md",
        "leave.md",
        "notes/a.txt",
    ]
    with pytest.raises(KBError, match="no document 'report.pdf'"):
        app.read("docs", ReadRequest(kb="docs", path="report.pdf"))


def test_an_index_of_layout_2_keeps_answering_says_so_and_the_next_sync_brings_the_files_own_lines(
    app: App, docs: Path
) -> None:
    """Before layout 3, chunks had no parts and a text file read in a rendered form: searches and reads go on, a read
    says in one line what its lines are, and the next sync rebuilds by itself with every vector reused."""
    store = app.store
    assert isinstance(store, LanceStore)
    generation = store.active_generation("docs")
    for table, column in (("chunks", "parts"), ("reading", "as_written")):
        store.db.open_table(f"docs__{table}__{generation}").drop_columns([column])
        store._tables.forget(f"docs__{table}__{generation}")
    state = store.read_state("docs")
    store.write_state("docs", replace(state, fingerprints={**state.fingerprints, "layout": 2}))
    [hit] = app.search("docs", SearchRequest(query="call in before nine", mode="keyword", top_k=1)).hits
    assert (hit.source, hit.heading) == ("leave.md", "Leave › Sick leave") and len(hit.parts) == 1
    old = app.read("docs", ReadRequest(kb="docs", path="leave.md"))
    assert "built before text files read as written" in old.note and "\n" not in old.note
    assert "Note: this index was built before" in read_text(old)
    [report] = app.sync()
    assert "index layout changed" in report.rebuilt and report.chunks_embedded == 0  # every vector reused
    new = app.read("docs", ReadRequest(kb="docs", path="leave.md"))
    assert (new.text, new.note) == (GUIDE, "")


def test_a_document_read_in_parts_is_read_from_the_index_once_per_version(
    app: App, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part of a read (a cursor followed) read the document's whole row from the index again: a 4 MB
    document read in 2,000-token parts read it hundreds of times."""
    from mcp_kb.index import readings

    fetched: list[str] = []
    fetch_row = readings.fetch_row

    def counted(table: Any, path: str) -> dict[str, Any] | None:
        fetched.append(path)
        return fetch_row(table, path)

    monkeypatch.setattr(readings, "fetch_row", counted)
    parts = _read_all(app, ReadRequest(kb="docs", path="handbook.md", max_tokens=300))
    assert len(parts) > 3 and fetched == ["handbook.md"]
    (docs / "handbook.md").write_text("# Handbook\n\nRewritten.\n")
    app.sync()
    assert app.read("docs", ReadRequest(kb="docs", path="handbook.md")).text == "# Handbook\n\nRewritten.\n"
    assert fetched == ["handbook.md", "handbook.md"]  # the new version, read once
