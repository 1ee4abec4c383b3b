"""The configuration reference is written from the settings models: every key of kb.toml is there with its
description, default and variable, a setting without a description stops it, and the docs page in the repository holds it as the models write it now."""

import pytest
from helpers import ROOT
from pydantic import BaseModel

from mcp_kb.settings import Config
from mcp_kb.settings.reference import MissingDescription, _table, description, page_with_reference, reference_markdown
from mcp_kb.settings.values import Strict


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[type[BaseModel]]:
    import typing

    if model in seen:
        return seen
    seen.add(model)
    for field in model.model_fields.values():
        for kind in [field.annotation, *typing.get_args(field.annotation)]:
            for inner in [kind, *typing.get_args(kind)]:
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    _models(inner, seen)
    return seen


def test_every_key_of_kb_toml_is_in_the_reference_with_its_description() -> None:
    from mcp_kb.settings.providers import EMBEDDING_PROVIDERS, RERANK_PROVIDERS

    text = reference_markdown()
    providers = {
        registry.settings(name) for registry in (EMBEDDING_PROVIDERS, RERANK_PROVIDERS) for name in registry.names()
    }
    for model in _models(Config, set()) | providers:
        for name in model.model_fields:
            # set by the loader; a provider's `provider` is the heading of its table
            if (model, name) != (Config, "source") and not (model in providers and name == "provider"):
                assert f"| `{name}` |" in text and " ".join(description(model, name).split())[:60] in text, (
                    model,
                    name,
                )
    assert "| `quantize` | `int8` |" in text and "Env: `MCP_KB_STORAGE`." in text
    assert "| `batch_size` | `8` |" in text and "| `batch_size` | `32` |" in text  # each provider's own default


def test_a_setting_without_a_description_stops_the_reference() -> None:
    class Settings(Strict):
        documented: int = 1
        """Says what it does."""
        bare: int = 2

    with pytest.raises(MissingDescription, match="Settings.bare has no description"):
        _table("[example]", Settings)


def test_the_docs_page_holds_the_reference_the_models_write_now() -> None:
    """docs/configuration.md carries the reference in the repository (a reader on GitHub sees every key); a setting
    changed without writing the page again fails here with the command that does."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page_with_reference(page) == page, (
        "docs/configuration.md is not current: python -m mcp_kb.settings.reference"
    )
    assert reference_markdown() in page


def test_a_page_without_the_references_place_is_refused_not_written_over() -> None:
    with pytest.raises(ValueError, match="no place for the reference"):
        page_with_reference("# Configuration\n\nNo markers here.\n")
