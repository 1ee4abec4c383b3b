"""The search tools' MCP App (the `io.modelcontextprotocol/ui` extension): a `ui://` page that hosts such as
Claude, VS Code and ChatGPT render beside a search's answer, showing its hits as the admin page's playground
does (citations, heading path, page, scores, the text as the LLM receives it) and, on a citation, the document
with the passage marked.

The page draws only from the tool's result and the documents its host reads for it: it fetches nothing, its
Content-Security-Policy allows nothing but its own inline script and style (by hash), and it sets every text
as text. Clients without the extension get the tool's text and structured content as before.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib.resources import files

from mcp.server.apps import Apps, ResourceCsp

RESULTS_VIEW_URI = "ui://mcp-kb/search-results.html"


def results_view() -> Apps:
    """The extension, holding the page (tools point to it with `view_meta()`)."""
    apps = Apps()
    apps.add_html_resource(
        RESULTS_VIEW_URI,
        results_page(),
        name="search-results",
        title="Search results",
        description="The hits of a knowledge-base search, with their citations and documents",
        csp=ResourceCsp(),
        prefers_border=True,
    )
    return apps


def view_meta() -> dict[str, object]:
    """A search tool's `_meta`: the page that shows its results."""
    return {"ui": {"resourceUri": RESULTS_VIEW_URI}}


@cache
def results_page() -> str:
    """The page, with a policy that lets exactly its own inline script and style run."""
    page = files("mcp_kb.mcp").joinpath("results.html").read_text(encoding="utf-8")
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    policy = (
        "default-src 'none'; "
        f"script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; img-src data:; "
        "connect-src 'none'; form-action 'none'; base-uri 'none'"
    )
    return page.replace("__CSP__", policy)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
