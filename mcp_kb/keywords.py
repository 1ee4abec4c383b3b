"""Keyword analysis shared by indexing and querying, so Chinese and technical tokens match.

LanceDB's full-text index splits on whitespace only (then lower-cases, stems and drops stop
words); this module decides what the words are:
- runs of CJK characters become overlapping bigrams, plus single characters in the index
  so a one-character query still finds something (年假 is found inside 2024年年假申请流程);
- a technical token is kept whole and also split into its parts (API-V2.1 → api-v2.1 api v2 1,
  getUserInfo → getuserinfo get user info, snake_case_names → snake case names).
"""

from __future__ import annotations

import re

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\s{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")
_WORD_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+", re.UNICODE)
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’「」『』（），。；：！？、…*#|=~^"


def index_terms(text: str) -> str:
    """The text as the full-text index should see it."""
    return " ".join(_terms(text, for_query=False))


def query_terms(text: str) -> str:
    """The query as the full-text search should see it."""
    return " ".join(_terms(text, for_query=True))


def _terms(text: str, for_query: bool) -> list[str]:
    terms: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if _IS_CJK.match(token):
            terms.extend(_cjk_terms(token, for_query))
        else:
            terms.extend(_word_terms(token))
    return terms


def _cjk_terms(run: str, for_query: bool) -> list[str]:
    if len(run) == 1:
        return [run]
    bigrams = [run[i:i + 2] for i in range(len(run) - 1)]
    return bigrams if for_query else bigrams + list(run)


def _word_terms(token: str) -> list[str]:
    token = token.strip(_EDGE_PUNCTUATION)
    if not token:
        return []
    parts = _WORD_PART.findall(token)
    if len(parts) <= 1 and parts == [token]:
        return [token]
    return [token, *parts] if any(ch.isalnum() for ch in token) else []
