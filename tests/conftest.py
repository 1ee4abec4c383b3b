"""Shared fixtures: the real offline model, real LanceDB folders, real files."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import OFFLINE_MODEL, MakeApp, MakeConfig

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

    from mcp_kb.app import App
    from mcp_kb.models.fastembed import FastEmbedder
    from mcp_kb.models.fastembed_tokenizer import ModelTokenizer
    from mcp_kb.settings import Config, FastembedSettings


# On machines without internet the shared ONNX export stands in for the hub download.
if OFFLINE_MODEL.is_dir() and not os.environ.get("MCP_KB_EMBEDDING_MODEL_PATH"):
    os.environ["MCP_KB_EMBEDDING_MODEL"] = "sentence-transformers/all-MiniLM-L6-v2"
    os.environ["MCP_KB_EMBEDDING_MODEL_PATH"] = str(OFFLINE_MODEL)
elif not os.environ.get("MCP_KB_EMBEDDING_MODEL"):
    os.environ["MCP_KB_EMBEDDING_MODEL"] = "sentence-transformers/all-MiniLM-L6-v2"


# The per-user default index belongs to the machine's user: a test naming no storage writes to a data folder of this
# session's own, so an index an earlier run (or the user) left there never answers, or owns a KB, for it.
_DATA_HOME = tempfile.mkdtemp(prefix="mcp-kb-test-data-")
os.environ["XDG_DATA_HOME"] = _DATA_HOME
atexit.register(shutil.rmtree, _DATA_HOME, ignore_errors=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def embedding_config() -> FastembedSettings:
    from mcp_kb.settings import FastembedSettings, build_config

    config = build_config({}, Path.cwd(), None).embedding
    assert isinstance(config, FastembedSettings)  # the tests' model is fastembed's
    return config


@pytest.fixture(scope="session")
def model_folder(embedding_config: FastembedSettings, embedder: FastEmbedder) -> Path:
    """The folder of the model the tests were given (a variable, ../shared, or fastembed's download)."""
    from mcp_kb.models.fastembed_tokenizer import tokenizer_dir

    return tokenizer_dir(embedding_config)


@pytest.fixture(scope="session")
def tokenizer(embedding_config: FastembedSettings) -> ModelTokenizer:
    from mcp_kb.models.fastembed_tokenizer import load_tokenizer

    return load_tokenizer(embedding_config)


@functools.cache
def _test_model() -> FastEmbedder:
    """The tests' model, one per process (not loaded yet)."""
    from mcp_kb.settings import FastembedSettings, build_config
    from mcp_kb.models.fastembed import FastEmbedder

    config = build_config({}, Path.cwd(), None).embedding
    assert isinstance(config, FastembedSettings)  # the tests' model is fastembed's
    return FastEmbedder(config)


def pytest_configure(config: pytest.Config) -> None:
    """Without a model the suite stops before its first test, in seconds, with one message (in the
    process that starts the workers, which also downloads the model once for them all)."""
    from mcp_kb.errors import ModelError

    if hasattr(config, "workerinput") or config.option.help:
        return
    try:
        _ = _test_model().identity  # finds (or downloads, once for all workers) the files without loading them
    except ModelError as exc:
        raise pytest.UsageError(
            f"no embedding model for the tests: {exc}\nPut the offline model at {OFFLINE_MODEL}, "
            f"or set MCP_KB_EMBEDDING_MODEL and MCP_KB_EMBEDDING_MODEL_PATH to a local model "
            f"folder."
        ) from None


@pytest.fixture(scope="session")
def fp32_embedder(embedding_config: FastembedSettings) -> FastEmbedder:
    """The tests' model with quantize = "none": its vectors do not depend on their batch (int8's activations are
    quantized per batch, which moves a vector by a cosine of about 0.003)."""
    from mcp_kb.models.fastembed import FastEmbedder

    return FastEmbedder(embedding_config.model_copy(update={"quantize": "none"}))


@pytest.fixture(scope="session")
def embedder() -> FastEmbedder:
    """The real fastembed model, loaded once per test process for the tests that ask for it (unit tests
    that need no model run without loading one); `.calls` counts embedded texts."""
    model = _test_model()
    model.embed_query("model check")
    return model


@pytest.fixture
def make_config(tmp_path: Path) -> MakeConfig:
    """Build a validated Config from kb tables, with the index in a temporary folder."""
    from mcp_kb.settings import build_config

    def make(*kbs: dict[str, Any], **top: Any) -> Config:
        raw = {"storage": str(tmp_path / "index"), "kb": list(kbs), **top}
        return build_config(raw, base_dir=tmp_path, source=None)

    return make


@pytest.fixture
def make_app(make_config: MakeConfig, embedder: FastEmbedder) -> MakeApp:
    """An App over real LanceDB in tmp_path, sharing the session's loaded model."""
    from mcp_kb.app import App

    def make(*kbs: dict[str, Any], **top: Any) -> App:
        return App(make_config(*kbs, **top), embedder=embedder)

    return make


@pytest.fixture(scope="module")
def browser() -> Iterator[Chrome]:
    """Debian's headless Chromium through its driver (the page's and the MCP App's browser tests)."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("no browser: install Debian's chromium and chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(options=options, service=Service(driver))
    yield session
    session.quit()


@pytest.fixture(autouse=True)
def _no_remembered_invocation() -> Iterator[None]:
    """A CLI command remembers its config for the remedies it words (vocabulary.remember_invocation); the next
    test in this process starts without it."""
    yield
    from mcp_kb.vocabulary import remember_invocation

    remember_invocation()
