"""The notifier's bus: each listener hears only of the KBs its caller sees, and one registered outside any
request (no caller) hears of none (the end-to-end rounds over HTTP are in test_guard.py)."""

from collections.abc import Callable

import pytest
from mcp.server.subscriptions import ServerEvent
from mcp.shared.subscriptions import ResourceUpdated

from mcp_kb.access import Grant, Identity
from mcp_kb.mcp.guard import _current
from mcp_kb.mcp.notify import ViewBus
from mcp_kb.view import CallerView
from helpers import MakeConfig

pytestmark = pytest.mark.anyio


async def test_listeners_hear_only_of_the_kbs_their_caller_sees_and_no_caller_hears_nothing(
    make_config: MakeConfig,
) -> None:
    config = make_config(*({"name": name, "description": name, "paths": ["docs"]} for name in ("hr", "secret")))
    bus = ViewBus(CallerView.nobody(config))
    heard: dict[str, list[str]] = {"hr": [], "owner": [], "outside": []}

    def hears(who: str) -> Callable[[ServerEvent], None]:
        def hear(event: ServerEvent) -> None:
            assert isinstance(event, ResourceUpdated), event
            heard[who].append(event.uri)

        return hear

    for who, view in (
        ("hr", CallerView(config, Grant(Identity("token", "hr"), frozenset({"hr"})))),
        ("owner", CallerView.owner(config)),
    ):
        token = _current.set(view)  # as the guard does while a listen request is handled
        try:
            bus.subscribe(hears(who))
        finally:
            _current.reset(token)
    bus.subscribe(hears("outside"))  # no request, no caller
    await bus.publish_about("secret", ResourceUpdated(uri="kb://secret/status"))
    await bus.publish_about("hr", ResourceUpdated(uri="kb://hr/status"))
    assert heard == {"hr": ["kb://hr/status"], "owner": ["kb://secret/status", "kb://hr/status"], "outside": []}
