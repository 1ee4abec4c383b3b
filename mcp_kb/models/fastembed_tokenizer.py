"""The embedding model's own tokenizer (chunk sizes are measured with it) and where it comes from: the configured
model folder, the model in fastembed's cache, or its tokenizer files alone, downloaded once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import ModelError
from ..settings import FastembedSettings
from .fastembed_load import (
    FASTEMBED_LOCK,
    MODEL_FIX,
    cached_model_dir,
    fetch_model,
    described_model,
    remembered_model_of,
)
from .onnx_session import truncation_length

if TYPE_CHECKING:
    from tokenizers import Tokenizer


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
            raise ModelError(f"the model folder {model_dir} does not exist; {MODEL_FIX}")
        try:
            if not (model_dir / "tokenizer.json").is_file():
                raise ValueError("there is no tokenizer.json")
            settings = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
            self.max_tokens = truncation_length(settings)
        except (OSError, ValueError, AttributeError) as exc:
            raise ModelError(f"cannot read the tokenizer in {model_dir}: {exc}; {MODEL_FIX}") from exc
        if max_tokens is not None:  # a service may read fewer tokens than the tokenizer's own limit
            self.max_tokens = min(self.max_tokens, max_tokens)
        unknown = settings.get("unk_token") or "[UNK]"
        self.unknown_token = unknown["content"] if isinstance(unknown, dict) else unknown  # AddedToken form

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_tokenizer": None, "_loading": None}

    def __setstate__(self, state: Mapping[str, object]) -> None:
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
            raise ModelError(f"cannot read the tokenizer in {self._model_dir}: {exc}; {MODEL_FIX}") from exc
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
    remembered = remembered_model_of(config)
    if remembered:  # found in fastembed's cache before, without importing fastembed
        return remembered.folder
    with FASTEMBED_LOCK:
        from fastembed import TextEmbedding

        cached = cached_model_dir(TextEmbedding, config)
        if cached:
            return cached
        _, description = described_model(TextEmbedding, config)
        if not description.sources.hf:  # served as an archive only: the tokenizer comes with the model
            return fetch_model(config)
        return _download_tokenizer(description.sources.hf, config)


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
            f"this machine and downloading it failed ({type(exc).__name__}: {exc}); {MODEL_FIX}"
        ) from exc
    return folder


_TOKENIZERS: dict[FastembedSettings, ModelTokenizer] = {}


def load_tokenizer(config: FastembedSettings) -> ModelTokenizer:
    """The tokenizer of the configured model, cached per config."""
    with FASTEMBED_LOCK:
        if config not in _TOKENIZERS:
            _TOKENIZERS[config] = ModelTokenizer(tokenizer_dir(config))
        return _TOKENIZERS[config]
