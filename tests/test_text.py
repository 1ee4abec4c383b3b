"""The shared text rules: sentence ends in English and Chinese, CJK ranges, shared heading depth."""

import re

from hypothesis import given
from hypothesis import strategies as st

from mcp_kb.text import CJK_CHARACTERS, as_sentence, sentences, shared_depth


def test_sentences_end_at_chinese_and_spaced_english_marks_but_not_inside_versions_or_times() -> None:
    text = "年假需提前申请。请在系统中提交！Version 2.1 ships at 10:30. Then: done\nnext line"
    assert sentences(text) == [
        "年假需提前申请。",
        "请在系统中提交！",
        "Version 2.1 ships at 10:30. ",
        "Then: ",
        "done\n",
        "next line",
    ]


@given(st.text(alphabet=st.sampled_from(list("ab .。!?\n:;年假")), max_size=60))
def test_sentences_joined_are_the_text(text: str) -> None:
    assert "".join(sentences(text)) == text


def test_a_description_ends_as_a_sentence_once() -> None:
    assert as_sentence("HR policies ") == "HR policies."
    assert as_sentence("HR policies.") == "HR policies." and as_sentence("人事制度。") == "人事制度。"
    assert as_sentence("Why?") == "Why?"


def test_shared_depth_counts_leading_headings_only() -> None:
    assert shared_depth(("Install", "Linux"), ("Install", "macOS")) == 1
    assert shared_depth(("A", "B"), ("A", "B", "C")) == 2 and shared_depth(("A",), ("B", "A")) == 0


def test_cjk_ranges_cover_chinese_japanese_and_korean_but_not_latin() -> None:
    cjk = re.compile(f"[{CJK_CHARACTERS}]")
    assert all(cjk.match(ch) for ch in "年假かなカナ한글") and not any(cjk.match(ch) for ch in "aZ9é，")
