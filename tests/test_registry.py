"""Providers by registry: a third embedding provider added as one module and one registration line
is validated with the config, embeds a sync and answers searches; switching to it rebuilds."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import write
from mcp_kb.app import App
from mcp_kb.settings import EMBEDDING_PROVIDERS, Config, build_config
from mcp_kb.errors import ConfigError
from mcp_kb.models import fetch_models, model_source
from mcp_kb.api import SearchRequest
from mcp_kb.models.fastembed import FastEmbedder


@pytest.fixture
def toy_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy provider registered for one test (the registry is left as it was after)."""
    from toy_embedder import ToyProvider, ToySettings

    monkeypatch.setattr(EMBEDDING_PROVIDERS, "_entries", dict(EMBEDDING_PROVIDERS._entries))
    EMBEDDING_PROVIDERS.register("toy", ToySettings, ToyProvider)  # the one registration line


def _config(tmp_path: Path, embedding: dict[str, Any]) -> Config:
    write(tmp_path / "docs" / "parking.md", "# Parking\n\nVisitors park on level minus two.\n")
    write(tmp_path / "docs" / "coffee.md", "# Coffee\n\nThe espresso machine is descaled on Fridays.\n")
    return build_config(
        {
            "storage": str(tmp_path / "index"),
            "embedding": embedding,
            "kb": [{"name": "kb", "description": "d", "paths": [str(tmp_path / "docs")]}],
        },
        tmp_path,
        None,
    )


def test_a_registered_provider_embeds_syncs_and_searches(toy_provider: None, tmp_path: Path) -> None:
    app = App(_config(tmp_path, {"provider": "toy", "dimension": 16}))
    [report] = app.sync()
    model = app.status("kb")[0].model
    assert report.chunks_embedded == 2 and model and model.name == "toy words-hashed"
    assert (
        app.search("kb", SearchRequest(query="espresso machine descaled", mode="vector")).hits[0].source == "coffee.md"
    )
    assert model_source(app.config.embedding) == "computed in this process (no files)"
    assert fetch_models(app.config.embedding, app.config.rerank) == {}  # nothing to download


def test_switching_to_another_provider_rebuilds_the_index(
    toy_provider: None, tmp_path: Path, embedder: FastEmbedder
) -> None:
    App(_config(tmp_path, {}), embedder=embedder).sync()
    [report] = App(_config(tmp_path, {"provider": "toy"})).sync()
    assert report.rebuilt.startswith("embedding model changed") and report.chunks_embedded == 2


def test_a_providers_own_settings_are_checked_and_others_refused(toy_provider: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"embedding\.dimension: Input should be greater than or equal to 4"):
        _config(tmp_path, {"provider": "toy", "dimension": 2})
    with pytest.raises(ConfigError, match=r"unknown key 'embedding\.model_path'; did you mean 'model'\?"):
        _config(tmp_path, {"provider": "toy", "model_path": "/models/x"})  # a fastembed setting
    with pytest.raises(ConfigError, match=r"unknown embedding provider 'toys'; known: fastembed, openai, toy"):
        _config(tmp_path, {"provider": "toys"})


def test_each_setting_an_environment_variable_overrides_names_it_in_its_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_KB_EMBEDDING_MODEL", "intfloat/multilingual-e5-small")
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "elsewhere"))
    config = _config(tmp_path, {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert config.embedding.model == "intfloat/multilingual-e5-small"
    assert config.storage.uri == str(tmp_path / "elsewhere")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Plays the distributions installed beside mcp-kb: the entry points of the `mcp_kb` group it finds."""
    from importlib import metadata

    import mcp_kb.registry as registry

    monkeypatch.setattr(EMBEDDING_PROVIDERS, "_entries", dict(EMBEDDING_PROVIDERS._entries))
    monkeypatch.setattr(registry, "_plugins_loaded", False)

    def install(*values: str) -> None:
        points = [metadata.EntryPoint(f"plugin{n}", value, registry.PLUGIN_GROUP) for n, value in enumerate(values)]
        monkeypatch.setattr(metadata, "entry_points", lambda group: points if group == registry.PLUGIN_GROUP else [])

    return install


def test_an_installed_plugin_is_found_through_its_entry_point_before_the_config_is_checked(
    installed: Callable[..., None], tmp_path: Path
) -> None:
    installed("toy_embedder:register")
    app = App(_config(tmp_path, {"provider": "toy", "dimension": 16}))
    [report] = app.sync()
    model = app.status("kb")[0].model
    assert report.chunks_embedded == 2 and model and model.name == "toy words-hashed"


def test_a_plugin_that_fails_to_load_is_named_not_taken_for_a_config_mistake(
    installed: Callable[..., None], tmp_path: Path
) -> None:
    installed("no_such_plugin_module")
    for _ in range(2):  # and again at the next load: a broken plugin is never skipped in silence
        with pytest.raises(
            ConfigError,
            match=r"the mcp-kb plugin 'plugin0' \(no_such_plugin_module\) failed to "
            r"load: ModuleNotFoundError",
        ):
            _config(tmp_path, {})
    installed("toy_embedder:ToyEmbedder")  # a callable that cannot register (it wants settings)
    with pytest.raises(
        ConfigError,
        match=r"the mcp-kb plugin 'plugin0' \(toy_embedder:ToyEmbedder\) failed to "
        r"load: TypeError",
    ):
        _config(tmp_path, {})
