"""How a stdio server imports the MCP SDK (mcp 2.x): without its HTTP stack.

`import mcp` runs the SDK's package `__init__`, which imports its clients and their HTTP transports (httpx2);
the low-level server and MCPServer modules import at their top starlette, the OAuth middleware, providers and
routes, and the SSE and streamable HTTP transports (sse_starlette, uvicorn), although only the HTTP apps they
build use them. A stdio server never builds one: it imports the SDK with those modules stood in for
(`import_leaving_out`): 160 modules fewer, 0.17 s less CPU to its first answer. The protocol stays the SDK's.

mcp/compat.py holds mcp-kb's other reach-arounds into the SDK; this one must run before anything imports the SDK, so it
cannot import it. tests/mcp/test_sdk_import.py fails, naming this module, when an SDK release moves what it
relies on; an SDK whose modules use a left-out name as they load is imported whole (the reason is returned).
"""

from __future__ import annotations

from functools import cache

from ..imports import import_leaving_out

SERVER_MODULES = ("mcp.server.mcpserver", "mcp.server.stdio")  # what a stdio server runs on
HTTP_ONLY = (
    "starlette",
    "sse_starlette",
    "uvicorn",
    "httpx2",
    "mcp.server.auth.",
    "mcp.server.sse",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.transport_security",
)
# A field of MCPServer's own settings model is typed AuthSettings, which pydantic resolves as the class is made
# (a plain pydantic model; the rest of mcp.server.auth stays out).
KEPT = ("mcp.server.auth.settings",)


@cache  # once per process: a stdio server's
def import_sdk_for_stdio() -> str | None:
    """Import the SDK's server for a process that serves stdio and nothing else, leaving HTTP_ONLY out. None
    when done so; otherwise why the SDK was imported whole (imported already, or it changed)."""
    return import_leaving_out(
        SERVER_MODULES,
        HTTP_ONLY,
        KEPT,
        note="a stdio server imports the MCP SDK without its HTTP stack (mcp_kb/mcp/sdk_import.py)",
    )
