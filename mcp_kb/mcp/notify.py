"""Change notifications, each delivered only to the callers whose view sees the KB it is about.

Both protocol eras: listen streams (2026 `subscriptions/listen`, served by the SDK over the bus
below) and, for 2025-era clients, `resources/subscribe` plus a tools list_changed on each session
that has called a tool. A listener and a subscription keep the view of the caller who opened them,
so a sync of a KB outside a caller's grant reaches that caller as nothing at all, exactly like a
KB that is not configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio.lowlevel
from mcp.server.subscriptions import ServerEvent
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..api import CallerView
from .guard import current_view

log = logging.getLogger(__name__)


class ViewBus:
    """The SDK's SubscriptionBus, with each listener tagged with the view of the caller who subscribed (the
    SDK subscribes inside the listen request, while the guard holds that caller's view)."""

    def __init__(self, nobody: CallerView):
        self.nobody = nobody
        self._listeners: dict[object, tuple[Callable[[ServerEvent], None], CallerView]] = {}

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()  # the same callable may listen twice
        self._listeners[token] = (listener, current_view() or self.nobody)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    async def publish(self, event: ServerEvent) -> None:
        """Deliver `event` to every listener (an event about no KB in particular)."""
        await self._deliver(event, lambda _view: True)

    async def publish_about(self, kb: str, event: ServerEvent) -> None:
        """Deliver `event` to the listeners whose caller sees `kb`."""
        await self._deliver(event, lambda view: view.sees(kb))

    async def _deliver(self, event: ServerEvent, wanted: Callable[[CallerView], bool]) -> None:
        for listener, view in list(self._listeners.values()):
            if wanted(view):
                try:
                    listener(event)
                except Exception:  # one bad listener must not starve the others
                    log.exception("subscription listener raised; continuing")
        await anyio.lowlevel.checkpoint()  # lets listen streams drain between events, as the SDK's bus does


class Notifier:
    """The guard holds a caller's view during every request (stdio's is the owner's); a subscription made
    outside any request fails closed with `nobody`'s view: it hears of no KB."""

    def __init__(self, nobody: CallerView):
        self.bus = ViewBus(nobody)
        self.nobody = nobody
        self.subscribed: dict[str, dict[Any, CallerView]] = {}  # uri -> 2025-era sessions that subscribed
        self.legacy_sessions: dict[Any, CallerView] = {}  # 2025-era sessions seen calling a tool

    def seen(self, session: Any) -> None:
        """Remember a 2025-era session, which only hears of tool changes on its own connection."""
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.legacy_sessions[session] = current_view() or self.nobody

    def subscribe(self, session: Any, uri: str) -> None:
        self.subscribed.setdefault(uri, {})[session] = current_view() or self.nobody

    def unsubscribe(self, session: Any, uri: str) -> None:
        self.subscribed.get(uri, {}).pop(session, None)

    async def tools_changed(self, kb: str) -> None:
        """A tool of `kb` changed (its description): tell whoever sees it to list the tools again."""
        await self.bus.publish_about(kb, ToolsListChanged())
        for session, view in list(self.legacy_sessions.items()):
            if view.sees(kb):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # a closed session: forget it
                    self.legacy_sessions.pop(session, None)

    async def updated(self, uri: str, kb: str) -> None:
        """The resource `uri` changed because of `kb` (a sync): tell its subscribers who see that KB."""
        await self.bus.publish_about(kb, ResourceUpdated(uri=uri))
        for session, view in list(self.subscribed.get(uri, {}).items()):
            if view.sees(kb):
                try:
                    await session.send_resource_updated(uri)
                except Exception:  # a closed session: forget it
                    self.subscribed[uri].pop(session, None)
