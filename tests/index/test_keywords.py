from collections import Counter
from collections.abc import Callable

import pytest

from mcp_kb.index.keywords import cjk_words, keyword_terms


def _terms(text: str) -> list[str]:
    return keyword_terms(text).split()


def _lowered(text: str) -> list[str]:
    """The terms as LanceDB's index keeps them (it lower-cases)."""
    return [term.lower() for term in _terms(text)]


def test_chinese_word_inside_a_sentence_shares_a_term() -> None:
    assert "年假" in _terms("2024年年假申请流程") and "年假" in _terms("年假")


def test_single_chinese_character_meets_longer_words() -> None:
    assert "请" in _terms("申请流程") and _terms("请") == ["请"]


def test_the_words_a_partial_match_lacks_are_the_cjk_bigrams() -> None:
    assert cjk_words("请假 policy 年假申请") == ["请假", "年假", "假申", "申请"]
    assert cjk_words("假") == [] and cjk_words("annual leave") == []


def test_english_word_inside_chinese_is_its_own_term() -> None:
    assert "TypeScript" in _terms("使用TypeScript开发")


def test_technical_tokens_stay_whole_and_split_into_parts() -> None:
    terms = _terms("Call getUserInfo with snake_case_names, see API-V2.1 (error E5021).")
    for term in ("getUserInfo", "get", "User", "Info", "snake_case_names", "snake", "names", "API-V2.1", "E5021"):
        assert term in terms, term


@pytest.mark.parametrize(
    ("code", "identifier"),
    [
        ("user.getUserById(42)", "getUserById"),
        ("self.get_user(id)", "get_user"),
        ("repo->findAll();", "findAll"),
        ("Foo::bar_baz", "bar_baz"),
        ("super().__init__(self)", "__init__"),
        ("cells/mm3", "mm3"),
    ],
)
def test_an_identifier_glued_to_punctuation_is_a_term_whole(code: str, identifier: str) -> None:
    assert identifier in _terms(code)


def test_a_plain_word_inside_a_token_is_a_term_once() -> None:
    assert _terms("Foo::bar") == ["Foo::bar", "Foo", "bar"]


def test_spellings_of_a_name_share_it_without_underscores() -> None:
    for spelling in ("get_user_by_id", "getUserById", "GetUserByID", "GET_USER_BY_ID", "x.getUserById();"):
        assert "getuserbyid" in _lowered(spelling), spelling


def test_an_exact_spelling_holds_a_term_the_others_lack_or_the_shared_one_twice() -> None:
    snake, camel = Counter(_lowered("get_user_by_id")), Counter(_lowered("getUserById"))
    assert snake["get_user_by_id"] == 1 and camel["get_user_by_id"] == 0
    assert (camel["getuserbyid"], snake["getuserbyid"]) == (2, 1)


def test_prose_and_chinese_are_analysed_as_before() -> None:
    assert _terms("get the user by their id") == ["get", "the", "user", "by", "their", "id"]
    assert _terms("年假申请") == ["年假", "假申", "申请", "年", "假", "申", "请"]
    assert _terms("COVID-19 well-known") == ["COVID-19", "COVID", "19", "well-known", "well", "known"]


def test_punctuation_alone_gives_no_terms() -> None:
    assert keyword_terms("?? -- !!") == ""


# ---- properties -----------------------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Latin, CJK, digits, punctuation and separators, mixed the way real documents mix them.
_pieces = st.sampled_from(
    list("aZ09_-.,;:!?()'\" \n\t")
    + list("年假申请流程日本語한국어")
    + ["getUser", "API-V2", "E5021", "snake_case", "中文", "\u00e9", "\u2014"]
)
_texts = st.lists(_pieces, max_size=30).map("".join)


@given(_texts)
def test_analysis_gives_whitespace_free_nonempty_terms(text: str) -> None:
    terms = keyword_terms(text).split(" ") if keyword_terms(text) else []
    assert all(term and not any(ch.isspace() for ch in term) for term in terms)


@given(_texts, _texts)
def test_a_text_keeps_its_terms_inside_a_longer_text(first: str, second: str) -> None:
    """What a query finds in a passage, it still finds once the passage goes on (no context bleeds in)."""
    assert set(_terms(first)) <= set(_terms(first + "\n" + second))


@given(st.text(max_size=200))
def test_any_unicode_gives_terms_taken_from_the_text(text: str) -> None:
    """Whatever the script, every term is a piece of the text (a name: with its underscores dropped), and text
    with a letter or digit has terms."""
    terms = keyword_terms(text).split(" ") if keyword_terms(text) else []
    assert all(term and (term in text or term in text.replace("_", "")) for term in terms)
    assert terms or not any(ch.isalnum() for ch in text)


_words = st.lists(st.sampled_from(["get", "user", "by", "id", "name", "http", "v2", "x"]), min_size=2, max_size=4)
_spellings: dict[str, Callable[[list[str]], str]] = {
    "camel": lambda words: words[0] + "".join(word.capitalize() for word in words[1:]),
    "pascal": lambda words: "".join(word.capitalize() for word in words),
    "snake": "_".join,
    "screaming": lambda words: "_".join(words).upper(),
}


@given(
    _words,
    st.sampled_from(sorted(_spellings)),
    st.sampled_from(sorted(_spellings)),
    st.sampled_from(["", "obj.", "self->", "Foo::", "(", "[", "!", "=", "*"]),
    st.sampled_from(["", "(42)", "();", ",", "]", ".x", "::Bar", ":"]),
)
def test_any_spelling_of_a_name_in_code_meets_any_other_whole(
    words: list[str], written: str, asked: str, before: str, after: str
) -> None:
    """A name written in one spelling, glued to code punctuation, holds the whole-name term a query in another
    spelling asks for, and the query's exact identifier too when the spellings agree (up to case)."""
    identifier = _spellings[written](words)
    indexed, query = set(_lowered(before + identifier + after)), set(_lowered(_spellings[asked](words)))
    assert "".join(words) in indexed & query
    assert identifier.lower() in indexed
