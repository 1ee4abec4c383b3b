"""Keyword analysis shared by indexing and querying, so Chinese and technical tokens match.

LanceDB's full-text index splits on whitespace only (then lower-cases, stems and drops stop
words); this module decides what the words are:
- runs of CJK characters become overlapping bigrams plus single characters (年假 is found inside
  2024年年假申请流程; 请 in a query still meets 申请). Unigrams on the query side too lifted
  CMRC2018 keyword nDCG@10 from 0.975 to 0.983, and they are the partial-match fallback: a query
  whose words are absent (请假 against 年假申请) still meets passages sharing its characters;
- a technical token is kept whole and also split into its parts (API-V2.1 → api-v2.1 … api v 2 1,
  getUserInfo → getuserinfo get user info, snake_case_names → snake_case_names snake case names);
- so is each identifier inside it, cut at punctuation other than `_` (api.getUserById(42) →
  getuserbyid, Foo::bar_baz → bar_baz), with its name once more, underscores dropped: get_user_by_id,
  getUserById and GetUserByID meet as one whole name, getuserbyid. An exact spelling still ranks
  first in BM25, holding a term the other spellings lack (get_user_by_id) or the shared one twice
  (getUserById: whole and name).
"""

from __future__ import annotations

import re

from ..text import CJK_CHARACTERS

# Bump when indexed terms change: the next sync then rebuilds the full-text column by itself.
ANALYZER_VERSION = 3  # 2: title and heading path also in a field column of their own; 3: identifiers in code
_TOKEN = re.compile(rf"[{CJK_CHARACTERS}]+|[^\s{CJK_CHARACTERS}]+")
_IS_CJK = re.compile(rf"[{CJK_CHARACTERS}]")
_IDENTIFIER = re.compile(r"\w+")  # a run of letters, digits and underscores: a name in code
_WORD_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+", re.UNICODE)
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’「」『』（），。；：！？、…*#|=~^"


def keyword_terms(text: str) -> str:
    """Text (a chunk or a query) as the full-text index sees it: terms separated by spaces."""
    terms: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        terms.extend(_cjk_terms(token) if _IS_CJK.match(token) else _word_terms(token))
    return " ".join(terms)


def cjk_words(text: str) -> list[str]:
    """The two-character words of text's CJK runs: a passage holding none of a query's matched it only by
    single characters (a partial match)."""
    return [term for run in _TOKEN.findall(text) if _IS_CJK.match(run) for term in _cjk_terms(run) if len(term) == 2]


def _cjk_terms(run: str) -> list[str]:
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    return bigrams + list(run)


def _word_terms(token: str) -> list[str]:
    token = token.strip(_EDGE_PUNCTUATION)
    if not token:
        return []
    parts = _WORD_PART.findall(token)
    if len(parts) <= 1 and parts == [token]:
        return [token]
    return [token, *_identifier_terms(token), *parts] if any(ch.isalnum() for ch in token) else []


def _identifier_terms(token: str) -> list[str]:
    """Each identifier in a token whole (unless it is the token or a plain word), then, if it has parts, its name
    without underscores: getUserById gives that term twice, the margin by which it outranks get_user_by_id."""
    terms = []
    for identifier in _IDENTIFIER.findall(token):
        parts = _WORD_PART.findall(identifier)
        if parts and parts != [identifier] and identifier != token:
            terms.append(identifier)
        if len(parts) > 1:
            terms.append(identifier.replace("_", ""))
    return terms
