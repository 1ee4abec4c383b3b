from mcp_kb.present import NO_RESULTS, cited_text
from mcp_kb.passages import Hit
from mcp_kb.search import SearchResult


def _hit(text, **fields):
    return Hit(text=text, source="guide.md", title="Guide", heading="Guide › Install", page=None, chunk_index=1,
               score=0.5, **fields)


def test_citations_are_numbered_with_file_heading_and_score():
    text = cited_text(SearchResult([_hit("Run pip install."), _hit("Then restart.")], "hybrid", ["a note"]))
    assert text.splitlines()[:3] == ["Note: a note", "[1] guide.md › Guide › Install (score 0.500)", "Run pip install."]
    assert "[2] guide.md › Guide › Install (score 0.500)\nThen restart." in text


def test_context_is_shown_around_the_passage():
    text = cited_text(SearchResult([_hit("middle", context_before="before", context_after="after")], "keyword"))
    assert "before\n\nmiddle\n\nafter" in text


def test_a_cut_passage_says_how_much_was_left_out():
    text = cited_text(SearchResult([_hit("x" * 1000)], "keyword"), max_chars=100)
    assert text.endswith("x" * 100 + " […900 more characters]")


def test_no_hits_says_what_to_try():
    assert cited_text(SearchResult([], "hybrid")) == NO_RESULTS
