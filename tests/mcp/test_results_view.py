"""The search tools' MCP App in Debian's Chromium, inside a minimal host that follows the MCP Apps spec (a sandboxed
frame, JSON-RPC over postMessage): it renders the hits of a real search, a citation opens the document with the
passage marked, hostile file names and passages stay text, and the page fetches nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import until, write
from mcp import Client
from mcp_types import TextResourceContents

from mcp_kb.mcp.results_view import RESULTS_VIEW_URI, results_page
from mcp_kb.mcp.server import build_server
from helpers import MakeApp
from selenium.webdriver import Chrome

HOSTILE_NAME = "<img src=x onerror=alert(1)>.md"
# in code spans: the one place a Markdown chunk keeps HTML as written (elsewhere tags are markup, dropped)
HOSTILE_TEXT = (
    "# Expenses `<b>now</b>`\n\n## Travel\n\nTravel expenses are paid back within 30 days. "
    '`<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">` Keep the receipts.\n'
)
PLAIN_TEXT = "# Leave\n\n## Annual leave\n\nAnnual leave is 25 days a year; travel days do not count.\n"

HOST = """<!doctype html><html><body>
<iframe id="app" sandbox="allow-scripts" style="width:1000px;height:800px"></iframe>
<script>
// A minimal MCP Apps host: answers ui/initialize, sends the tool's input and result once the view is ready,
// proxies read_document calls (answers the test got through a real MCP client), refuses everything else.
window.hostLog = [];
const INPUT = __INPUT__, RESULT = __RESULT__, DOCUMENTS = __DOCUMENTS__;
const frame = document.getElementById("app");
const post = (message) => frame.contentWindow.postMessage({jsonrpc: "2.0", ...message}, "*");
window.addEventListener("message", (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  window.hostLog.push(m.method || "answer");
  if (m.method === "ui/initialize") {
    post({id: m.id, result: {protocolVersion: m.params.protocolVersion, hostInfo: {name: "test host", version: "1"},
                             hostCapabilities: {serverResources: {}}, hostContext: {theme: "light"}}});
  } else if (m.method === "ui/notifications/initialized") {
    post({method: "ui/notifications/tool-input", params: {arguments: INPUT}});
    post({method: "ui/notifications/tool-result", params: RESULT});
  } else if (m.method === "tools/call" && m.params.name === "read_document") {
    const answer = DOCUMENTS[JSON.stringify(m.params.arguments)];
    post(answer === undefined ? {id: m.id, error: {code: -32602, message: "Unknown arguments"}}
                              : {id: m.id, result: answer});
  } else if (m.id !== undefined) {
    post({id: m.id, error: {code: -32601, message: "Method not found"}});
  }
});
frame.srcdoc = __APP__;
</script></body></html>"""


def _script_value(value: object) -> str:
    """`value` as a JavaScript literal that cannot end the host's script element."""
    return json.dumps(value).replace("</", "<\\/")


@pytest.fixture
def searched(make_app: MakeApp, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A real search through a real MCP client: the tool's result as a host receives it, and its documents."""
    write(tmp_path / "docs" / HOSTILE_NAME, HOSTILE_TEXT)
    write(tmp_path / "docs" / "leave.md", PLAIN_TEXT)
    app = make_app({"name": "handbook", "description": "Staff handbook", "paths": [str(tmp_path / "docs")]})
    app.sync()
    write(tmp_path / "docs" / "leave.md", PLAIN_TEXT + "\nEdited since its sync.\n")  # its hit is stale
    arguments = {"query": "travel expenses receipts", "top_k": 2}

    async def search() -> tuple[TextResourceContents, dict[str, Any], dict[str, dict[str, Any]]]:
        async with Client(build_server(app)) as client:
            tool = {tool.name: tool for tool in (await client.list_tools()).tools}["search_handbook"]
            assert tool.meta and tool.meta["ui"]["resourceUri"] == RESULTS_VIEW_URI
            page = (await client.read_resource(RESULTS_VIEW_URI)).contents[0]
            assert isinstance(page, TextResourceContents)
            result = await client.call_tool("search_handbook", arguments)
            documents = {}
            for hit in result.structured_content["results"]:  # what the view asks to open a hit's document
                asked = {"kb": hit["kb"], "path": hit["source"], "chunk": hit["chunk_index"]}
                answer = await client.call_tool("read_document", asked)
                documents[json.dumps(asked, separators=(",", ":"))] = answer.model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )
        return page, result.model_dump(by_alias=True, mode="json", exclude_none=True), documents

    page, result, documents = anyio.run(search)
    assert page.mime_type == "text/html;profile=mcp-app" and page.text == results_page()
    host = tmp_path / "host.html"
    host.write_text(
        HOST.replace("__INPUT__", _script_value(arguments))
        .replace("__RESULT__", _script_value(result))
        .replace("__DOCUMENTS__", _script_value(documents))
        .replace("__APP__", _script_value(page.text)),
        encoding="utf-8",
    )
    return host, result


def _in_view(browser: Chrome, host: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(host.as_uri())
    browser.switch_to.frame(browser.find_element(By.ID, "app"))
    until(lambda: browser.find_elements(By.CSS_SELECTOR, "li.hit"))


def test_the_view_renders_the_hits_of_a_real_search_as_text(
    browser: Chrome, searched: tuple[Path, dict[str, Any]]
) -> None:
    from selenium.webdriver.common.by import By

    host, result = searched
    _in_view(browser, host)
    hits = result["structuredContent"]["results"]
    shown = [button.text for button in browser.find_elements(By.CSS_SELECTOR, "li.hit button.citation")]
    assert shown == [f"{hit['source']} › {hit['heading']}" for hit in hits] and HOSTILE_NAME in shown[0]
    assert shown == [hit["citation"] for hit in hits]  # the server's citation, not one the view words itself
    assert [meta.text for meta in browser.find_elements(By.CSS_SELECTOR, "li.hit .meta")] == [
        hit["ranking"] for hit in hits
    ]
    assert [hit["source"] for hit in hits if hit["stale"]] == ["leave.md"]  # a stale answer is never silent
    assert [line.text for line in browser.find_elements(By.CSS_SELECTOR, "li.hit .stale")] == [
        f"Stale: {hit['changed']}" for hit in hits if hit["stale"]
    ]
    passage = browser.find_elements(By.CSS_SELECTOR, "li.hit .passage")[0].text
    assert "<script>window.pwned = 1</script>" in passage and "<img src=x" in passage
    assert (
        browser.find_element(By.ID, "summary").text
        == f"{len(hits)} passage(s), mode {result['structuredContent']['mode']}"
    )
    assert browser.execute_script("return document.getElementById('cited').textContent") == result["content"][0]["text"]
    _nothing_injected_or_fetched(browser)


def test_a_citation_opens_its_document_with_the_passage_marked(
    browser: Chrome, searched: tuple[Path, dict[str, Any]]
) -> None:
    from selenium.webdriver.common.by import By

    host, result = searched
    _in_view(browser, host)
    browser.find_elements(By.CSS_SELECTOR, "li.hit button.citation")[0].click()
    until(lambda: browser.find_elements(By.CSS_SELECTOR, "#document-text mark"))
    hit = result["structuredContent"]["results"][0]
    assert browser.find_element(By.ID, "document-path").text == hit["source"] == HOSTILE_NAME
    marked = browser.find_element(By.CSS_SELECTOR, "#document-text mark").text
    assert marked in hit["text"] and "Keep the receipts." in marked
    assert "<b>now</b>" in browser.find_element(By.ID, "document-text").text  # the document's markup, as text
    browser.find_element(By.ID, "back").click()
    until(lambda: browser.find_element(By.ID, "hits").is_displayed())
    _nothing_injected_or_fetched(browser)
    browser.switch_to.default_content()
    log = browser.execute_script("return window.hostLog")
    assert log[0] == "ui/initialize" and "ui/notifications/initialized" in log and "tools/call" in log
    assert set(log) <= {"ui/initialize", "ui/notifications/initialized", "ui/notifications/size-changed", "tools/call"}


def _nothing_injected_or_fetched(browser: Chrome) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = browser.switch_to.alert.text
    assert browser.execute_script(
        "return [document.images.length, document.querySelectorAll('b').length, window.pwned === undefined]"
    ) == [0, 0, True]
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
