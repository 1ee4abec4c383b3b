"""The fastembed provider: embedder, cross-encoder reranker and tokenizer. The only module that loads models
through fastembed or reads its internals (a server runs the same model without it: onnx_session.py)."""

from __future__ import annotations

import gc
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
from loguru import logger

from ..settings import (
    ENV_FASTEMBED_CACHE,
    ENV_MODEL,
    ENV_MODEL_PATH,
    FastembedRerankSettings,
    FastembedSettings,
    environment,
)
from ..digest import model_file_sha256
from ..errors import ModelError, UnknownModelError
from ..heap import return_free_heap
from .base import Embedder, ModelIdentity, Reranker
from .identities import RememberedModel, remember_model, remembered_model
from .onnx_session import OnnxSession, Pooling, Recipe, truncation_length
from .quantize import CHECK_TEXTS, Int8Copy, int8_copy
from .pause import PauseAfterFailure

if TYPE_CHECKING:  # fastembed itself takes a second to import: it is imported where used
    from fastembed import TextEmbedding
    from fastembed.common.model_description import BaseModelDescription, DenseModelDescription
    from fastembed.rerank.cross_encoder import TextCrossEncoder
    from fastembed.text.text_embedding_base import TextEmbeddingBase
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

# fastembed logs every failed try to find or fetch a model as an ERROR (four lines before ours, through loguru);
# the ModelError raised here says what failed and how to fix it, so those lines are only noise.
logger.disable("fastembed")

_RETRY_LOAD_AFTER_SECONDS = 300
# fastembed imports modules lazily (some on the first embed call); two threads doing that at once
# can deadlock in Python's import machinery (seen: a warm-up thread and a search thread). Every
# first touch of fastembed happens under this lock.
_FASTEMBED_LOCK = threading.RLock()

_FIX = (
    f"set [embedding] model_path (or {ENV_MODEL_PATH}) to a folder made by `mcp-kb model fetch --to FOLDER` on "
    "a machine with network (the model's ONNX file under the name fastembed loads it from, tokenizer.json and "
    "tokenizer_config.json), or give this machine access to the model hub so fastembed can download it"
)


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
        with _FASTEMBED_LOCK:
            if self._model is None:
                # A failed load (e.g. ~40 s of download retries) is not retried on every request.
                if failure := self._failure.recent():
                    raise failure
                try:
                    model = _load_text_embedding(self.settings, arena=self._arena)
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
        with _FASTEMBED_LOCK:
            if self._settings is None and self.config.quantize == "int8":
                self._fp32_folder, self._int8 = _int8_copy(self.config)
                self._settings = _int8_settings(self.config, self._int8)
            return self._settings or self.config

    @property
    def identity(self) -> ModelIdentity:
        """Name ("(int8)" added for a quantized copy), dimension and file hash, read without starting an inference
        session."""
        if self._identity is None:
            remembered = _remembered(self.config)
            self._identity = remembered.identity if remembered else self._worked_out_identity()
        return self._identity

    def _worked_out_identity(self) -> ModelIdentity:
        described = self._model or _load_text_embedding(self.settings, lazy=True)
        inner = _files(described)
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
            remember_model(memory_key(self.config), identity, weights, fp32_folder, recipe_of(described))
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
                [
                    vector
                    for start in range(0, len(ordered), size)
                    for vector in session.embed(ordered[start : start + size])
                ]
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
        with _FASTEMBED_LOCK:
            if self._batches is not None or self._batches_failed:
                return self._batches or served
        try:  # loaded outside the lock, which every query takes: searches go on meanwhile
            made = OnnxSession(served.recipe, self.config.threads)
        except ModelError as exc:  # e.g. no memory for a second copy: the served one embeds, on one core
            log.warning("%s; this sync embeds on one core", exc)
            with _FASTEMBED_LOCK:
                self._batches_failed = True
            return served
        with _FASTEMBED_LOCK:
            self._batches = self._batches or made  # one sync at a time (the writer lock): kept by the first anyway
            return self._batches

    def release_batches(self) -> None:
        with _FASTEMBED_LOCK:
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
        with _FASTEMBED_LOCK:
            if not self._session_tried and self._model is None:
                self._session_tried = True
                remembered = _remembered(self.config)
                if remembered is None or remembered.recipe is None or _use_cuda(self.config):
                    return None
                try:
                    # One thread per query unless configured: a server answers many queries at once.
                    self._session = OnnxSession(remembered.recipe, self.config.threads or 1, arena=False)
                except ModelError as exc:
                    log.warning("%s; embedding through fastembed instead", exc)
            return self._session

    def release(self) -> None:
        with _FASTEMBED_LOCK:
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
        inner = _files(loaded)
        found = recipes.get(type(inner))
        described = inner.model_description
        if found is None or described.additional_files or getattr(inner, "ONNX_OUTPUT_NAMES", None) is not None:
            return None
        return Recipe(Path(inner._model_dir).resolve(), described.model_file, *found)
    except (ImportError, AttributeError) as exc:
        log.info("queries are embedded through fastembed: %s", exc)
        return None


def memory_key(config: FastembedSettings) -> str:
    """What a local model is remembered by across processes (identities.py): where its weights come from, with
    quantize = "int8" the onnxruntime that quantized it (a refused copy is tried again with another), and the
    fastembed whose way of running it a server copies (recipe_of: another fastembed is asked again)."""
    where = config.model_dump(mode="json", include={"model", "model_path", "cache_dir", "quantize"})
    quantizer = _installed_version("onnxruntime", "onnxruntime-gpu") if config.quantize == "int8" else ""
    return json.dumps(
        [where, environment(ENV_FASTEMBED_CACHE), quantizer, _installed_version("fastembed")], sort_keys=True
    )


def _installed_version(*distributions: str) -> str:
    """The version of the first of `distributions` installed, read from its package metadata (importing
    onnxruntime takes a quarter of a second, fastembed more); "" when none is."""
    from importlib.metadata import PackageNotFoundError, version

    for distribution in distributions:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return ""


def _remembered(config: FastembedSettings) -> RememberedModel | None:
    return remembered_model(memory_key(config))


class FastEmbedReranker(Reranker):
    """fastembed's TextCrossEncoder, loaded once on first use."""

    def __init__(self, config: FastembedRerankSettings):
        self.config = config
        self._model: TextCrossEncoder | None = None

    def score(self, query: str, passages: list[str]) -> list[float]:
        with _FASTEMBED_LOCK:
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
    with _FASTEMBED_LOCK:
        from fastembed.rerank.cross_encoder import TextCrossEncoder

        try:
            return TextCrossEncoder(config.model, specific_model_path=config.model_path)
        except Exception as exc:
            raise ModelError(
                f"cannot load reranking model {config.model!r}: {type(exc).__name__}: {exc}; "
                f"{fix}, or set [rerank] enabled = false"
            ) from exc


def _load_text_embedding(config: FastembedSettings, lazy: bool = False, arena: bool = True) -> TextEmbedding:
    """Load fastembed's model from the local folder, the cache, or (one attempt) the hub; one clear error.

    fastembed on its own retries a download three times with pauses (about 40 s without a network,
    on every search); here the cache is tried first (no network at all), then one download.
    """
    with _FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        if config.model_path:
            _check_model_folder(TextEmbedding, config)
        try:
            return _text_embedding(TextEmbedding, config, lazy, arena)
        except UnknownModelError:
            raise
        except ModelError:
            if config.model_path:
                raise
        _download_once(TextEmbedding, config)
        return _text_embedding(TextEmbedding, config, lazy, arena)


def _int8_copy(config: FastembedSettings) -> tuple[Path, Int8Copy]:
    """The configured (fp32) model's folder, and its checked int8 copy, made under the cache when missing
    (quantize.py)."""
    from fastembed.common.utils import define_cache_dir

    fp32 = config.model_copy(update={"quantize": "none"})
    source = Path(config.model_path) if config.model_path else fetch_model(fp32)
    with _FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        if config.model_path:
            _check_model_folder(TextEmbedding, config)  # a missing or wrong folder, said with its fix
        _, description = _description(TextEmbedding, config)
        cache = Path(config.cache_dir) if config.cache_dir else Path(define_cache_dir())  # int8_copy creates it
        return source, int8_copy(source, description.model_file, cache, lambda folder: _check_vectors(fp32, folder))


def _int8_settings(config: FastembedSettings, copy: Int8Copy) -> FastembedSettings:
    """Settings loading the int8 copy; the model's own with a model quantized already, and the fp32 ones, with
    one warning, when there is no copy."""
    fp32 = config.model_copy(update={"quantize": "none"})
    if copy.outcome == "as_is":
        log.info('[embedding] quantize = "int8": %s', copy.why)
        return fp32  # the same weights as quantize = "none": switching rebuilds nothing
    if copy.folder is None:
        log.warning(
            '[embedding] quantize = "int8": %s; embedding with the fp32 model (set quantize = "none" to '
            "do so without this warning)",
            copy.why,
        )
        return fp32
    log.info("embedding with the int8 copy of %s in %s (%s)", config.model, copy.folder, copy.why)
    return config.model_copy(update={"model_path": str(copy.folder)})


def _check_vectors(config: FastembedSettings, folder: Path) -> np.ndarray:
    """The vectors of quantize.CHECK_TEXTS by the model in `folder`."""
    with _FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        model = TextEmbedding(
            config.model, specific_model_path=str(folder), threads=config.threads, local_files_only=True
        )
    return np.asarray(list(model.embed(list(CHECK_TEXTS))), dtype=np.float32)


def _check_model_folder(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> None:
    """The configured folder holds the file fastembed loads the configured model from, or a clear error."""
    folder = Path(config.model_path or "")  # asked only when a folder is configured
    _, description = _description(text_embedding_class, config)
    if (folder / description.model_file).is_file():
        return
    others = sorted(str(path.relative_to(folder)) for path in folder.rglob("*.onnx")) if folder.is_dir() else []
    if others:  # a folder of another model: the name and the folder disagree
        fitting = _models_loaded_from(text_embedding_class, others)
        log.info("fastembed loads these models from %s: %s", ", ".join(others), ", ".join(fitting) or "none")
        guess = [name for name in fitting if name.rsplit("/", 1)[-1].lower() in folder.name.lower()]
        raise ModelError(
            f"embedding model folder {folder} holds another model than {config.model!r} (which loads from "
            f"{description.model_file}; the folder has {', '.join(others[:3])}): set {ENV_MODEL} to the folder's "
            f"model{f' ({guess[0]}?)' if len(guess) == 1 else ' (--verbose lists those it may be)'}, or "
            f"{ENV_MODEL_PATH} to a folder of {config.model}"
        )
    if not folder.is_dir():
        raise ModelError(f"embedding model folder {folder} does not exist; {_FIX}")
    raise ModelError(
        f"embedding model folder {folder} has no {description.model_file} (the file fastembed loads "
        f"{config.model} from); {_FIX}"
    )


def _models_loaded_from(text_embedding_class: type[TextEmbedding], files: list[str]) -> list[str]:
    """The supported models fastembed loads from one of `files` (paths within a model folder)."""
    return sorted(
        description.model
        for model_class in text_embedding_class.EMBEDDINGS_REGISTRY
        for description in model_class._list_supported_models()
        if description.model_file in files
    )


def _text_embedding(
    text_embedding_class: type[TextEmbedding], config: FastembedSettings, lazy: bool, arena: bool = True
) -> TextEmbedding:
    """The model from the configured folder or fastembed's cache, never from the network."""
    try:
        return text_embedding_class(
            config.model,
            cache_dir=config.cache_dir,
            threads=config.threads,
            specific_model_path=config.model_path,
            lazy_load=lazy,
            local_files_only=True,
            cuda=_use_cuda(config),
            enable_cpu_mem_arena=arena,
        )
    except ValueError as exc:
        if "not supported" in str(exc):
            raise UnknownModelError(f"unknown embedding model {config.model!r}: {exc}") from exc
        raise ModelError(f"cannot load embedding model {config.model!r}: {exc}; {_FIX}") from exc
    except Exception as exc:
        raise ModelError(f"cannot load embedding model {config.model!r}: {type(exc).__name__}: {exc}; {_FIX}") from exc


def _use_cuda(config: FastembedSettings) -> bool:
    """Whether to run on the GPU: `auto` when onnxruntime offers CUDA, `cuda` with a warning if not."""
    if config.device == "cpu":
        return False
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        return True
    if config.device == "cuda":
        log.warning(
            '[embedding] device = "cuda", but onnxruntime offers no CUDA provider (replace onnxruntime '
            "with onnxruntime-gpu and install a CUDA runtime; see docs/models.md); running on the CPU"
        )
    return False


def _download_once(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> None:
    """One download attempt of the model's files into fastembed's cache."""
    from fastembed.common.utils import define_cache_dir

    model_class, description = _description(text_embedding_class, config)
    try:
        model_class.download_model(description, str(define_cache_dir(config.cache_dir)), retries=1)
    except Exception as exc:
        raise ModelError(
            f"cannot download embedding model {config.model!r} (one attempt: {type(exc).__name__}: {exc}); {_FIX}"
        ) from exc


def _description(
    text_embedding_class: type[TextEmbedding], config: FastembedSettings
) -> tuple[type[TextEmbeddingBase], DenseModelDescription]:
    """fastembed's model class and description of the configured model."""
    for model_class in text_embedding_class.EMBEDDINGS_REGISTRY:
        for description in model_class._list_supported_models():
            if description.model.lower() == config.model.lower():
                return model_class, description
    raise UnknownModelError(f"unknown embedding model {config.model!r}; fastembed lists the supported names")


class _ModelFiles(Protocol):
    """What fastembed's model classes know of their files; their common base declares none of it."""

    _model_dir: Path
    model_description: BaseModelDescription


def _files(loaded: TextEmbedding | TextCrossEncoder) -> _ModelFiles:
    """The model class a TextEmbedding or TextCrossEncoder wraps, which knows its files."""
    return cast(_ModelFiles, loaded.model)


class ModelTokenizer:
    """The embedding model's own tokenizer, untruncated: chunk sizes are measured with it.

    Its limit and unknown token come from tokenizer_config.json at once; the tokenizer itself (17 MB of JSON
    for the multilingual default) loads at its first use, so a sync with nothing to chunk never loads it.
    Sent to a parsing process, it travels as its folder and loads there."""

    def __init__(self, model_dir: Path, max_tokens: int | None = None):
        self._model_dir = model_dir
        self._tokenizer: Tokenizer | None = None
        self._loading = threading.Lock()
        if not model_dir.is_dir():  # a folder named wrong, or not mounted: say that, not which file it lacks
            raise ModelError(f"the model folder {model_dir} does not exist; {_FIX}")
        try:
            if not (model_dir / "tokenizer.json").is_file():
                raise ValueError("there is no tokenizer.json")
            settings = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
            self.max_tokens = truncation_length(settings)
        except (OSError, ValueError, AttributeError) as exc:
            raise ModelError(f"cannot read the tokenizer in {model_dir}: {exc}; {_FIX}") from exc
        if max_tokens is not None:  # a service may read fewer tokens than the tokenizer's own limit
            self.max_tokens = min(self.max_tokens, max_tokens)
        unknown = settings.get("unk_token") or "[UNK]"
        self.unknown_token = unknown["content"] if isinstance(unknown, dict) else unknown  # AddedToken form

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None, "_loading": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _loading=threading.Lock())

    @property
    def _loaded(self) -> Tokenizer:
        """The tokenizer, loaded at the first call that needs it."""
        if self._tokenizer is None:
            with self._loading:
                if self._tokenizer is None:
                    self._tokenizer = self._load()
        return self._tokenizer

    def _load(self) -> Tokenizer:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(self._model_dir / "tokenizer.json"))
        except Exception as exc:
            raise ModelError(f"cannot read the tokenizer in {self._model_dir}: {exc}; {_FIX}") from exc
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def count(self, texts: list[str]) -> list[int]:
        if len(texts) == 1:  # encode_batch's thread hand-off costs more than one text takes
            return [len(self._loaded.encode(texts[0], add_special_tokens=False).ids)]
        encodings = self._loaded.encode_batch(texts, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def head(self, text: str, n_tokens: int) -> str:
        """The longest prefix of `text` holding at most n_tokens tokens."""
        offsets = self._loaded.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= n_tokens:
            return text
        return text[: offsets[n_tokens][0]]

    def tail(self, text: str, n_tokens: int) -> str:
        """About the last n_tokens tokens of `text` (a suffix; it may begin inside a word)."""
        text = text[-n_tokens * 12 :]  # a token is rarely longer than 12 characters; spare the encoder
        offsets = self._loaded.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= n_tokens:
            return text
        return text[offsets[-n_tokens][0] :]

    def unknown_share(self, text: str) -> float:
        """Share of tokens the model cannot read (e.g. Chinese for an English-only model)."""
        tokens = self._loaded.encode(text, add_special_tokens=False).tokens
        return sum(token == self.unknown_token for token in tokens) / len(tokens) if tokens else 0.0


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # what ModelTokenizer must have
_OPTIONAL_TOKENIZER_FILES = ("config.json", "special_tokens_map.json")


def tokenizer_dir(config: FastembedSettings) -> Path:
    """A folder holding the model's tokenizer: the configured model folder, the model in fastembed's
    cache, or else its tokenizer files alone (downloaded once, under a megabyte: chunking a file
    must not wait for the whole model)."""
    if config.model_path:
        return Path(config.model_path)
    remembered = _remembered(config)
    if remembered:  # found in fastembed's cache before, without importing fastembed
        return remembered.folder
    with _FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        cached = _cached_model_dir(TextEmbedding, config)
        if cached:
            return cached
        _, description = _description(TextEmbedding, config)
        if not description.sources.hf:  # served as an archive only: the tokenizer comes with the model
            return fetch_model(config)
        return _download_tokenizer(description.sources.hf, config)


def _cached_model_dir(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> Path | None:
    """The model's folder in fastembed's cache, or None when it was never downloaded."""
    try:
        return Path(_files(_text_embedding(text_embedding_class, config, lazy=True))._model_dir)
    except UnknownModelError:
        raise
    except ModelError:
        return None


def _download_tokenizer(repo: str, config: FastembedSettings) -> Path:
    """The tokenizer files of the model's hub repository, in a folder of fastembed's cache."""
    from fastembed.common.utils import define_cache_dir
    from huggingface_hub import constants, hf_hub_download, model_info
    from huggingface_hub.errors import EntryNotFoundError

    folder = Path(define_cache_dir(config.cache_dir), "tokenizers", repo.replace("/", "--"))
    if all((folder / name).is_file() for name in _TOKENIZER_FILES):
        return folder
    try:
        # One request first: a file download retries a refused connection for about 25 s.
        revision = model_info(repo, timeout=constants.HF_HUB_ETAG_TIMEOUT).sha
        for name in _TOKENIZER_FILES + _OPTIONAL_TOKENIZER_FILES:
            try:
                hf_hub_download(repo, name, revision=revision, local_dir=folder)
            except EntryNotFoundError:
                if name in _TOKENIZER_FILES:
                    raise
    except Exception as exc:
        raise ModelError(
            f"the tokenizer of embedding model {config.model!r} (it sizes chunks and answers) is not on "
            f"this machine and downloading it failed ({type(exc).__name__}: {exc}); {_FIX}"
        ) from exc
    return folder


def fetch_model(config: FastembedSettings) -> Path:
    """Download the embedding model into fastembed's cache unless it is there; its (fp32) folder."""
    return Path(_files(_load_text_embedding(config, lazy=True))._model_dir)


def prepare_model(config: FastembedSettings) -> Path:
    """`mcp-kb model fetch`: the model downloaded and, with quantize = "int8", its int8 copy made now rather than
    at the first sync; the fp32 folder (what `--to` copies: each machine makes its own copy)."""
    folder = fetch_model(config)
    if config.quantize == "int8":
        _ = FastEmbedder(config).settings  # finding the settings makes the copy
    return folder


def fetch_reranker(config: FastembedRerankSettings) -> Path:
    """Download the reranking model into fastembed's cache unless it is there; its folder."""
    return Path(_files(_load_cross_encoder(config))._model_dir)


def model_source(config: FastembedSettings) -> str:
    """Where the embedding model is read from, found without the network."""
    # Said without hashing the weights to find the copy: each KB's status line names the model its index holds.
    int8 = (
        (
            '; quantize = "int8": embedded with an int8 copy of it, made and checked on first use (fp32 when '
            "refused, with a warning)"
        )
        if config.quantize == "int8"
        else ""
    )
    return _fp32_source(config) + int8


def _fp32_source(config: FastembedSettings) -> str:
    if config.model_path:
        return f"folder {config.model_path}"
    remembered = _remembered(config)
    if remembered:
        return f"fastembed cache {remembered.folder}"
    with _FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        try:
            cached = _cached_model_dir(TextEmbedding, config)
        except UnknownModelError as exc:
            return str(exc)
    if cached:
        return f"fastembed cache {cached}"
    return "not on this machine yet (`mcp-kb model fetch` downloads it)"


_TOKENIZERS: dict[FastembedSettings, ModelTokenizer] = {}


def load_tokenizer(config: FastembedSettings) -> ModelTokenizer:
    """The tokenizer of the configured model, cached per config."""
    with _FASTEMBED_LOCK:
        if config not in _TOKENIZERS:
            _TOKENIZERS[config] = ModelTokenizer(tokenizer_dir(config))
        return _TOKENIZERS[config]


class FastembedProvider:
    """provider = "fastembed" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    embedder = FastEmbedder
    token_counter = staticmethod(load_tokenizer)
    fetch = staticmethod(prepare_model)
    source = staticmethod(model_source)


class FastembedRerankProvider:
    """[rerank] provider = "fastembed" (bound in models/__init__.py, its settings registered in settings/providers.py)."""

    reranker = FastEmbedReranker
    fetch = staticmethod(fetch_reranker)
