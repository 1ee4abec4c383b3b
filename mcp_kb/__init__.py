"""mcp-kb: folders of documents as knowledge bases for any MCP client.

A library user's names: the core's public API (`mcp_kb.api`), the settings and the MCP server's builder. They
load lazily, so `mcp-kb --help` and server start-up stay fast.
"""

from importlib import import_module
from typing import Any

from .api import __version__

_EXPORTS = {
    "App": "api",
    "Config": "settings",
    "KBConfig": "settings",
    "load_config": "settings",
    "config_for_folder": "settings",
    "KBError": "api",
    "ConfigError": "api",
    "ParseError": "api",
    "ModelError": "api",
    "StoreError": "api",
    "SyncBusyError": "api",
    "MassDeleteError": "api",
    "SearchError": "api",
    "SyncReport": "api",
    "SearchRequest": "api",
    "SyncRequest": "api",
    "SearchResult": "api",
    "Hit": "api",
    "build_server": "mcp.server",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    """A library user's name, imported from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
