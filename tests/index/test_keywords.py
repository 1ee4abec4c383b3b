from mcp_kb.index.keywords import cjk_words, keyword_terms


def _terms(text):
    return keyword_terms(text).split()


def test_chinese_word_inside_a_sentence_shares_a_term():
    assert "年假" in _terms("2024年年假申请流程") and "年假" in _terms("年假")


def test_single_chinese_character_meets_longer_words():
    assert "请" in _terms("申请流程") and _terms("请") == ["请"]


def test_the_words_a_partial_match_lacks_are_the_cjk_bigrams():
    assert cjk_words("请假 policy 年假申请") == ["请假", "年假", "假申", "申请"]
    assert cjk_words("假") == [] and cjk_words("annual leave") == []


def test_english_word_inside_chinese_is_its_own_term():
    assert "TypeScript" in _terms("使用TypeScript开发")


def test_technical_tokens_stay_whole_and_split_into_parts():
    terms = _terms("Call getUserInfo with snake_case_names, see API-V2.1 (error E5021).")
    for term in ("getUserInfo", "get", "User", "Info", "snake_case_names", "snake", "names",
                 "API-V2.1", "E5021"):
        assert term in terms, term


def test_punctuation_alone_gives_no_terms():
    assert keyword_terms("?? -- !!") == ""


# ---- properties -----------------------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Latin, CJK, digits, punctuation and separators, mixed the way real documents mix them.
_pieces = st.sampled_from(list("aZ09_-.,;:!?()'\" \n\t") + list("年假申请流程日本語한국어")
                         + ["getUser", "API-V2", "E5021", "snake_case", "中文", "\u00e9", "\u2014"])
_texts = st.lists(_pieces, max_size=30).map("".join)


@given(_texts)
def test_analysis_gives_whitespace_free_nonempty_terms(text):
    terms = keyword_terms(text).split(" ") if keyword_terms(text) else []
    assert all(term and not any(ch.isspace() for ch in term) for term in terms)


@given(_texts, _texts)
def test_a_text_keeps_its_terms_inside_a_longer_text(first, second):
    """What a query finds in a passage, it still finds once the passage goes on (no context bleeds in)."""
    assert set(_terms(first)) <= set(_terms(first + "\n" + second))


@given(st.text(max_size=200))
def test_any_unicode_gives_terms_taken_from_the_text(text):
    """Whatever the script, every term is a piece of the text, and text with a letter or digit has terms."""
    terms = keyword_terms(text).split(" ") if keyword_terms(text) else []
    assert all(term and term in text for term in terms)
    assert terms or not any(ch.isalnum() for ch in text)
