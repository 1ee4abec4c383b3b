"""Registries of the parts a user picks by name in kb.toml: embedding and rerank providers, source kinds.

A registration pairs a settings model (what kb.toml may say about the part, validated when the
config loads) with the implementation, named lazily as "package.module:Name" so that choosing one
provider never imports another (fastembed takes a second to import). The settings package registers
the built-in settings and each implementing package binds its own implementations (no package names
one above it). A plugin registers its own with `register(name, Settings, Implementation)`: one module
and one line, found through the `mcp_kb` entry-point group of an installed distribution (as llm's
plugins are), loaded once before the first config is validated.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import import_module, metadata
from typing import Any

from pydantic import BaseModel

from .errors import ConfigError

PLUGIN_GROUP = "mcp_kb"  # [project.entry-points.mcp_kb] NAME = "package.module" in a plugin's pyproject.toml
_plugins_loaded = False
_plugins_lock = threading.Lock()


@dataclass(frozen=True)
class Entry:
    settings: type[BaseModel]
    implementation: str | Any  # "package.module:Name", imported on first use, the object itself, or None: unbound


class Registry:
    """Named parts of one role (e.g. "embedding provider")."""

    def __init__(self, role: str, key: str):
        self.role = role
        self.key = key  # the setting that names the part ("provider", "kind")
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, settings: type[BaseModel], implementation: str | Any = None) -> None:
        self._entries[name] = Entry(settings, implementation)

    def bind(self, name: str, implementation: str | Any) -> None:
        """The implementation of a part whose settings are registered already (built-ins: by the package
        that implements them)."""
        self._entries[name] = Entry(self._entries[name].settings, implementation)

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
        target = self._entries[name].implementation
        if target is None:
            raise ConfigError(
                f"the {self.role} {name!r} has settings but no implementation: the package that "
                f"provides it was not installed or not imported"
            )
        return self.load(target)

    @staticmethod
    def load(target: str | Any) -> Any:
        """The object a "package.module:Name" target names (imported now), or the object given."""
        if not isinstance(target, str):
            return target
        module, attribute = target.split(":")
        return getattr(import_module(module), attribute)


def load_plugins() -> None:
    """Import every installed plugin once (the entry points of PLUGIN_GROUP). A plugin that fails to import
    or to register is one error naming it, so a broken plugin is never mistaken for a mistyped kb.toml;
    it is tried again at the next load, never skipped in silence."""
    global _plugins_loaded
    with _plugins_lock:
        if _plugins_loaded:
            return
        for entry in metadata.entry_points(group=PLUGIN_GROUP):
            try:
                loaded = entry.load()
                if callable(loaded):  # a function that registers, rather than a module that does on import
                    loaded()
            except Exception as exc:
                raise ConfigError(
                    f"the mcp-kb plugin {entry.name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}"
                ) from exc
        _plugins_loaded = True
