from mcp_kb.keywords import keyword_terms


def _terms(text):
    return keyword_terms(text).split()


def test_chinese_word_inside_a_sentence_shares_a_term():
    assert "年假" in _terms("2024年年假申请流程") and "年假" in _terms("年假")


def test_single_chinese_character_meets_longer_words():
    assert "请" in _terms("申请流程") and _terms("请") == ["请"]


def test_english_word_inside_chinese_is_its_own_term():
    assert "TypeScript" in _terms("使用TypeScript开发")


def test_technical_tokens_stay_whole_and_split_into_parts():
    terms = _terms("Call getUserInfo with snake_case_names, see API-V2.1 (error E5021).")
    for term in ("getUserInfo", "get", "User", "Info", "snake_case_names", "snake", "names",
                 "API-V2.1", "E5021"):
        assert term in terms, term


def test_punctuation_alone_gives_no_terms():
    assert keyword_terms("?? -- !!") == ""
