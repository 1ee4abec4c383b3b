"""The interfaces of the models (embedder, reranker, token counter) and of the providers that make them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # vectors are numpy arrays; a server answers its handshake before numpy loads
    import numpy as np


@dataclass(frozen=True)
class ModelIdentity:
    """What an index's vectors depend on; a change means the index must be rebuilt."""

    name: str
    dimension: int
    file_hash: str  # sha256 of the model's weights, or "" when unknown

    def fingerprint(self) -> dict[str, object]:
        """What an index records of the model that embedded it; a query must be embedded by the same."""
        return {"name": self.name, "dimension": self.dimension, "file_hash": self.file_hash}

    def differs_from(self, indexed: Mapping[str, object] | None) -> str:
        """Why queries embedded by this model cannot search an index embedded by `indexed` ("" when they can,
        or when the index records no model yet)."""
        if indexed is None or indexed == self.fingerprint():
            return ""
        if (indexed.get("name"), indexed.get("dimension")) == (self.name, self.dimension):
            return (
                f"the index holds vectors of another file of {self.name} (weights "
                f"{str(indexed.get('file_hash'))[:12]}, here {self.file_hash[:12]})"
            )
        return (
            f"the index holds vectors of {indexed.get('name')} ({indexed.get('dimension')}-d) and queries here "
            f"are embedded with {self.name} ({self.dimension}-d)"
        )


def query_model_differs(embedder: Embedder, indexed: Mapping[str, object] | None) -> str:
    """Why queries embedded by `embedder` cannot search an index embedded by `indexed` ("" when they can, or
    when that is not known without asking a service, or no model can be had: a search reports that)."""
    from ..errors import ModelError

    try:
        identity = embedder.known_identity()
    except ModelError:
        return ""
    return identity.differs_from(indexed) if identity else ""


class Embedder(ABC):
    """Turns texts into unit-length float32 vectors. Subclasses implement `identity` and `embed_batch`."""

    calls: int = 0  # texts embedded so far, for sync reports and tests

    @property
    @abstractmethod
    def identity(self) -> ModelIdentity: ...

    @abstractmethod
    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for passages, shape (len(texts), dimension)."""

    def known_identity(self) -> ModelIdentity | None:
        """The identity when it can be had without a request to a service (None: not yet known)."""
        return self.identity

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_batch([text])[0]  # numpy's stubs type an indexed row as Any
        return vector

    def release(self) -> None:
        """Let go of a loaded model's memory; the next call loads it again. Nothing to do for a service."""

    def serve_queries(self) -> None:
        """Set the model up, before its first use, for a process that answers queries for long rather than
        embedding batches: memory before batch speed. Nothing to do for a service."""

    def release_batches(self) -> None:
        """Let go of what a sync's batches took in a process that serves queries (their own copy of the model);
        the query model stays. Nothing to do for a service."""


class Reranker(ABC):
    """Scores (query, passage) pairs; higher is more relevant."""

    @abstractmethod
    def score(self, query: str, passages: list[str]) -> list[float]: ...


class TokenCounter(Protocol):
    """The embedding model's tokenizer, as far as chunking and search need it."""

    max_tokens: int  # where the model truncates its input

    def count(self, texts: list[str]) -> list[int]: ...

    def head(self, text: str, n_tokens: int) -> str: ...

    def tail(self, text: str, n_tokens: int) -> str:
        """A suffix of `text` of about n_tokens tokens."""

    def unknown_share(self, text: str) -> float: ...


class EmbeddingProvider(Protocol):
    """What a registered embedding provider offers for its settings (config.EMBEDDING_PROVIDERS)."""

    def embedder(self, config: Any) -> Embedder: ...

    def token_counter(self, config: Any) -> TokenCounter: ...

    def fetch(self, config: Any) -> Path | None:
        """Download the model ahead of time; its folder, or None when there is nothing to fetch (a service)."""

    def source(self, config: Any) -> str:
        """Where the model is read from, for `status`; without the network."""


class RerankProvider(Protocol):
    """What a registered rerank provider offers for its settings (config.RERANK_PROVIDERS)."""

    def reranker(self, config: Any) -> Reranker: ...

    def fetch(self, config: Any) -> Path | None: ...
