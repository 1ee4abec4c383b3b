"""Where mcp-kb reaches past the MCP SDK's public API (mcp 2.x), in one place.

MCPServer offers no hook for resources/subscribe (2025-era clients) or for the handshake's
`tools.listChanged`, wraps every tool error in its own, answers every failed prompt as an internal
error, and over stdio drops a request whose JSON holds a lone surrogate; these patches reach its low-level server,
unwrap its errors and repair such requests. tests/mcp/test_compat.py fails first
when an SDK release moves what they rely on.
"""

import json
import re
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

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

    # the MCP SDK's MCPServer.call_tool signature, overridden
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

    # the MCP SDK's MCPServer.get_prompt signature, overridden
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


class AnsweredStdio(MCPServer):
    """Over stdio, every request answered. JSON may escape a lone surrogate (`"\\ud800"`), which no UTF-8 text holds:
    the SDK's parser refuses such a line and the client waits for an answer that never comes (over HTTP the same
    request gets an error). Here the line is read as Python reads JSON, each lone surrogate becomes U+FFFD, and the
    request goes on to be answered (e.g. "no document '\ufffd'")."""

    async def run_stdio_async(self) -> None:
        from mcp.server.stdio import stdio_server

        lowlevel = self._lowlevel_server  # run_stdio_async of the SDK, with the repair between stdin and the server
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
            send, received = anyio.create_memory_object_stream[Any](0)
            group.start_soon(_repairing, read_stream, send)
            await lowlevel.run(received, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads pairs a valid pair into one character: these are alone


async def _repairing(lines: ObjectReceiveStream[Any], into: ObjectSendStream[Any]) -> None:
    async with into:
        async for item in lines:
            await into.send(_repaired(item) if isinstance(item, ValidationError) else item)


def _repaired(error: ValidationError) -> Any:
    """The request a line the SDK refused as invalid JSON carries, its lone surrogates made U+FFFD; else the error."""
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    line = next((item["input"] for item in error.errors() if item["type"] == "json_invalid"), None)
    if not isinstance(line, str) or not _SURROGATE_ESCAPE.search(line):  # other invalid JSON stays refused
        return error
    try:
        message = json.loads(line, object_pairs_hook=lambda pairs: {_whole(key): value for key, value in pairs})
        return SessionMessage(jsonrpc_message_adapter.validate_python(_whole(message), by_name=False))
    except (ValueError, RecursionError):  # not JSON even to Python (ValidationError is a ValueError)
        return error


def _whole(value: Any) -> Any:
    """`value` with every lone surrogate in its strings made U+FFFD (keys are made whole as they are read)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_whole(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    return value


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
