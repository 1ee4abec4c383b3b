"""Models: embedders, rerankers and token counters behind small interfaces (base.py).

This module is the one factory that picks a provider from the settings; providers are imported
only when used (fastembed takes a second to import). Today fastembed is the only provider.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import EmbeddingConfig, RerankConfig
    from .base import Embedder, Reranker, TokenCounter


def create_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder the settings name (loaded on first use)."""
    from .fastembed import FastEmbedder

    return FastEmbedder(config)


def create_reranker(config: RerankConfig) -> Reranker | None:
    """The cross-encoder the settings name, or None when reranking is off."""
    if not config.enabled:
        return None
    from .fastembed import FastEmbedReranker

    return FastEmbedReranker(config)


def load_token_counter(config: EmbeddingConfig) -> TokenCounter:
    """The embedding model's own tokenizer (no model session), cached per config."""
    from .fastembed import load_tokenizer

    return load_tokenizer(config)


def fetch_models(embedding: EmbeddingConfig, rerank: RerankConfig) -> dict[str, Path]:
    """Download the configured models ahead of time; the folder of each, by role."""
    from .fastembed import fetch_model, fetch_reranker

    folders = {"embedding": fetch_model(embedding)}
    if rerank.enabled:
        folders["rerank"] = fetch_reranker(rerank)
    return folders


def model_source(config: EmbeddingConfig) -> str:
    """Where the embedding model is read from (a folder, a cache, or not yet on this machine)."""
    from .fastembed import model_source as source

    return source(config)


def quiet_model_logs() -> None:
    """Model runtimes warn on stderr per call; a server's stderr stays clean."""
    from .fastembed import quiet_model_logs as quiet

    quiet()
