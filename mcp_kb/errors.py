"""User-facing errors.

KBError                 anything mcp-kb reports to a user as one clear message
├── ConfigError         kb.toml is missing, malformed or inconsistent
├── ParseError          one source file cannot be turned into text (it is skipped)
├── ModelError          the embedding or reranking model cannot be loaded or run
├── StoreError          the index cannot be opened, read or written
├── SyncBusyError       another process holds the sync lock for this storage
├── MassDeleteError     a sync would delete most of a KB (an unmounted share?) and was refused
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


class MassDeleteError(KBError):
    """A sync would delete all or most of a KB's documents; nothing was changed."""


class SearchError(KBError):
    """A search request is invalid."""
