"""The icons clients show beside the server and its tools: the admin page's own SVGs, as data: URIs so a
client never fetches anything to draw them."""

from __future__ import annotations

import base64
from functools import cache
from importlib.resources import files

from mcp_types import Icon


@cache
def icon(name: str) -> list[Icon]:
    """The icon `name` ("icon", "search", "sync") of the page's static folder, for MCP's `icons`."""
    svg = files("mcp_kb.ui").joinpath("static", f"{name}.svg").read_bytes()
    return [
        Icon(
            src="data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii"),
            mime_type="image/svg+xml",
            sizes=["any"],
        )
    ]
