"""The SDK patches of mcp/compat.py: what they rely on in the mcp SDK is still there and takes effect.

The end-to-end behaviour (a 2025-era client subscribing, hearing of a changed tool description)
is in test_server.py; these fail first, and name the patch, when an SDK release moves its internals.
"""

from types import SimpleNamespace
from typing import Any, cast

import pytest
from helpers import text_of
from mcp import Client
from mcp.server.mcpserver import MCPServer

from mcp.server.mcpserver.exceptions import ToolError

from mcp_kb.mcp.compat import PlainErrors, support_2025_clients, unknown_tool


def test_the_handshake_advertises_changing_tools_and_subscriptions() -> None:
    server = MCPServer(name="t")
    support_2025_clients(server, lambda session, uri: None, lambda session, uri: None)
    capabilities = server._lowlevel_server.create_initialization_options().capabilities
    assert capabilities.tools and capabilities.tools.list_changed is True
    assert capabilities.resources and capabilities.resources.subscribe is True


@pytest.mark.anyio
async def test_subscribe_and_unsubscribe_requests_have_handlers_that_track_sessions() -> None:
    server = MCPServer(name="t")
    told: list[tuple[str, object, str]] = []
    support_2025_clients(
        server,
        lambda session, uri: told.append(("subscribe", session, uri)),
        lambda session, uri: told.append(("unsubscribe", session, uri)),
    )
    lowlevel = server._lowlevel_server
    session = object()
    context = SimpleNamespace(session=session)
    for method in ("resources/subscribe", "resources/unsubscribe"):
        entry = lowlevel.get_request_handler(method)
        assert entry is not None, f"the SDK no longer routes {method} to the handler added"
        await entry.handler(
            cast(Any, context), entry.params_type(uri="kb://docs/status")
        )  # the session is all it reads
    assert told == [("subscribe", session, "kb://docs/status"), ("unsubscribe", session, "kb://docs/status")]


@pytest.mark.anyio
async def test_unknown_tool_is_the_sdks_own_error_for_a_tool_it_does_not_have() -> None:
    async with Client(MCPServer(name="t")) as client:
        answer = await client.call_tool("search_nosuch", {})
    assert answer.is_error and text_of(answer.content[0]) == str(unknown_tool("search_nosuch"))


@pytest.mark.anyio
async def test_tool_errors_reach_the_client_as_the_tools_own_message() -> None:
    server = PlainErrors(name="t")

    def refuse(count: int) -> str:
        raise ToolError("the knowledge base 'x' is not configured")

    server.add_tool(refuse, name="refuse")
    async with Client(server) as client:
        refused = await client.call_tool("refuse", {"count": 1})
        rejected = await client.call_tool("refuse", {"count": "many"})
    assert refused.is_error and text_of(refused.content[0]) == "the knowledge base 'x' is not configured"
    assert rejected.is_error and "count" in text_of(rejected.content[0])
    assert not text_of(rejected.content[0]).startswith("Error executing tool")


@pytest.mark.anyio
async def test_a_prompt_refusing_its_arguments_is_invalid_params_and_a_broken_prompt_stays_internal() -> None:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

    server = PlainErrors(name="t")

    @server.prompt(name="refusing")
    def refusing(kb: str) -> str:
        raise ValueError(f"unknown knowledge base {kb!r}")

    @server.prompt(name="broken")
    def broken(kb: str) -> str:
        raise RuntimeError("secret=/srv/internal/state")

    async with Client(server) as client:
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("refusing", {"kb": "x"})
        with pytest.raises(MCPError) as faulted:
            await client.get_prompt("broken", {"kb": "x"})
    assert refused.value.error.code == INVALID_PARAMS and refused.value.error.message == "unknown knowledge base 'x'"
    assert faulted.value.error.code == INTERNAL_ERROR and "secret" not in faulted.value.error.message
