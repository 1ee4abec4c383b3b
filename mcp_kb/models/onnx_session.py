"""A fastembed model's ONNX file run without fastembed, for a server that only embeds queries.

Importing fastembed takes 0.3 s of CPU and 36 MB (its image, sparse and late-interaction models, Pillow) that a
server never uses; this runs the same file with `tokenizers` and `onnxruntime` alone. Running one model two ways is
a decision kept in two places only: fastembed.py reads the `Recipe` off fastembed's model class when fastembed
loads the model (and identities.py remembers it beside the model's identity), and this module applies it as
fastembed does (fastembed.common.preprocessor_utils.load_tokenizer, OnnxTextModel.onnx_embed, its pooling).
tests/models/test_onnx_session.py holds the two equal on 1,000 passages and fails naming this module when they part.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ModelError

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

Pooling = Literal["cls", "mean"]


@dataclass(frozen=True)
class Recipe:
    """How fastembed turns a model's output into vectors: the file it loads, the pooling, the normalization."""

    folder: Path  # what fastembed loads: the model's folder, or its int8 copy's
    model_file: str
    pooling: Pooling
    normalize: bool

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "folder": str(self.folder)}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Recipe:  # json.loads of the identities file
        pooling = record["pooling"]
        if pooling not in ("cls", "mean"):
            raise ValueError(f"unknown pooling {pooling!r}")
        return cls(Path(record["folder"]), str(record["model_file"]), pooling, bool(record["normalize"]))


class OnnxSession:
    """The recipe's model on the CPU: texts in, vectors out, as fastembed would give them."""

    def __init__(self, recipe: Recipe, threads: int | None = None, arena: bool = True):
        self.recipe = recipe
        try:
            self._tokenizer = _padded_tokenizer(recipe.folder)
            self._session = _inference_session(recipe.folder / recipe.model_file, threads, arena)
        except Exception as exc:
            raise ModelError(
                f"cannot load the embedding model in {recipe.folder / recipe.model_file}: {type(exc).__name__}: {exc}"
            ) from exc
        self._inputs = {node.name for node in self._session.get_inputs()}

    def embed(self, texts: list[str]) -> np.ndarray:
        """One float32 vector per text, from one run of the model (the texts are padded to the longest)."""
        # one text (a query) is encoded in this thread: encode_batch's hand-off to its threads costs more
        encoded = [self._tokenizer.encode(texts[0])] if len(texts) == 1 else self._tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encoded], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encoded], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        output = np.asarray(self._session.run(None, feed)[0])
        pooled = _pooled(output, mask, self.recipe.pooling)
        return (_normalized(pooled) if self.recipe.normalize else pooled).astype(np.float32, copy=False)


def _pooled(output: np.ndarray, mask: np.ndarray, pooling: Pooling) -> np.ndarray:
    if output.ndim == 2:  # the model pools itself
        return output
    if pooling == "cls":
        return output[:, 0]
    # The mean of the real tokens' vectors, summed in float64 as fastembed does.
    summed = np.sum(output, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
    mean: np.ndarray = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
    return mean


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(
        vectors.astype(np.float32) if vectors.dtype == np.float16 else vectors, axis=1, keepdims=True
    )
    unit: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return unit


def _padded_tokenizer(folder: Path) -> Tokenizer:
    """The model's tokenizer set up as fastembed sets it up: truncated where tokenizer_config.json says, the
    special tokens of special_tokens_map.json added, padded to the longest text of a batch."""
    from tokenizers import AddedToken, Tokenizer

    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config = _json_or_empty(folder / "config.json")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=truncation_length(settings),
        direction=settings.get("truncation_side") or truncation.get("direction", "right"),
    )
    for token in _special_tokens(_json_or_empty(folder / "special_tokens_map.json")):
        tokenizer.add_special_tokens([AddedToken(**token) if isinstance(token, dict) else token])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or settings.get("pad_token")
    if pad_token is None:
        raise ValueError(f"no pad token in {folder}")
    pad_id = padding.get("pad_id", config.get("pad_token_id"))
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token)
    if pad_id is None:
        raise ValueError(f"no id for the pad token {pad_token!r} in {folder}")
    tokenizer.enable_padding(
        direction=settings.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id,
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=pad_token,
        pad_to_multiple_of=padding.get("pad_to_multiple_of"),
        length=None,
    )
    return tokenizer


def _special_tokens(tokens_map: Mapping[str, object]) -> list[str | dict[str, Any]]:  # tokenizers' AddedToken form
    """The tokens a special tokens map declares (`additional_special_tokens` holds a list of them)."""
    tokens: list[object] = []
    for value in tokens_map.values():
        tokens.extend(value if isinstance(value, list) else [value])
    return [token for token in tokens if isinstance(token, (str, dict))]


def _json_or_empty(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def _inference_session(path: Path, threads: int | None, arena: bool) -> InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    options.enable_cpu_mem_arena = arena
    # Threads that spin while waiting for work burn the CPU other requests need (a query took 5.8 ms of CPU
    # with spinning on two threads, 3.0 ms on one without, at the same wall time).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"], sess_options=options)


def truncation_length(settings: Mapping[str, object]) -> int:
    """Where fastembed cuts a text, by its own rule (fastembed.common.preprocessor_utils): the smaller of the
    usable `model_max_length` and `max_length` of tokenizer_config.json. Read here rather than by its loader,
    which imports all of fastembed; tests/models/test_embedding.py holds the two equal."""
    usable = [
        value
        for value in (settings.get("model_max_length"), settings.get("max_length"))
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= sys.maxsize
    ]
    if not usable:
        raise ValueError("tokenizer_config.json gives no usable model_max_length or max_length")
    return min(usable)
