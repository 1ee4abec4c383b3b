"""Words said one way (vocabulary.py): a heading path as a caller types it is read with the separator outlines use."""

from mcp_kb.vocabulary import HEADING_SEPARATOR, heading_path


def test_a_typed_heading_path_reads_with_the_outlines_separator() -> None:
    for typed in ("Install>Linux", " Install > Linux ", "Install › Linux", "Install›Linux"):
        assert heading_path(typed) == f"Install{HEADING_SEPARATOR}Linux"
    assert heading_path("Notes (2)") == "Notes (2)"
