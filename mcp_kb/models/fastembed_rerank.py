"""The fastembed provider's cross-encoder reranker (`[rerank] provider = "fastembed"`), loaded once on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ModelError
from ..settings import FastembedRerankSettings
from .base import Reranker
from .fastembed_load import FASTEMBED_LOCK, model_files

if TYPE_CHECKING:
    from fastembed.rerank.cross_encoder import TextCrossEncoder


class FastEmbedReranker(Reranker):
    """fastembed's TextCrossEncoder, loaded once on first use."""

    def __init__(self, config: FastembedRerankSettings):
        self.config = config
        self._model: TextCrossEncoder | None = None

    def score(self, query: str, passages: list[str]) -> list[float]:
        with FASTEMBED_LOCK:
            if self._model is None:
                self._model = _load_cross_encoder(self.config)
        try:
            return [float(s) for s in self._model.rerank(query, passages)]
        except Exception as exc:
            raise ModelError(f"reranking failed with model {self.config.model}: {exc}") from exc


def _load_cross_encoder(config: FastembedRerankSettings) -> TextCrossEncoder:
    fix = (
        "set [rerank] model_path to a local folder holding the reranking model's model.onnx, tokenizer.json and "
        "tokenizer_config.json, or give this machine access to the model hub so fastembed can download it"
    )
    if config.model_path and not Path(config.model_path, "model.onnx").is_file():
        raise ModelError(
            f"reranking model folder {config.model_path} has no model.onnx; {fix}, or set [rerank] enabled = false"
        )
    with FASTEMBED_LOCK:
        from fastembed.rerank.cross_encoder import TextCrossEncoder

        try:
            return TextCrossEncoder(config.model, specific_model_path=config.model_path)
        except Exception as exc:
            raise ModelError(
                f"cannot load reranking model {config.model!r}: {type(exc).__name__}: {exc}; "
                f"{fix}, or set [rerank] enabled = false"
            ) from exc


def fetch_reranker(config: FastembedRerankSettings) -> Path:
    """Download the reranking model into fastembed's cache unless it is there; its folder."""
    return Path(model_files(_load_cross_encoder(config))._model_dir)


class FastembedRerankProvider:
    """[rerank] provider = "fastembed" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    reranker = FastEmbedReranker
    fetch = staticmethod(fetch_reranker)
