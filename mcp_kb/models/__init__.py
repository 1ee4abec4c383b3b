"""Models: embedders, rerankers and token counters behind small interfaces (base.py).

This module is the one factory that picks a provider from the settings; providers are imported
only when used (fastembed takes a second to import). Providers: fastembed (local ONNX models) and
openai (any OpenAI-compatible embeddings service); a new provider is one module and a line here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import EmbeddingConfig, RerankConfig
    from .base import Embedder, Reranker, TokenCounter


def create_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder the settings name (loaded on first use)."""
    if config.provider == "openai":
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(config)
    from .fastembed import FastEmbedder

    return FastEmbedder(config)


def create_reranker(config: RerankConfig) -> Reranker | None:
    """The cross-encoder the settings name, or None when reranking is off."""
    if not config.enabled:
        return None
    from .fastembed import FastEmbedReranker

    return FastEmbedReranker(config)


def load_token_counter(config: EmbeddingConfig) -> TokenCounter:
    """The embedding model's own tokenizer (no model session), cached per config; for a service
    without `tokenizer_path`, a conservative estimate."""
    if config.provider == "openai":
        if not config.tokenizer_path:
            from .estimate import EstimatedTokens

            return EstimatedTokens(config.max_input_tokens)
        from .fastembed import ModelTokenizer

        return ModelTokenizer(Path(config.tokenizer_path), max_tokens=config.max_input_tokens)
    from .fastembed import load_tokenizer

    return load_tokenizer(config)


def fetch_models(embedding: EmbeddingConfig, rerank: RerankConfig) -> dict[str, Path]:
    """Download the configured local models ahead of time; the folder of each, by role."""
    from .fastembed import fetch_model, fetch_reranker

    folders = {"embedding": fetch_model(embedding)} if embedding.provider == "fastembed" else {}
    if rerank.enabled:
        folders["rerank"] = fetch_reranker(rerank)
    return folders


def model_source(config: EmbeddingConfig) -> str:
    """Where the embedding model is read from (a folder, a cache, not yet on this machine, or a service)."""
    if config.provider == "openai":
        from .openai import service_address

        return f"the embedding service at {service_address(config)}"
    from .fastembed import model_source as source

    return source(config)


def quiet_model_logs() -> None:
    """Model runtimes warn on stderr per call; a server's stderr stays clean."""
    from .fastembed import quiet_model_logs as quiet

    quiet()
