"""Where mcp-kb reaches past the MCP SDK's public API (mcp 2.x), in one place.

MCPServer offers no hook for resources/subscribe (2025-era clients) or for the handshake's
`tools.listChanged`, wraps every tool error in its own and answers every failed prompt as an internal
error; these patches reach its low-level server and unwrap its errors. tests/mcp/test_compat.py fails first
when an SDK release moves what they rely on.
"""

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError

from ..api import KBError


class PlainErrors(MCPServer):
    """Every tool error as our message alone: the SDK wraps a tool's ToolError (and rejected
    arguments) in one of its own, "Error executing tool …", with the original as its cause.
    A prompt asked for by a name it does not have, or with arguments it refuses, is the caller's
    mistake (invalid params, with the reason), not the SDK's "Internal server error" and a traceback."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(self.argument_errors(name, cause)) from cause
            if isinstance(cause, ToolError):
                raise ToolError(str(cause)) from cause
            raise

    def argument_errors(self, tool: str, error: ValidationError) -> str:
        """The message for arguments a tool's schema rejected."""
        return str(error)

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:  # the SDK's wrapping (one or two ValueErrors) of what went wrong
            error: BaseException = exc
            while isinstance(error, ValueError) and error.__cause__ is not None:
                error = error.__cause__
            if not isinstance(error, (ValueError, KBError)):  # a fault of the prompt itself stays an internal error
                raise
            raise MCPError(code=INVALID_PARAMS, message=self.prompt_error(error)) from exc

    def prompt_error(self, error: BaseException) -> str:
        """The message for a prompt that could not be rendered (`error` is what the prompt raised)."""
        return str(error)


def unknown_tool(name: str) -> ToolError:
    """The SDK's error for a call on a tool it does not have, word for word (tests/mcp/test_compat.py checks it):
    raised from a tool call, the SDK shapes the answer exactly as for a truly unknown tool."""
    return ToolError(f"Unknown tool: {name}")


Subscription = Callable[[Any, str], None]  # (session, resource URI)


def support_2025_clients(server: MCPServer, subscribe: Subscription, unsubscribe: Subscription) -> None:
    """resources/subscribe, and tools.listChanged advertised, for 2025-era clients (the 2026 protocol
    uses subscriptions/listen, which the SDK serves and advertises by itself). `subscribe` and
    `unsubscribe` are told of each session's requests."""
    from mcp.server.lowlevel.server import NotificationOptions
    from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

    async def on_subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        subscribe(ctx.session, str(params.uri))
        return EmptyResult()

    async def on_unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        unsubscribe(ctx.session, str(params.uri))
        return EmptyResult()

    lowlevel = server._lowlevel_server  # the SDK's MCPServer exposes no hook for these
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
    # MCPServer builds the handshake's capabilities with default options (listChanged false) although a
    # tool description changes after each sync: say so (the server sends the notification).
    create_options = lowlevel.create_initialization_options

    def with_tools_changed(notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any) -> Any:
        return create_options(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)

    lowlevel.create_initialization_options = with_tools_changed  # type: ignore[method-assign]
