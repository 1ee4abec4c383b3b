"""User-facing errors.

KBError                 anything mcp-kb reports to a user as one clear message
├── ConfigError         kb.toml is missing, malformed or inconsistent
├── ParseError          one source file cannot be turned into text (it is skipped)
├── ModelError          the embedding or reranking model cannot be loaded or run
├── StoreError          the index cannot be opened, read or written
├── SyncBusyError       another process holds the sync lock for this storage
└── SearchError         a search request is invalid (bad mode, unknown filter field, ...)
"""


class KBError(Exception):
    """Base class: its message is meant for the user and says what to fix."""


class ConfigError(KBError):
    """The configuration is invalid."""


class ParseError(KBError):
    """A source file could not be parsed; the file is skipped and reported."""


class ModelError(KBError):
    """A model could not be loaded or failed while running."""


class StoreError(KBError):
    """The LanceDB index could not be used."""


class SyncBusyError(KBError):
    """Another sync holds the lock on this storage location."""


class SearchError(KBError):
    """A search request is invalid."""
