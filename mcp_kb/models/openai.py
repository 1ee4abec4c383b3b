"""The OpenAI-compatible provider: any service answering POST {base_url}/embeddings the way OpenAI does
(OpenAI, Azure OpenAI, Ollama, vLLM, Hugging Face TEI, LM Studio, LiteLLM).

Passages are sent in batches, a few requests at a time; 429, 5xx, timeouts and dropped connections
are retried with exponential backoff and jitter (Retry-After honoured); 401/403/404 and malformed
answers fail at once with what to fix. A query is tried once within the timeout (a search must not
hang on a slow service; it falls back to keyword search) and remembered in a small LRU cache.

Every answer is checked before a vector is used: each input's index exactly once, numbers that are
finite, the dimension the index holds, and no all-zero vector (a service that lies fails the batch,
which is retried next sync, rather than storing wrong vectors in silence).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from ..settings import OpenAISettings
from ..errors import ModelError
from ..lru import BoundedLRU
from ..slices import sliced
from .base import Embedder, ModelIdentity, TokenCounter
from .service import Answer, Limits, by_input, post, refusal, request_headers, service_address

_QUERY_CACHE_SIZE = 256
_ANSWER_BYTES_PER_TEXT = 64 * 1024  # room for a 3,000-number vector written out in full; then refused
_WHAT = "embedding service"
_PROBE = "mcp-kb dimension probe"


class OpenAIEmbedder(Embedder):
    """Vectors from an OpenAI-compatible embeddings endpoint, normalized to unit length."""

    def __init__(self, config: OpenAISettings):
        self.config = config
        self.url = (config.base_url or "").rstrip("/") + "/embeddings"  # validation requires one
        self._client = httpx.Client(timeout=config.timeout, headers=request_headers(config), follow_redirects=False)
        self._dimension: int | None = config.dimensions
        self._queries: BoundedLRU[str, np.ndarray] = BoundedLRU(_QUERY_CACHE_SIZE)

    @property
    def identity(self) -> ModelIdentity:
        """Provider, service address (without credentials), model and dimension: a change in any of
        them rebuilds a KB. The dimension is asked of the service when not configured."""
        if self._dimension is None:
            self._dimension = len(self._request([_PROBE], retries=self.config.max_retries)[0])
        address = service_address(self.config.base_url or "")
        return ModelIdentity(f"openai-compatible {address} {self.config.model}", self._dimension, "")

    def known_identity(self) -> ModelIdentity | None:
        return self.identity if self._dimension is not None else None  # learned from the first answer

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        size = self.config.batch_size
        batches = sliced(texts, size)
        with ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(batches))) as pool:
            parts = list(pool.map(lambda batch: self._request(batch, retries=self.config.max_retries), batches))
        vectors = np.concatenate([self._checked(part) for part in parts])
        self.calls += len(texts)
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        cached = self._queries.get(text)
        if cached is not None:
            return cached
        answer = self._request([text], retries=0)
        if self._dimension is None:  # a search learns it from its own answer: no extra request, no retries
            self._dimension = answer.shape[1]
        vector: np.ndarray = self._checked(answer)[0]
        self._queries.put(text, vector)
        return vector

    def _checked(self, vectors: np.ndarray) -> np.ndarray:
        """Unit-length vectors of the index's dimension, or a ModelError (nothing is stored)."""
        expected = self.identity.dimension
        if vectors.shape[1] != expected:
            if not self.config.dimensions:
                self._dimension = None  # ask again: the next sync then sees a new model and rebuilds
                self._queries.clear()  # vectors of the old model
            raise ModelError(
                f"the embedding service returned {vectors.shape[1]}-dimensional vectors for model "
                f"{self.config.model!r}, but {expected}-dimensional ones before (the index holds those); "
                f"the model behind that name changed or ignores `dimensions`: the next sync rebuilds "
                f"the index for the new vectors"
            )
        if not np.isfinite(vectors).all():
            raise ModelError(
                f"the embedding service returned vectors with NaN or infinite numbers for model {self.config.model!r}"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not norms.all():
            raise ModelError(
                f"the embedding service returned an all-zero vector for input "
                f"{int(np.flatnonzero(norms == 0)[0])} (model {self.config.model!r}): no vector is stored"
            )
        return np.asarray(vectors / norms, dtype=np.float32)

    def _request(self, texts: list[str], retries: int) -> np.ndarray:
        """One batch's vectors in input order; transient failures retried up to `retries` times."""
        body: dict[str, object] = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        if self.config.dimensions:
            body["dimensions"] = self.config.dimensions
        limits = Limits(retries, self.config.timeout, answer_bytes=(len(texts) + 16) * _ANSWER_BYTES_PER_TEXT)
        answer = post(self._client, self.url, body, _WHAT, limits)
        return _vectors(answer, len(texts), self.config)


def _vectors(answer: Answer, count: int, config: OpenAISettings) -> np.ndarray:
    """The answer's vectors in input order, or a ModelError saying what is wrong with it."""
    error = refusal(
        answer, _WHAT, config, f"check base_url (it usually ends in /v1) and that model {config.model!r} exists there"
    )
    if error:
        raise error
    shown = service_address(answer.url)
    try:
        items = _in_order(answer.json(_WHAT)["data"], count)
        with np.errstate(over="ignore"):  # a number past float32 becomes inf, refused by _checked
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise ModelError(
            f"the embedding service at {shown} sent an answer that is not an embeddings response "
            f"for {count} texts ({type(exc).__name__}: {exc}): {answer.excerpt}"
        ) from None
    if vectors.ndim != 2:
        raise ModelError(f"the embedding service at {shown} returned vectors of different lengths")
    return vectors


def _in_order(items: Any, count: int) -> list[Any]:
    """The answer's items by input: each of the `count` indexes exactly once."""
    if not isinstance(items, list) or len(items) != count:
        raise ValueError(
            f"expected a list of {count} embeddings, got "
            f"{len(items) if isinstance(items, list) else type(items).__name__}"
        )
    return by_input([(item["index"], item) for item in items], count)  # none missing: as many as inputs


class OpenAIProvider:
    """provider = "openai" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    embedder = OpenAIEmbedder

    @staticmethod
    def token_counter(config: OpenAISettings) -> TokenCounter:
        """The model's own tokenizer when `tokenizer_path` names it, else a conservative estimate."""
        if not config.tokenizer_path:
            from .estimate import EstimatedTokens

            return EstimatedTokens(config.max_input_tokens)
        from .fastembed_tokenizer import ModelTokenizer

        return ModelTokenizer(Path(config.tokenizer_path), max_tokens=config.max_input_tokens)

    @staticmethod
    def fetch(config: OpenAISettings) -> None:
        return None  # the service holds the model

    @staticmethod
    def source(config: OpenAISettings) -> str:
        return f"the embedding service at {service_address(config.base_url or '')}"
