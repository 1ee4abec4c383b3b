"""The caller's view of the knowledge bases: what one grant may see, decided once for every face.

A face (the MCP server, the admin page) gets a CallerView for each request and asks it which KBs,
tools and resources exist, checks names through it and words errors through it. A KB outside the
grant is therefore indistinguishable from a KB that is not configured: it is absent from the view,
not hidden by each face remembering to hide it. stdio and `mcp-kb ui` callers own the process and
see everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .access import NOBODY, Grant, Identity, everything
from .settings import Config, KBConfig, unknown_kb
from .errors import KBError, NotSyncedError, OwnedElsewhereError, SyncBusyError
from .vocabulary import SEARCH_ALL_TOOL, SYNC_TOOL, WORKBENCH_TOOLS

__all__ = ["CallerView"]  # what the core's API (mcp_kb.api) offers from this module


@dataclass(frozen=True)
class CallerView:
    config: Config
    grant: Grant

    @classmethod
    def owner(cls, config: Config) -> CallerView:
        """The process owner's view: every KB, sync included."""
        return cls(config, everything(config))

    @classmethod
    def nobody(cls, config: Config) -> CallerView:
        """The view of no caller at all: no KB (what a listener registered outside any request hears of)."""
        return cls(config, Grant(NOBODY, frozenset()))

    @property
    def who(self) -> Identity:
        return self.grant.who

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The KBs this caller may see, in the config's order."""
        return tuple(kb.name for kb in self.config.kb if self.grant.sees(kb.name))

    @property
    def kbs(self) -> list[KBConfig]:
        return [kb for kb in self.config.kb if self.grant.sees(kb.name)]

    def sees(self, kb: str) -> bool:
        return self.grant.sees(kb)

    def may_sync(self, kb: str) -> bool:
        return self.grant.may_sync(kb)

    @property
    def may_roll_back(self) -> bool:
        """Only the owner rolls a KB back (a rollback undoes every caller's view of it at once); no tool does."""
        return self.who.kind == "owner"

    def check(self, kb: str) -> str:
        """`kb` when the caller may see it; otherwise the unknown-KB error, naming only what it may see."""
        if not self.sees(kb):
            raise unknown_kb(kb, list(self.names))
        return kb

    def kb(self, name: str) -> KBConfig:
        return self.config.get_kb(self.check(name))

    def syncable(self, kb: str | None) -> list[str | None]:
        """What one sync call covers: the KB named, or every KB the caller may sync (None: all, in one go)."""
        if kb is not None:
            if not self.may_sync(self.check(kb)):
                raise KBError(self.sync_refusal(kb))
            return [kb]
        names = [k.name for k in self.config.kb]
        return [None] if all(self.may_sync(name) for name in names) else [n for n in names if self.may_sync(n)]

    @staticmethod
    def sync_refusal(kb: str) -> str:
        """Why a caller who sees `kb` may not sync it, said the same on every face."""
        return f"this caller may search {kb} but not sync it: ask for a token with the sync right"

    @property
    def tools_of_each_kb(self) -> bool:
        """Whether this caller is listed a search tool per KB it sees (`[server] search_tools`, by its count)."""
        return self.config.tools_of_each_kb(len(self.names))

    @property
    def tool_across_kbs(self) -> bool:
        """Whether this caller is listed the search tool across the KBs it sees."""
        return self.config.tool_across_kbs(len(self.names))

    def sees_tool(self, name: str) -> bool:
        """Whether a tool exists for this caller (a name no KB's tool has is left to the server to answer)."""
        if name == SYNC_TOOL:
            return bool(self.grant.sync)
        if name == SEARCH_ALL_TOOL:
            return bool(self.names) and self.tool_across_kbs
        if name in WORKBENCH_TOOLS:
            return bool(self.names)
        owner = next((kb.name for kb in self.config.kb if kb.search_tool_name == name), None)
        return owner is None or (self.sees(owner) and self.tools_of_each_kb)

    def explain(self, error: KBError) -> str:
        """An error's message as this caller may read it: shared state (the index-wide writer lock) is
        described without the KBs outside the view, and where the index and the cluster are only to the owner."""
        if isinstance(error, SyncBusyError):
            return self.unlocated(error.message(self.sees))
        if isinstance(error, NotSyncedError):
            return self.unlocated(error.message(with_storage=self.who.kind == "owner"))
        if isinstance(error, OwnedElsewhereError):
            return error.message(with_places=self.who.kind == "owner")
        return self.unlocated(str(error))

    def unlocated(self, text: str) -> str:
        return text if self.who.kind == "owner" else self.config.unlocated(text)
