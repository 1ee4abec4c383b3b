from typing import Any

from mcp_kb.present import NO_RESULTS, cited_text
from mcp_kb.passages import Hit
from mcp_kb.search import SearchResult


def _hit(text: str, **fields: Any) -> Hit:
    return Hit(
        text=text,
        source="guide.md",
        title="Guide",
        heading="Guide › Install",
        page=None,
        chunk_index=1,
        score=0.5,
        **fields,
    )


def test_citations_are_numbered_with_file_heading_and_score() -> None:
    text = cited_text(SearchResult([_hit("Run pip install."), _hit("Then restart.")], "hybrid", ["a note"]))
    assert text.splitlines()[:3] == ["Note: a note", "[1] guide.md › Guide › Install (score 0.500)", "Run pip install."]
    assert "[2] guide.md › Guide › Install (score 0.500)\nThen restart." in text


def test_context_is_shown_around_the_passage() -> None:
    text = cited_text(SearchResult([_hit("middle", context_before="before", context_after="after")], "keyword"))
    assert "before\n\nmiddle\n\nafter" in text


def test_a_cut_passage_says_how_much_was_left_out() -> None:
    text = cited_text(SearchResult([_hit("x" * 1000)], "keyword"), max_chars=100)
    assert text.endswith("x" * 100 + " […900 more characters]")


def test_no_hits_says_what_to_try() -> None:
    assert cited_text(SearchResult([], "hybrid")) == NO_RESULTS


def test_a_syncs_sentence_names_a_few_failed_files_and_says_where_the_reasons_are() -> None:
    from mcp_kb.present import sync_text
    from mcp_kb.records import Problem, SyncReport

    failures = [Problem(f"scan-{n}.pdf", "no text layer " + "x" * 200) for n in range(5)]
    report = SyncReport(
        "docs",
        files_added=12,
        files_changed=1,
        files_deleted=2,
        files_unchanged=40,
        files_failed=5,
        failures=failures,
        seconds={"total": 4.25},
    )
    reason = "no text layer " + "x" * 105 + "…"  # a client may pass the LLM the text alone: why, in short
    assert sync_text([report, SyncReport("web", seconds={"total": 0.5})]).splitlines() == [
        f"docs: 12 added, 1 changed, 2 deleted, 40 unchanged, 5 failed, in 4.2 s. Failed: scan-0.pdf ({reason}); "
        f"scan-1.pdf ({reason}); scan-2.pdf ({reason}); and 2 more (the reports list them).",
        "web: 0 added, 0 changed, 0 deleted, 0 unchanged, 0 failed, in 0.5 s.",
    ]
    assert sync_text([]) == "No knowledge base was synced."
