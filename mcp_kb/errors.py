"""User-facing errors: every error the core reports to a user as one clear message, in one place.

KBError                     anything mcp-kb reports to a user as one clear message
├── ConfigError             kb.toml is missing, malformed or inconsistent
├── ParseError              one source file cannot be turned into text (it is skipped)
├── ModelError              the embedding or reranking model cannot be loaded or run
│   └── UnknownModelError   the model name is not one fastembed knows
├── StoreError              the index cannot be opened, read or written
├── GitError                git failed on a repository source
├── SyncBusyError           another process holds the sync lock for this storage
├── SyncCancelled           a sync stopped on its caller's request
├── MassDeleteError         a sync would delete most of a KB (an unmounted share?) and was refused
├── VersionError            a version, tag or time that names no kept version
├── OwnedElsewhereError     a sync into the default index of a KB another project built
├── AuditUnavailable        a request refused: the audit trail it requires cannot be written
└── SearchError             a search request is invalid (bad mode, unknown filter field, ...)
    ├── NotSyncedError      the KB has nothing indexed yet
    ├── NotReadableError    the KB's index was built before documents could be read from it
    └── CursorError         a cursor this process did not make, or that no longer fits
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .vocabulary import files_done, sync_remedy

__all__ = [
    "KBError",
    "ConfigError",
    "ParseError",
    "ModelError",
    "UnknownModelError",
    "StoreError",
    "GitError",
    "SyncBusyError",
    "SyncCancelled",
    "MassDeleteError",
    "VersionError",
    "AuditUnavailable",
    "SearchError",
    "CursorError",
    "OwnedElsewhereError",
    "NotSyncedError",
    "NotReadableError",
]  # what the core's API (mcp_kb.api) offers from this module


class KBError(Exception):
    """Base class: its message is meant for the user and says what to fix."""


class ConfigError(KBError):
    """The configuration is invalid."""


class ParseError(KBError):
    """A source file could not be parsed; the file is skipped and reported."""


class ModelError(KBError):
    """A model could not be loaded or failed while running."""


class UnknownModelError(ModelError):
    """The model name is not one fastembed knows: no download can help."""


class StoreError(KBError):
    """The LanceDB index could not be used."""


class GitError(KBError):
    """git failed: the message is git's own last words, with every secret scrubbed."""


@dataclass(frozen=True)
class RunningSync:
    """What the holder of an index's writer lock says about itself ("?" where it wrote nothing)."""

    kbs: tuple[str, ...] = ()
    started_at: str = "?"
    pid: str = "?"
    host: str = "?"
    progress: tuple[tuple[str, int, int], ...] = ()  # (kb, files done, files to do) per KB it syncs

    def sentence(self, sees: Callable[[str], bool] = lambda _kb: True) -> str:
        """The running sync in one sentence, naming only the KBs `sees` admits (the lock is index-wide: a
        caller may meet the sync of a KB it must not learn of)."""
        if self == RunningSync():  # the holder wrote nothing (yet)
            return "a sync is already running on this index"
        shown = [kb for kb in self.kbs if sees(kb)]
        done = [f"{kb}: {files_done(done, total)}" for kb, done, total in self.progress if sees(kb)]
        return (
            f"a sync of {', '.join(shown) if shown else 'this index'} is already running (started "
            f"{self.started_at} by process {self.pid} on {self.host}{'; ' + ', '.join(done) if done else ''})"
        )


class SyncBusyError(KBError):
    """Another sync holds the lock on this storage location (`running`, None when unknown); `advice`
    says what to do. A face words it for its caller with `message(sees)`."""

    def __init__(self, running: RunningSync | None, advice: str):
        self.running = running
        self.advice = advice
        super().__init__(self.message())

    def message(self, sees: Callable[[str], bool] = lambda _kb: True) -> str:
        return f"{self.running.sentence(sees)}; {self.advice}" if self.running else self.advice


class SyncCancelled(KBError):
    """A sync stopped on its caller's request (a task's cancel): what it committed stays, as after Ctrl-C."""


class MassDeleteError(KBError):
    """A sync would delete all or most of a KB's documents; nothing was changed."""


class VersionError(KBError):
    """A version, tag or time of a KB's history that does not name a kept version, or a change to it refused; nothing
    was changed."""


class AuditUnavailable(KBError):
    """A request refused because `[server] audit_required` and the trail cannot be written."""


class SearchError(KBError):
    """A search request is invalid."""


class CursorError(SearchError):
    """A cursor that is not one of this process's, or no longer fits what it points at."""


class OwnedElsewhereError(KBError):
    """A sync into the per-user default index of a KB another project's kb.toml built (two configs naming no storage
    share that index)."""

    def __init__(self, kb: str, other: str, mine: str):
        self.kb, self.other, self.mine = kb, other, mine
        super().__init__(self.message(with_places=True))

    def message(self, with_places: bool) -> str:
        """The kb.toml files are named to the owner only: they are no remote caller's business."""
        other, mine = (f" ({self.other})", self.mine) if with_places else ("", "this project")
        return (
            f"knowledge base {self.kb!r} in the default index belongs to another project{other}; two configs "
            f"naming no storage share that index, and this one's syncs, tags and rollbacks would change it: give "
            f'{mine} an index of its own (storage = "./.mcp-kb", as `mcp-kb init` writes) or another name for '
            f"the knowledge base"
        )


class NotSyncedError(SearchError):
    """A KB whose index holds nothing yet: no sync has committed a chunk of it."""

    def __init__(self, kb: str, storage: str = "", failed: str = ""):
        self.kb, self.storage, self.failed = kb, storage, failed  # failed: why its last sync failed, if it did
        super().__init__(self.message(with_storage=True))

    def message(self, with_storage: bool) -> str:
        """Where it looked is said to the owner (a server started with another storage than the shell's
        synced one answers so), not to a remote caller. A sync that failed is why, not another sync."""
        where = f" in the index at {self.storage}" if with_storage and self.storage else ""
        if self.failed:
            return f"knowledge base {self.kb!r} has nothing indexed yet{where}: its last sync failed: {self.failed}"
        return f"knowledge base {self.kb!r} has not been synced yet{where}; {sync_remedy(self.kb)}"


class NotReadableError(SearchError):
    """A KB whose index was built before documents could be read from it."""

    def __init__(self, kb: str):
        super().__init__(
            f"knowledge base {kb!r} was indexed before documents could be read from the index; a full "
            f"sync adds what reading needs ({sync_remedy(kb, '--full')}); searching works meanwhile"
        )
