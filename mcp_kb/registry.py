"""Registries of the parts a user picks by name in kb.toml: embedding and rerank providers, source kinds.

A registration pairs a settings model (what kb.toml may say about the part, validated when the
config loads) with the implementation, named lazily as "package.module:Name" so that choosing one
provider never imports another (fastembed takes a second to import). A plugin registers its own
with `register(name, Settings, Implementation)`: one module and one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Entry:
    settings: type[BaseModel]
    implementation: str | Any  # "package.module:Name", imported on first use, or the object itself


class Registry:
    """Named parts of one role (e.g. "embedding provider")."""

    def __init__(self, role: str, key: str):
        self.role = role
        self.key = key  # the setting that names the part ("provider", "kind")
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, settings: type[BaseModel], implementation: str | Any) -> None:
        self._entries[name] = Entry(settings, implementation)

    def names(self) -> list[str]:
        return list(self._entries)

    def settings(self, name: Any) -> type[BaseModel]:
        """The settings model of a part; an unknown name is a ValueError listing the known ones."""
        if not isinstance(name, str) or name not in self._entries:
            raise ValueError(f"unknown {self.role} {name!r}; known: {', '.join(self.names()) or '(none registered)'}")
        return self._entries[name].settings

    def validate(self, value: Any, default: str) -> Any:
        """A kb.toml table as the settings of the part it names (`default` when it names none)."""
        if not isinstance(value, dict):
            return value  # an instance already, or a wrong type that validation reports
        name = value.get(self.key, default)
        return self.settings(name).model_validate({**value, self.key: name})

    def implementation(self, name: str) -> Any:
        return self.load(self._entries[name].implementation)

    @staticmethod
    def load(target: str | Any) -> Any:
        """The object a "package.module:Name" target names (imported now), or the object given."""
        if not isinstance(target, str):
            return target
        module, attribute = target.split(":")
        return getattr(import_module(module), attribute)
