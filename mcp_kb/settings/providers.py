"""`[embedding]` and `[rerank]`: what every provider's settings have, the built-in providers' own
settings, and the registries that pick a provider by its name in kb.toml (registry.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..errors import ConfigError
from ..registry import Registry
from .variables import ENV_MODEL, ENV_MODEL_PATH, checked_headers, environment, from_environment, header_value
from .values import DEFAULT_MODEL, PathText, Strict


DEFAULT_PROVIDER = "fastembed"  # of embeddings and of reranking: a model run in this process


class EmbeddingConfig(Strict):
    """What every embedding provider's settings have; each provider adds its own (a registered subclass).

    provider "fastembed" runs an ONNX model in this process (the default); "openai" calls any
    service speaking the OpenAI embeddings API (OpenAI, Azure, Ollama, vLLM, TEI, LM Studio, LiteLLM).
    """

    provider: str = DEFAULT_PROVIDER
    """`fastembed` (a local ONNX model in this process) or `openai` (any OpenAI-compatible embeddings service).
    Each provider takes its own keys: a key of another provider is an unknown key."""
    model: str = Field(DEFAULT_MODEL, json_schema_extra=from_environment(ENV_MODEL))
    """The fastembed model's name, or the name the service knows its model by. Changing it rebuilds the index on
    the next sync, and says why."""
    batch_size: int = Field(32, ge=1, le=2048)
    """Texts per request to the service."""

    def __hash__(self) -> int:  # a frozen model with a dict field: hash what identifies the settings
        return hash(self.model_dump_json())


class FastembedSettings(EmbeddingConfig):
    """provider = "fastembed": an ONNX model run in this process."""

    provider: Literal["fastembed"] = "fastembed"
    """A local ONNX model run in this process."""
    # Texts of similar length share a call, so little is padding: 8 keeps a sync beside an IDE and a browser.
    batch_size: int = Field(8, ge=1, le=2048)
    """Texts per model call. Its working memory grows with it while its speed barely moves: a sync of 200 SciFact
    files peaked at 551 MB with 8, 649 MB with 16, 945 MB with 32."""
    model_path: PathText | None = Field(None, json_schema_extra=from_environment(ENV_MODEL_PATH))
    """A local model folder for machines without network, as `mcp-kb model fetch --to FOLDER` makes it (the model's
    ONNX file under the name fastembed loads it from, `tokenizer.json`, `tokenizer_config.json`); `model` still
    names which model it is."""
    threads: int | None = Field(None, ge=1)
    """CPU threads of the model (unset: onnxruntime decides for a sync, and a server runs each query on one)."""
    cache_dir: PathText | None = None
    """Where downloaded models go (unset: fastembed's cache folder)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """`auto`, `cpu` or `cuda` (a GPU, when onnxruntime offers CUDA; `cuda` without it warns and uses the CPU)."""
    # all-MiniLM-L6-v2 on an AVX-512 VNNI CPU: 1.46x the passages per CPU-second, 70 MB less, SciFact nDCG@10
    # within 0.003 (docs/performance.md).
    quantize: Literal["none", "int8"] = "int8"
    """`int8` embeds with an int8 copy of the model, made once on this machine and checked against fp32 (a copy
    the check refuses leaves fp32, with one warning; a model quantized already is used as it is); `none` embeds
    with the fp32 model. They are different models for the index: switching rebuilds it."""


class _ServiceAccess(Strict):
    """How a model service is reached: its address, the key (from a variable) and headers it wants."""

    _section: ClassVar[str]  # the kb.toml table, for messages
    base_url: str | None = None
    """Where the service answers."""
    api_key_env: str | None = None
    """The *name* of the environment variable holding the service's key, sent as `Authorization: Bearer`; the key
    is never stored or logged."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers; `${NAME}` in a value is read from the environment."""

    @field_validator("headers")
    @classmethod
    def _headers_are_valid(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_headers(value, f"{cls._section}.headers")

    def request_headers(self) -> dict[str, str]:
        """`headers`, and the API key from the variable `api_key_env` names, read now."""
        headers = {key: header_value(text, f"{self._section}.headers.{key}") for key, text in self.headers.items()}
        if self.api_key_env:
            if not environment(self.api_key_env):
                raise ConfigError(
                    f"[{self._section}] api_key_env names ${self.api_key_env}, which is not set; "
                    f"export the service's API key in it"
                )
            # a key pasted with a trailing newline must not reach the HTTP library (its errors quote headers)
            headers["Authorization"] = header_value(f"Bearer ${{{self.api_key_env}}}", f"[{self._section}] api_key_env")
        return headers


class OpenAISettings(EmbeddingConfig, _ServiceAccess):
    """provider = "openai": a service speaking the OpenAI embeddings API."""

    _section: ClassVar[str] = "embedding"
    provider: Literal["openai"] = "openai"
    """A service speaking the OpenAI embeddings API: OpenAI, Azure, Ollama, vLLM, TEI, LM Studio, LiteLLM."""
    base_url: str | None = None
    """The service, ending in `/v1` (required): `https://api.openai.com/v1`, `http://localhost:11434/v1`, …"""
    dimensions: int | None = Field(None, ge=1)
    """Ask for shortened vectors (models that support it)."""
    max_concurrency: int = Field(2, ge=1, le=64)
    """Requests in flight during a sync."""
    timeout: float = Field(30.0, gt=0, le=600)
    """Seconds per request, its whole answer included."""
    max_retries: int = Field(5, ge=0, le=20)
    """Retries of 429, 5xx and timeouts."""
    tokenizer_path: PathText | None = None
    """A folder with the model's `tokenizer.json` and `tokenizer_config.json`, to size chunks exactly (unset: a
    conservative estimate)."""
    max_input_tokens: int = Field(512, ge=16, le=1_000_000)
    """The most tokens the service's model reads."""

    @model_validator(mode="after")
    def _names_the_service(self) -> OpenAISettings:
        if not self.base_url:
            raise ValueError(
                'provider "openai" needs base_url, e.g. "https://api.openai.com/v1" or '
                '"http://localhost:11434/v1" (Ollama)'
            )
        if "model" not in self.model_fields_set:
            raise ValueError(
                'provider "openai" needs model: the name the service knows the model by, '
                'e.g. "text-embedding-3-small" or "nomic-embed-text"'
            )
        return self


class RerankConfig(Strict):
    """Optional reranking of the top candidates; each provider adds its own settings (a registered subclass)."""

    provider: str = DEFAULT_PROVIDER
    """`fastembed` (a cross-encoder in this process) or `service` (a reranking service)."""
    enabled: bool = False
    """Rerank the fused top candidates of each search."""
    candidates: int = Field(30, ge=1, le=500)
    """How many of the fused top candidates are reranked."""


class FastembedRerankSettings(RerankConfig):
    """provider = "fastembed": a cross-encoder run in this process."""

    provider: Literal["fastembed"] = "fastembed"
    """A cross-encoder run in this process."""
    model: str = "Xenova/ms-marco-MiniLM-L-6-v2"
    """The cross-encoder's fastembed name."""
    model_path: PathText | None = None
    """A local folder holding the cross-encoder (`model.onnx`, `tokenizer.json`, `tokenizer_config.json`)."""


class ServiceRerankSettings(RerankConfig, _ServiceAccess):
    """provider = "service": a reranking service — Hugging Face TEI's `POST /rerank` (api = "tei"), or the
    Jina / Cohere `POST /rerank` that Infinity, vLLM and the hosted APIs answer (api = "cohere")."""

    _section: ClassVar[str] = "rerank"
    provider: Literal["service"] = "service"
    """A reranking service (Hugging Face TEI, or the Jina / Cohere API that Infinity, vLLM and hosted APIs answer)."""
    base_url: str | None = None
    """Where the reranker answers (required; `/rerank` is added): `http://localhost:8080` (TEI),
    `https://api.jina.ai/v1`, …"""
    api: Literal["cohere", "tei"] = "cohere"
    """Its API family: `cohere` (Jina, Cohere, Infinity, vLLM) or `tei` (Text Embeddings Inference)."""
    model: str | None = None
    """The reranker to ask for (required for `cohere`; TEI serves one model)."""
    batch_size: int = Field(32, ge=1, le=1000)
    """Passages per request."""
    timeout: float = Field(5.0, gt=0, le=120)
    """Seconds per rerank call, its batches and retries together; past it a search keeps its fused order, with a
    note."""
    max_retries: int = Field(1, ge=0, le=5)
    """Retries on 429, 5xx and dropped connections."""

    @model_validator(mode="after")
    def _names_the_service(self) -> ServiceRerankSettings:
        if not self.base_url:
            raise ValueError(
                'provider "service" needs base_url, e.g. "http://localhost:8080" (TEI) or "https://api.jina.ai/v1"'
            )
        if self.api == "cohere" and not self.model:
            raise ValueError(
                'api "cohere" needs model: the reranker the service knows, e.g. "jina-reranker-v2-base-multilingual"'
            )
        return self


# Providers picked by name in kb.toml: the settings each takes (registry.py); models/ binds the implementations.
EMBEDDING_PROVIDERS = Registry("embedding provider", "provider")
EMBEDDING_PROVIDERS.register("fastembed", FastembedSettings)
EMBEDDING_PROVIDERS.register("openai", OpenAISettings)
RERANK_PROVIDERS = Registry("rerank provider", "provider")
RERANK_PROVIDERS.register("fastembed", FastembedRerankSettings)
RERANK_PROVIDERS.register("service", ServiceRerankSettings)
