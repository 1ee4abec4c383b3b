"""Where the fastembed provider runs its embedding model: the GPU when `[embedding] device` allows it and
onnxruntime offers CUDA, else the CPU."""

from __future__ import annotations

import logging

from ..settings import FastembedSettings

log = logging.getLogger(__name__)


def use_cuda(config: FastembedSettings) -> bool:
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
