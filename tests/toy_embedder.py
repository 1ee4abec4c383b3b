"""A third embedding provider, written as a plugin would be: one module, registered with one line.

`[embedding] provider = "toy"` hashes words into a small vector: deterministic and instant, and
(unlike the real model) blind to meaning, which is enough to prove the provider seam.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import numpy as np
from pydantic import Field

from mcp_kb.settings import EmbeddingConfig
from mcp_kb.models.base import Embedder, ModelIdentity
from mcp_kb.models.estimate import EstimatedTokens


class ToySettings(EmbeddingConfig):
    provider: Literal["toy"] = "toy"
    model: str = "words-hashed"
    dimension: int = Field(32, ge=4, le=1024)


class ToyEmbedder(Embedder):
    def __init__(self, settings: ToySettings) -> None:
        self.settings = settings

    @property
    def identity(self) -> ModelIdentity:
        return ModelIdentity(f"toy {self.settings.model}", self.settings.dimension, "")

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls += len(texts)
        vectors = np.zeros((len(texts), self.settings.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.settings.dimension] += 1
            vectors[row, 0] += 1e-3  # never the zero vector
        unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return unit


class ToyProvider:
    embedder = ToyEmbedder

    @staticmethod
    def token_counter(settings: ToySettings) -> EstimatedTokens:
        return EstimatedTokens(512)

    @staticmethod
    def fetch(settings: ToySettings) -> None:
        return None

    @staticmethod
    def source(settings: ToySettings) -> str:
        return "computed in this process (no files)"


def register() -> None:
    """What an installed plugin's entry point names (`[project.entry-points.mcp_kb] toy = "toy_embedder:register"`)."""
    from mcp_kb.settings import EMBEDDING_PROVIDERS

    EMBEDDING_PROVIDERS.register("toy", ToySettings, ToyProvider)
