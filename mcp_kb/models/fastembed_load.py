"""Where the fastembed provider's embedding model comes from: the configured folder, fastembed's cache or (one
attempt) the hub, each failure said once with its fix; what a model is remembered by across processes
(identities.py), and where it is read from, said without the network. Every first touch of fastembed takes
FASTEMBED_LOCK."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from loguru import logger

from ..errors import ModelError, UnknownModelError
from ..settings import ENV_FASTEMBED_CACHE, ENV_MODEL, ENV_MODEL_PATH, FastembedSettings, environment
from .fastembed_device import use_cuda
from .identities import RememberedModel, remembered_model

if TYPE_CHECKING:  # fastembed itself takes a second to import: it is imported where used
    from fastembed import TextEmbedding
    from fastembed.common.model_description import BaseModelDescription, DenseModelDescription
    from fastembed.rerank.cross_encoder import TextCrossEncoder
    from fastembed.text.text_embedding_base import TextEmbeddingBase

log = logging.getLogger(__name__)

# fastembed logs every failed try to find or fetch a model as an ERROR (four lines before ours, through loguru);
# the ModelError raised here says what failed and how to fix it, so those lines are only noise.
logger.disable("fastembed")

# fastembed imports modules lazily (some on the first embed call); two threads doing that at once
# can deadlock in Python's import machinery (seen: a warm-up thread and a search thread). Every
# first touch of fastembed happens under this lock.
FASTEMBED_LOCK = threading.RLock()

MODEL_FIX = (
    f"set [embedding] model_path (or {ENV_MODEL_PATH}) to a folder made by `mcp-kb model fetch --to FOLDER` on "
    "a machine with network (the model's ONNX file under the name fastembed loads it from, tokenizer.json and "
    "tokenizer_config.json), or give this machine access to the model hub so fastembed can download it"
)


def load_text_embedding(config: FastembedSettings, lazy: bool = False, arena: bool = True) -> TextEmbedding:
    """Load fastembed's model from the local folder, the cache, or (one attempt) the hub; one clear error.

    fastembed on its own retries a download three times with pauses (about 40 s without a network,
    on every search); here the cache is tried first (no network at all), then one download.
    """
    with FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        if config.model_path:
            check_model_folder(TextEmbedding, config)
        try:
            return _text_embedding(TextEmbedding, config, lazy, arena)
        except UnknownModelError:
            raise
        except ModelError:
            if config.model_path:
                raise
        _download_once(TextEmbedding, config)
        return _text_embedding(TextEmbedding, config, lazy, arena)


def check_model_folder(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> None:
    """The configured folder holds the file fastembed loads the configured model from, or a clear error."""
    folder = Path(config.model_path or "")  # asked only when a folder is configured
    _, description = described_model(text_embedding_class, config)
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
        raise ModelError(f"embedding model folder {folder} does not exist; {MODEL_FIX}")
    raise ModelError(
        f"embedding model folder {folder} has no {description.model_file} (the file fastembed loads "
        f"{config.model} from); {MODEL_FIX}"
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
            cuda=use_cuda(config),
            enable_cpu_mem_arena=arena,
        )
    except ValueError as exc:
        if "not supported" in str(exc):
            raise UnknownModelError(f"unknown embedding model {config.model!r}: {exc}") from exc
        raise ModelError(f"cannot load embedding model {config.model!r}: {exc}; {MODEL_FIX}") from exc
    except Exception as exc:
        raise ModelError(
            f"cannot load embedding model {config.model!r}: {type(exc).__name__}: {exc}; {MODEL_FIX}"
        ) from exc


def _download_once(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> None:
    """One download attempt of the model's files into fastembed's cache."""
    from fastembed.common.utils import define_cache_dir

    model_class, description = described_model(text_embedding_class, config)
    try:
        model_class.download_model(description, str(define_cache_dir(config.cache_dir)), retries=1)
    except Exception as exc:
        raise ModelError(
            f"cannot download embedding model {config.model!r} (one attempt: {type(exc).__name__}: {exc}); {MODEL_FIX}"
        ) from exc


def described_model(
    text_embedding_class: type[TextEmbedding], config: FastembedSettings
) -> tuple[type[TextEmbeddingBase], DenseModelDescription]:
    """fastembed's model class and description of the configured model."""
    for model_class in text_embedding_class.EMBEDDINGS_REGISTRY:
        for description in model_class._list_supported_models():
            if description.model.lower() == config.model.lower():
                return model_class, description
    raise UnknownModelError(f"unknown embedding model {config.model!r}; fastembed lists the supported names")


class ModelFiles(Protocol):
    """What fastembed's model classes know of their files; their common base declares none of it."""

    _model_dir: Path
    model_description: BaseModelDescription


def model_files(loaded: TextEmbedding | TextCrossEncoder) -> ModelFiles:
    """The model class a TextEmbedding or TextCrossEncoder wraps, which knows its files."""
    return cast(ModelFiles, loaded.model)


def fetch_model(config: FastembedSettings) -> Path:
    """Download the embedding model into fastembed's cache unless it is there; its (fp32) folder."""
    return Path(model_files(load_text_embedding(config, lazy=True))._model_dir)


def cached_model_dir(text_embedding_class: type[TextEmbedding], config: FastembedSettings) -> Path | None:
    """The model's folder in fastembed's cache, or None when it was never downloaded."""
    try:
        return Path(model_files(_text_embedding(text_embedding_class, config, lazy=True))._model_dir)
    except UnknownModelError:
        raise
    except ModelError:
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


def remembered_model_of(config: FastembedSettings) -> RememberedModel | None:
    return remembered_model(memory_key(config))


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
    remembered = remembered_model_of(config)
    if remembered:
        return f"fastembed cache {remembered.folder}"
    with FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        try:
            cached = cached_model_dir(TextEmbedding, config)
        except UnknownModelError as exc:
            return str(exc)
    if cached:
        return f"fastembed cache {cached}"
    return "not on this machine yet (`mcp-kb model fetch` downloads it)"
