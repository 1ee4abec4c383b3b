"""The OpenAI-compatible provider: any service answering POST {base_url}/embeddings the way OpenAI does
(OpenAI, Azure OpenAI, Ollama, vLLM, Hugging Face TEI, LM Studio, LiteLLM).

Passages are sent in batches, a few requests at a time; 429, 5xx, timeouts and dropped connections
are retried with exponential backoff and jitter (Retry-After honoured); 401/403/404 and malformed
answers fail at once with what to fix. A query is tried once within the timeout (a search must not
hang on a slow service; it falls back to keyword search) and remembered in a small LRU cache.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np

from ..config import OpenAISettings
from ..errors import ConfigError, ModelError
from .base import Embedder, ModelIdentity, TokenCounter

log = logging.getLogger(__name__)

_QUERY_CACHE_SIZE = 256
_BACKOFF_FIRST, _BACKOFF_MAX = 0.5, 30.0  # seconds
_RETRY_AFTER_MAX = 120.0  # a longer Retry-After is waited for this long at most, then retried
_RETRIED_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504}
_PROBE = "mcp-kb dimension probe"


class OpenAIEmbedder(Embedder):
    """Vectors from an OpenAI-compatible embeddings endpoint, normalized to unit length."""

    def __init__(self, config: OpenAISettings):
        self.config = config
        self.url = config.base_url.rstrip("/") + "/embeddings"
        self._client = httpx.Client(timeout=config.timeout, headers=_headers(config))
        self._dimension: int | None = config.dimensions
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def identity(self) -> ModelIdentity:
        """Provider, service address (without credentials), model and dimension: a change in any of
        them rebuilds a KB. The dimension is asked of the service when not configured."""
        if self._dimension is None:
            self._dimension = len(self._request([_PROBE], retries=self.config.max_retries)[0])
        return ModelIdentity(f"openai-compatible {service_address(self.config)} {self.config.model}",
                             self._dimension, "")

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        size = self.config.batch_size
        batches = [texts[i:i + size] for i in range(0, len(texts), size)]
        with ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(batches))) as pool:
            parts = list(pool.map(lambda batch: self._request(batch, retries=self.config.max_retries), batches))
        vectors = self._checked(np.concatenate(parts))
        self.calls += len(texts)
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            if text in self._queries:
                self._queries.move_to_end(text)
                return self._queries[text]
        answer = self._request([text], retries=0)
        if self._dimension is None:  # a search learns it from its own answer: no extra request, no retries
            self._dimension = answer.shape[1]
        vector = self._checked(answer)[0]
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > _QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector

    def _checked(self, vectors: np.ndarray) -> np.ndarray:
        """Unit-length vectors of the index's dimension, or a ModelError (nothing is stored)."""
        expected = self.identity.dimension
        if vectors.shape[1] != expected:
            if not self.config.dimensions:
                self._dimension = None  # ask again: the next sync then sees a new model and rebuilds
                with self._lock:
                    self._queries.clear()  # vectors of the old model
            raise ModelError(f"the embedding service returned {vectors.shape[1]}-dimensional vectors for model "
                             f"{self.config.model!r}, but {expected}-dimensional ones before (the index holds those); "
                             f"the model behind that name changed or ignores `dimensions`: the next sync rebuilds "
                             f"the index for the new vectors")
        if not np.isfinite(vectors).all():
            raise ModelError(f"the embedding service returned vectors with NaN or infinite numbers for model "
                             f"{self.config.model!r}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)

    def _request(self, texts: list[str], retries: int) -> np.ndarray:
        """One batch's vectors in input order; transient failures retried up to `retries` times."""
        body = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        if self.config.dimensions:
            body["dimensions"] = self.config.dimensions
        attempt = 0
        while True:
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TransportError as exc:  # timeouts, refused or dropped connections
                if attempt >= retries:
                    raise ModelError(f"embedding service at {self.url} unreachable after {attempt + 1} "
                                     f"attempt(s): {type(exc).__name__}: {exc}") from exc
                _pause(attempt, None)
            else:
                if response.status_code not in _RETRIED_STATUSES or attempt >= retries:
                    return _vectors(response, len(texts), self.config, self.url)
                log.info("embedding service answered %s; retry %d of %d", response.status_code, attempt + 1,
                         retries)
                _pause(attempt, response.headers.get("retry-after"))
            attempt += 1


def _vectors(response: httpx.Response, count: int, config: OpenAISettings, url: str) -> np.ndarray:
    if response.status_code in (401, 403):
        raise ModelError(f"the embedding service at {url} refused the credentials ({response.status_code}): "
                         f"check the key in ${config.api_key_env or '(api_key_env is not set)'}")
    if response.status_code == 404:
        raise ModelError(f"the embedding service at {url} answered 404: check base_url (it usually ends in /v1) "
                         f"and that model {config.model!r} exists there ({_excerpt(response)})")
    if response.status_code >= 400:
        raise ModelError(f"the embedding service at {url} answered {response.status_code}: {_excerpt(response)}")
    try:
        items = sorted(response.json()["data"], key=lambda item: item["index"])
        vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"the embedding service at {url} sent an answer that is not an embeddings response "
                         f"({type(exc).__name__}: {exc}): {_excerpt(response)}") from exc
    if vectors.ndim != 2 or len(vectors) != count:
        raise ModelError(f"the embedding service at {url} returned {len(vectors)} vectors for {count} texts")
    return vectors


def _pause(attempt: int, retry_after: str | None) -> None:
    """Exponential backoff with full jitter, or the server's Retry-After when it gives one."""
    wait = _retry_after_seconds(retry_after)
    if wait is None:
        wait = random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** attempt))
    time.sleep(min(wait, _RETRY_AFTER_MAX))


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds or as an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _headers(config: OpenAISettings) -> dict[str, str]:
    try:
        return config.request_headers()
    except ConfigError as exc:  # a key that is not set (or not fit for a header) fails the model, not the config
        raise ModelError(str(exc)) from None


def service_address(config: OpenAISettings) -> str:
    """The base URL without any user:password part, fit for status and the index's state."""
    parts = urlsplit(config.base_url.rstrip("/"))
    if not parts.hostname:
        return config.base_url
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


def _excerpt(response: httpx.Response) -> str:
    return " ".join(response.text.split())[:200] or "(empty body)"


class OpenAIProvider:
    """provider = "openai" (registered in config.py)."""

    embedder = OpenAIEmbedder

    @staticmethod
    def token_counter(config: OpenAISettings) -> TokenCounter:
        """The model's own tokenizer when `tokenizer_path` names it, else a conservative estimate."""
        if not config.tokenizer_path:
            from .estimate import EstimatedTokens

            return EstimatedTokens(config.max_input_tokens)
        from .fastembed import ModelTokenizer

        return ModelTokenizer(Path(config.tokenizer_path), max_tokens=config.max_input_tokens)

    @staticmethod
    def fetch(config: OpenAISettings) -> None:
        return None  # the service holds the model

    @staticmethod
    def source(config: OpenAISettings) -> str:
        return f"the embedding service at {service_address(config)}"
