"""quantize = "int8" for the fastembed provider: the configured model's checked int8 copy (quantize.py makes and
keeps it), and the settings that load it, or the fp32 model's, with one warning, when there is no copy."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..settings import FastembedSettings
from .fastembed_load import FASTEMBED_LOCK, check_model_folder, fetch_model, described_model
from .quantize import CHECK_TEXTS, Int8Copy, int8_copy

log = logging.getLogger(__name__)


def checked_int8_copy(config: FastembedSettings) -> tuple[Path, Int8Copy]:
    """The configured (fp32) model's folder, and its checked int8 copy, made under the cache when missing
    (quantize.py)."""
    from fastembed.common.utils import define_cache_dir

    fp32 = config.model_copy(update={"quantize": "none"})
    source = Path(config.model_path) if config.model_path else fetch_model(fp32)
    with FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        if config.model_path:
            check_model_folder(TextEmbedding, config)  # a missing or wrong folder, said with its fix
        _, description = described_model(TextEmbedding, config)
        cache = Path(config.cache_dir) if config.cache_dir else Path(define_cache_dir())  # int8_copy creates it
        return source, int8_copy(source, description.model_file, cache, lambda folder: _check_vectors(fp32, folder))


def int8_settings(config: FastembedSettings, copy: Int8Copy) -> FastembedSettings:
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
    with FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        model = TextEmbedding(
            config.model, specific_model_path=str(folder), threads=config.threads, local_files_only=True
        )
    return np.asarray(list(model.embed(list(CHECK_TEXTS))), dtype=np.float32)
