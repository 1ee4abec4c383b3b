"""Models: embedders, rerankers and token counters behind small interfaces (base.py).

A provider is picked by name from the registries in settings/providers.py (`[embedding] provider`,
`[rerank] provider`) and imported only when used (fastembed takes a second to import). Built in:
fastembed (local ONNX models) and openai (any OpenAI-compatible embeddings service); a new one is
one module with a class like `FastembedProvider` plus one `register` line.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import EMBEDDING_PROVIDERS, RERANK_PROVIDERS
from ..errors import KBError

if TYPE_CHECKING:
    from ..settings import EmbeddingConfig, RerankConfig
    from .base import EmbeddingProvider, Embedder, RerankProvider, Reranker, TokenCounter

__all__ = [
    "fetch_models",
    "model_source",
    "prepare_model_runtimes",
]  # what the core's API (mcp_kb.api) offers from this module

# The built-in providers, named lazily: choosing one never imports another.
EMBEDDING_PROVIDERS.bind("fastembed", "mcp_kb.models.fastembed:FastembedProvider")
EMBEDDING_PROVIDERS.bind("openai", "mcp_kb.models.openai:OpenAIProvider")
RERANK_PROVIDERS.bind("fastembed", "mcp_kb.models.fastembed_rerank:FastembedRerankProvider")
RERANK_PROVIDERS.bind("service", "mcp_kb.models.rerank_service:ServiceRerankProvider")


def embedding_provider(config: EmbeddingConfig) -> EmbeddingProvider:
    provider: EmbeddingProvider = EMBEDDING_PROVIDERS.implementation(config.provider)  # a plugin's, untyped there
    return provider


def rerank_provider(config: RerankConfig) -> RerankProvider:
    provider: RerankProvider = RERANK_PROVIDERS.implementation(config.provider)
    return provider


def create_embedder(config: EmbeddingConfig) -> Embedder:
    """The embedder the settings name (its model loads on first use)."""
    return embedding_provider(config).embedder(config)


def create_reranker(config: RerankConfig) -> Reranker | None:
    """The reranker the settings name, or None when reranking is off."""
    return rerank_provider(config).reranker(config) if config.enabled else None


def load_token_counter(config: EmbeddingConfig) -> TokenCounter:
    """The embedding model's own tokenizer (no model session), or the provider's estimate."""
    return embedding_provider(config).token_counter(config)


def fetch_models(embedding: EmbeddingConfig, rerank: RerankConfig, copy_to: Path | None = None) -> dict[str, Path]:
    """Download the configured local models ahead of time; the folder of each, by role (a service's
    model has none). `copy_to`: also copy the embedding model's files there, for machines without network."""
    folders = {"embedding": embedding_provider(embedding).fetch(embedding)}
    if copy_to and folders["embedding"] is None:
        raise KBError(
            f"--to copies a local model, but [embedding] provider is {embedding.provider!r}: "
            f"the service holds the model"
        )
    if rerank.enabled:
        folders["rerank"] = rerank_provider(rerank).fetch(rerank)
    if copy_to:
        model_folder = folders["embedding"]
        assert model_folder is not None  # refused above
        try:
            shutil.copytree(model_folder, copy_to, dirs_exist_ok=True)  # copies what links point at
        except OSError as exc:
            raise KBError(f"cannot copy the model into {copy_to}: {exc}") from exc
    return {role: folder for role, folder in folders.items() if folder is not None}


def model_source(config: EmbeddingConfig) -> str:
    """Where the embedding model is read from (a folder, a cache, not yet on this machine, or a service)."""
    return embedding_provider(config).source(config)


def prepare_model_runtimes() -> None:
    """What a command asks of the numeric and model runtimes, before any loads:
    - numpy's BLAS (OpenBLAS) runs on one thread unless the user set OPENBLAS_NUM_THREADS: mcp-kb's products are a
      query against a few candidates, too small to share out, and each idle OpenBLAS worker spins for a while after
      numpy loads (0.1 s of CPU per command on two cores, as much as a no-op sync's own work);
    - model runtimes warn on stderr per call; a server's stderr stays clean, and a failed load is said once, in our
      own error. fastembed logs through loguru, which models/fastembed_load.py turns off as it loads (turned off here,
      every command would import loguru and that module)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("ORT_LOG_SEVERITY_LEVEL", "3")
    for name in ("huggingface_hub", "fastembed", "onnxruntime"):
        logging.getLogger(name).setLevel(logging.ERROR)
