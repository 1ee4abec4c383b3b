from mcp_kb.keywords import index_terms, query_terms


def test_chinese_word_inside_a_sentence_shares_a_term():
    assert set(query_terms("年假").split()) <= set(index_terms("2024年年假申请流程").split())


def test_single_chinese_character_is_findable():
    assert "假" in index_terms("年假").split() and query_terms("假") == "假"


def test_english_word_inside_chinese_is_its_own_term():
    assert "TypeScript" in index_terms("使用TypeScript开发").split()


def test_technical_tokens_stay_whole_and_split_into_parts():
    terms = index_terms("Call getUserInfo with snake_case_names, see API-V2.1 (error E5021).").split()
    for term in ("getUserInfo", "get", "User", "Info", "snake_case_names", "snake", "names",
                 "API-V2.1", "E5021"):
        assert term in terms, term


def test_punctuation_alone_gives_no_terms():
    assert query_terms("?? -- !!") == ""
