"""The fastembed provider (`[embedding] provider = "fastembed"`): its embedder, a fastembed TextEmbedding; in a
server, the same model run without fastembed when how fastembed runs it is known (onnx_session.py). Where the
model comes from is fastembed_load.py's, its int8 copy fastembed_int8.py's, its tokenizer fastembed_tokenizer.py's,
its reranker fastembed_rerank.py's: only these modules load models through fastembed or read its internals."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..digest import model_file_sha256
from ..errors import ModelError
from ..heap import return_free_heap
from ..settings import FastembedSettings
from ..slices import sliced
from .base import Embedder, ModelIdentity
from .fastembed_device import use_cuda
from .fastembed_int8 import checked_int8_copy, int8_settings
from .fastembed_load import (
    FASTEMBED_LOCK,
    fetch_model,
    load_text_embedding,
    memory_key,
    model_files,
    model_source,
    remembered_model_of,
)
from .fastembed_tokenizer import load_tokenizer
from .identities import RememberedModel, remember_model
from .onnx_session import OnnxSession, Pooling, Recipe
from .pause import PauseAfterFailure
from .quantize import Int8Copy

if TYPE_CHECKING:  # fastembed itself takes a second to import: it is imported where used
    from fastembed import TextEmbedding

log = logging.getLogger(__name__)

_RETRY_LOAD_AFTER_SECONDS = 300


class FastEmbedder(Embedder):
    """A fastembed TextEmbedding, loaded once on first use (thread-safe); in a server (serve_queries), the same
    model run without fastembed when how fastembed runs it is known (onnx_session.py)."""

    def __init__(self, config: FastembedSettings):
        self.config = config
        self._arena = True  # onnxruntime's memory arena (serve_queries)
        self._model: TextEmbedding | None = None
        self._settings: FastembedSettings | None = None
        self._int8: Int8Copy | None = None  # with quantize = "int8": what became of the copy
        self._fp32_folder: Path | None = None  # with quantize = "int8": the configured model's own folder
        self._identity: ModelIdentity | None = None
        self._session: OnnxSession | None = None  # serving: the model run without fastembed (onnx_session.py)
        self._batches: OnnxSession | None = None  # serving: a sync's batches, on every core, until it ends
        self._batches_failed = False  # that session would not load: this sync embeds on the served one
        self._session_tried = False  # a session that failed to load is not tried again: fastembed serves
        self._failure = PauseAfterFailure[ModelError](_RETRY_LOAD_AFTER_SECONDS)
        self.calls = 0

    @property
    def model(self) -> TextEmbedding:
        with FASTEMBED_LOCK:
            if self._model is None:
                # A failed load (e.g. ~40 s of download retries) is not retried on every request.
                if failure := self._failure.recent():
                    raise failure
                try:
                    model = load_text_embedding(self.settings, arena=self._arena)
                    list(model.query_embed("warm up"))  # triggers fastembed's remaining lazy imports
                except ModelError as exc:
                    self._failure.failed(exc)
                    raise
                except Exception as exc:
                    raise ModelError(f"embedding model {self.config.model} failed its first run: {exc}") from exc
                self._model = model
            return self._model

    @property
    def settings(self) -> FastembedSettings:
        """The settings the model loads with: with quantize = "int8", those of its int8 copy (made on first use)."""
        with FASTEMBED_LOCK:
            if self._settings is None and self.config.quantize == "int8":
                self._fp32_folder, self._int8 = checked_int8_copy(self.config)
                self._settings = int8_settings(self.config, self._int8)
            return self._settings or self.config

    @property
    def identity(self) -> ModelIdentity:
        """Name ("(int8)" added for a quantized copy), dimension and file hash, read without starting an inference
        session."""
        if self._identity is None:
            remembered = remembered_model_of(self.config)
            self._identity = remembered.identity if remembered else self._worked_out_identity()
        return self._identity

    def _worked_out_identity(self) -> ModelIdentity:
        described = self._model or load_text_embedding(self.settings, lazy=True)
        inner = model_files(described)
        onnx_file = Path(inner._model_dir) / inner.model_description.model_file
        name = f"{self.config.model} (int8)" if self.settings.quantize == "int8" else self.config.model
        identity = ModelIdentity(
            name, int(described.embedding_size), model_file_sha256(onnx_file) if onnx_file.is_file() else ""
        )
        if identity.file_hash and (self._int8 is None or self._int8.lasting):
            fp32_folder = self._fp32_folder or Path(inner._model_dir)
            # a copy's weights and its source's, and the tokenizer a server runs without fastembed
            tokenizer = Path(inner._model_dir) / "tokenizer.json"
            weights = sorted(
                {
                    onnx_file,
                    fp32_folder / inner.model_description.model_file,
                    *([tokenizer] if tokenizer.is_file() else []),
                }
            )
            remember_model(
                memory_key(self.config), RememberedModel(identity, fp32_folder, recipe_of(described)), weights
            )
        return identity

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        # Texts of similar length share a batch: each batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered, size = [texts[i] for i in order], self.config.batch_size
        try:
            session = self._batch_session()
            vectors = (
                [vector for batch in sliced(ordered, size) for vector in session.embed(batch)]
                if session
                else list(self.model.embed(ordered, batch_size=size))
            )
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"embedding failed with model {self.config.model}: {exc}") from exc
        self.calls += len(texts)
        result = np.empty((len(texts), len(vectors[0])), dtype=np.float32)
        result[order] = vectors
        return result

    def embed_query(self, text: str) -> np.ndarray:
        try:
            session = self._served_session()
            vector = session.embed([text])[0] if session else next(iter(self.model.query_embed(text)))
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"query embedding failed with model {self.config.model}: {exc}") from exc
        return np.asarray(vector, dtype=np.float32)

    def serve_queries(self) -> None:
        # Without onnxruntime's memory arena, all-MiniLM-L6-v2 int8 held 165 MB after 300 queries instead of 299,
        # queries as fast (2.0 ms); batches of a sync ran 10-20 % slower, so a sync keeps the arena.
        self._arena = False

    def _batch_session(self) -> OnnxSession | None:
        """In a server, a sync's batches run as `mcp-kb sync` runs them: every core (or `[embedding] threads`) and
        onnxruntime's arena, on a session of their own, while queries keep their one-thread session (a sync on the
        served session embedded on one core: 1.67x the CLI's time on two cores, ~10x on 16). None: through fastembed."""
        served = self._served_session()
        if served is None:
            return None
        with FASTEMBED_LOCK:
            if self._batches is not None or self._batches_failed:
                return self._batches or served
        try:  # loaded outside the lock, which every query takes: searches go on meanwhile
            made = OnnxSession(served.recipe, self.config.threads)
        except ModelError as exc:  # e.g. no memory for a second copy: the served one embeds, on one core
            log.warning("%s; this sync embeds on one core", exc)
            with FASTEMBED_LOCK:
                self._batches_failed = True
            return served
        with FASTEMBED_LOCK:
            self._batches = self._batches or made  # one sync at a time (the writer lock): kept by the first anyway
            return self._batches

    def release_batches(self) -> None:
        with FASTEMBED_LOCK:
            held, self._batches, self._batches_failed = self._batches, None, False
        if held is not None:  # a sync still embedding holds its own reference until its batch ends
            del held
            return_free_heap()

    def _served_session(self) -> OnnxSession | None:
        """In a server, the model run without importing fastembed, when how fastembed runs it is remembered
        (recipe_of); None: through fastembed (not remembered yet, another runtime, a GPU, or the session failed to
        load, which is said once)."""
        if self._arena:
            return None
        with FASTEMBED_LOCK:
            if not self._session_tried and self._model is None:
                self._session_tried = True
                remembered = remembered_model_of(self.config)
                if remembered is None or remembered.recipe is None or use_cuda(self.config):
                    return None
                try:
                    # One thread per query unless configured: a server answers many queries at once.
                    self._session = OnnxSession(remembered.recipe, self.config.threads or 1, arena=False)
                except ModelError as exc:
                    log.warning("%s; embedding through fastembed instead", exc)
            return self._session

    def release(self) -> None:
        with FASTEMBED_LOCK:
            if self._model is None and self._session is None:
                return
            self._model = self._session = self._batches = None
            self._session_tried = False
        gc.collect()  # the session sits in reference cycles of fastembed's objects
        return_free_heap()


def recipe_of(loaded: TextEmbedding) -> Recipe | None:
    """How fastembed runs the model it loaded, for onnx_session.py: its pooling and normalization are those of
    its model class. Only the classes whose input and output are OnnxTextModel's plain ones, by exact class (a
    subclass may change either), and only a model in one file; None for any other, or a fastembed laid out
    otherwise: served through fastembed."""
    try:
        from fastembed.text.onnx_embedding import OnnxTextEmbedding
        from fastembed.text.pooled_embedding import PooledEmbedding
        from fastembed.text.pooled_normalized_embedding import PooledNormalizedEmbedding

        recipes: dict[type, tuple[Pooling, bool]] = {
            OnnxTextEmbedding: ("cls", True),
            PooledEmbedding: ("mean", False),
            PooledNormalizedEmbedding: ("mean", True),
        }
        inner = model_files(loaded)
        found = recipes.get(type(inner))
        described = inner.model_description
        if found is None or described.additional_files or getattr(inner, "ONNX_OUTPUT_NAMES", None) is not None:
            return None
        return Recipe(Path(inner._model_dir).resolve(), described.model_file, *found)
    except (ImportError, AttributeError) as exc:
        log.info("queries are embedded through fastembed: %s", exc)
        return None


def prepare_model(config: FastembedSettings) -> Path:
    """`mcp-kb model fetch`: the model downloaded and, with quantize = "int8", its int8 copy made now rather than
    at the first sync; the fp32 folder (what `--to` copies: each machine makes its own copy)."""
    folder = fetch_model(config)
    if config.quantize == "int8":
        _ = FastEmbedder(config).settings  # finding the settings makes the copy
    return folder


class FastembedProvider:
    """provider = "fastembed" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    embedder = FastEmbedder
    token_counter = staticmethod(load_tokenizer)
    fetch = staticmethod(prepare_model)
    source = staticmethod(model_source)
