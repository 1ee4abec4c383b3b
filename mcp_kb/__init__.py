"""mcp-kb: folders of documents as knowledge bases for any MCP client.

A library user's names: the core's public API (`mcp_kb.api`) and the MCP server's builder. They load
lazily, so `mcp-kb --help` and server start-up stay fast.
"""

from .api import __version__, lazy_names

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


__getattr__ = lazy_names(__name__, _EXPORTS)
