"""The reranking-service provider: the top candidates scored by a service teams already run.

api = "cohere": `POST {base_url}/rerank` with {model, query, documents, top_n, return_documents: false},
answered with {results: [{index, relevance_score}]} — Jina, Cohere, Infinity, vLLM. api = "tei":
Hugging Face Text Embeddings Inference, `POST {base_url}/rerank` with {query, texts, truncate: true},
answered with [{index, score}]. Passages go in batches of `batch_size`; a batch is retried on 429, 5xx
and dropped connections up to `max_retries`. One call (all its batches and retries) ends within
`timeout` however the service answers: dripped bodies are cut, a Retry-After that would outlast it is
not waited for (the service is paused instead), redirects are not followed. An answer that does not
score every passage exactly once with a finite number is refused: search then keeps its fused order.
"""

from __future__ import annotations

import math
import time
from typing import Any

import httpx

from ..settings import ServiceRerankSettings
from ..errors import ModelError
from ..slices import sliced
from .base import Reranker
from .service import Limits, by_input, post, refusal, request_headers, service_address
from .pause import PauseAfterFailure

_WHAT = "rerank service"
_PAUSE_AFTER_FAILURE = 30.0  # seconds searches skip a service that just failed, instead of each waiting for it
_ANSWER_BYTES_PER_PASSAGE = 1024  # an index and a score take ~50


class ServiceReranker(Reranker):
    def __init__(self, config: ServiceRerankSettings):
        self.config = config
        self.url = (config.base_url or "").rstrip("/") + "/rerank"
        self.shown = service_address(self.url)  # for messages: without credentials
        self._client: httpx.Client | None = None  # made by the first call: a key not set fails that call only
        self.pause = PauseAfterFailure[str](_PAUSE_AFTER_FAILURE)  # why the service last failed

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=self.config.timeout, headers=request_headers(self.config), follow_redirects=False
            )
        return self._client

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Scores in passage order. A service that failed is not asked again for a pause: while it is down,
        one search waits for its timeout, not every search."""
        if why := self.pause.recent():
            raise ModelError(f"{why} (not asked again for {self.pause.seconds:g} s after a failure)")
        size = self.config.batch_size
        scores: list[float] = []
        deadline = time.monotonic() + self.config.timeout
        try:
            for batch in sliced(passages, size):
                scores += self._batch(query, batch, deadline)
        except ModelError as exc:
            self.pause.failed(str(exc))
            raise
        self.pause.succeeded()
        return scores

    def _batch(self, query: str, passages: list[str], deadline: float) -> list[float]:
        limits = Limits(
            self.config.max_retries,
            self.config.timeout,
            answer_bytes=(len(passages) + 16) * _ANSWER_BYTES_PER_PASSAGE,
            deadline=deadline,
        )
        answer = post(self.client, self.url, self._body(query, passages), _WHAT, limits)
        error = refusal(
            answer,
            _WHAT,
            self.config,
            "check base_url (the service's root, or its /v1 for the cohere api)"
            + (f" and that model {self.config.model!r} exists there" if self.config.model else ""),
        )
        if error:
            raise error
        try:
            pairs = _scored(answer.json(_WHAT), self.config.api)
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                f"the {_WHAT} at {self.shown} sent an answer that is not a rerank response "
                f"({type(exc).__name__}: {exc}): {answer.excerpt}"
            ) from None
        return _in_order(pairs, len(passages), self.shown)

    def _body(self, query: str, passages: list[str]) -> dict[str, object]:
        if self.config.api == "tei":
            return {"query": query, "texts": passages, "truncate": True}
        return {
            "model": self.config.model,
            "query": query,
            "documents": passages,
            "top_n": len(passages),
            "return_documents": False,
        }


def _scored(answer: Any, api: str) -> list[tuple[Any, float]]:
    """(index, score) pairs from either answer shape."""
    items = answer if api == "tei" else answer["results"]
    if not isinstance(items, list):
        raise TypeError(f"expected a list of scores, got {type(items).__name__}")
    key = "score" if api == "tei" else "relevance_score"
    return [(item["index"], _score(item[key])) for item in items]


def _score(value: Any) -> float:
    if type(value) not in (int, float):
        raise TypeError(f"a score is {str(value)[:20]!r}, not a number")
    try:
        return float(value)  # a whole number too large for a float: OverflowError
    except OverflowError:
        raise TypeError(f"a score is {str(value)[:20]}…, too large for a number") from None


def _in_order(pairs: list[tuple[Any, float]], count: int, url: str) -> list[float]:
    """The scores in passage order; every passage scored once, with a finite number."""
    try:
        scores = by_input(pairs, count)
    except ValueError as exc:
        raise ModelError(f"the {_WHAT} at {url} sent scores that cannot be used: {exc}") from None
    for index, score in enumerate(scores):
        if score is not None and not math.isfinite(score):
            raise ModelError(
                f"the {_WHAT} at {url} sent a score for passage {index} of {count} that is not a finite number"
            )
    missing = scores.count(None)
    if missing:
        raise ModelError(f"the {_WHAT} at {url} scored {count - missing} of {count} passages")
    return [float(score) for score in scores if score is not None]


class ServiceRerankProvider:
    """[rerank] provider = "service" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    reranker = ServiceReranker

    @staticmethod
    def fetch(config: ServiceRerankSettings) -> None:
        return None  # the service holds the model
