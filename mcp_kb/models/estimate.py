"""A conservative token count for a model whose tokenizer is not at hand (an embedding service
without `tokenizer_path`): chunks sized with it never exceed what the model reads.

Every CJK character, every punctuation mark and every started run of three letters or digits counts
as one token. Real tokenizers give about 1.3 tokens per English word and 1 to 1.5 per Chinese
character, so this overcounts English by about half: chunks come out smaller than `max_tokens`
asks, never larger.
"""

from __future__ import annotations

import re

from ..text import CJK_CHARACTERS

_PIECE = re.compile(rf"[{CJK_CHARACTERS}]|[^\W_{CJK_CHARACTERS}]{{1,3}}|[^\w\s]|_", re.UNICODE)


class EstimatedTokens:
    """The TokenCounter of models/base.py, by estimate."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens

    def count(self, texts: list[str]) -> list[int]:
        return [len(_PIECE.findall(text)) for text in texts]

    def head(self, text: str, n_tokens: int) -> str:
        pieces = list(_PIECE.finditer(text))
        return text if len(pieces) <= n_tokens else text[: pieces[n_tokens].start()] if n_tokens else ""

    def tail(self, text: str, n_tokens: int) -> str:
        pieces = list(_PIECE.finditer(text))
        return text if len(pieces) <= n_tokens else text[pieces[-n_tokens].start() :] if n_tokens else ""

    def unknown_share(self, text: str) -> float:
        return 0.0  # a service's model is assumed to read the text; keyword search still backs it up
