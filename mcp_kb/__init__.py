"""mcp-kb: folders of documents as knowledge bases for any MCP client.

The public names load lazily, so `mcp-kb --help` and server start-up stay fast.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "App": "app",
    "Config": "settings",
    "KBConfig": "settings",
    "load_config": "settings",
    "config_for_folder": "settings",
    "KBError": "errors",
    "ConfigError": "errors",
    "ParseError": "errors",
    "ModelError": "errors",
    "StoreError": "errors",
    "SyncBusyError": "errors",
    "MassDeleteError": "errors",
    "SearchError": "errors",
    "SyncReport": "sync",
    "SearchResult": "search",
    "Hit": "search",
    "build_server": "mcp.server",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'mcp_kb' has no attribute {name!r}")
