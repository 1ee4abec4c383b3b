"""The admin page: served by `mcp-kb serve` over HTTP (and `mcp-kb ui`), behind the same tokens and grants.

Over plain HTTP: sign-in, grants, forged forms (no Origin, another origin, no CSRF token, no sync right,
a GET), DNS rebinding, open redirects, security headers. In a real browser (Debian's chromium and
chromium-driver through Selenium): the overview, live sync progress, the failed-files filter, a playground
search whose citations equal the MCP tool's, a document with the passage highlighted, a scoped token's
view, and file names and text holding HTML that must show as text. Screenshots land in each test's
temporary folder.
"""

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import until, write, text_of
from served import serve_http, serve_page

from mcp_kb.app import App
from mcp_kb.ui.charts import bar_chart, line_chart
from mcp_kb.api import ReadRequest, SyncRequest
from mcp_kb.requests import SelfCheckRequest
from selenium.webdriver import Chrome
from selenium.webdriver.remote.webelement import WebElement
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder

ADMIN, READER, LIMITED = "admin-secret-token-1", "reader-secret-token-2", "limited-secret-token-3"
INJECTED_NAME = '"><img src=x onerror=alert(2)>'
# in a code span: the one place a Markdown chunk keeps HTML as written (elsewhere tags are markup, dropped)
INJECTED_TEXT = '`<script>alert("x")</script> "><img src=x onerror=alert(3)>`'
BULK_FILES = 300


def _site(folder: Path) -> Path:
    """Three KBs: docs (with hostile names and text, and broken PDFs), notes (Chinese), bulk (not synced)."""
    docs, notes, bulk = folder / "docs", folder / "notes", folder / "bulk"
    write(docs / f"{INJECTED_NAME}.md", f"# Leave policy\n\nAnnual leave is 25 days a year. {INJECTED_TEXT}\n")
    write(docs / "setup.md", "# Setup\n\nInstall with pip, then run a sync.\n\n## Linux\n\nUse apt for chromium.\n")
    # in the folder the playground's filter example names (views.filter_example): typed in, that example finds it
    write(docs / "folder" / "windows.md", "# Windows\n\nInstall with winget, then run a sync.\n")
    for name in ("broken-a.pdf", "broken-b.pdf", f"{INJECTED_NAME}.pdf"):
        (docs / name).write_bytes(b"%PDF-1.4 this is not a PDF")
    write(notes / "leave.md", "# 年假\n\n年假申请需提前三天提交，经理批准后生效。\n")
    for number in range(BULK_FILES):
        write(bulk / f"page-{number:03}.md", f"# Page {number}\n\nTopic {number} covers item {number * 7}.\n")
    config = folder / "kb.toml"
    config.write_text(
        f'''storage = "{folder / "index"}"
[[kb]]
name = "docs"
description = "Product docs <b>bold</b>"
paths = ["{docs}"]
[[kb]]
name = "notes"
description = "团队笔记 Team notes"
paths = ["{notes}"]
[[kb]]
name = "bulk"
description = "Many small pages"
paths = ["{bulk}"]
[server]
transport = "http"
audit_log = "{folder / "audit.jsonl"}"
[[server.tokens]]
name = "admin"
secret_env = "UI_ADMIN_TOKEN"
kbs = ["*"]
sync = true
[[server.tokens]]
name = "reader"
secret_env = "UI_READER_TOKEN"
kbs = ["docs"]
[[server.tokens]]
name = "limited"
secret_env = "UI_LIMITED_TOKEN"
kbs = ["docs"]
requests_per_minute = 2
''',
        encoding="utf-8",
    )
    return config


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Path:
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    config = _site(tmp_path_factory.mktemp("ui"))
    app = App(load_config(config), embedder=embedder)
    app.sync(SyncRequest(kb="docs"))
    app.sync(SyncRequest(kb="notes"))
    return config


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    env = {**os.environ, "UI_ADMIN_TOKEN": ADMIN, "UI_READER_TOKEN": READER, "UI_LIMITED_TOKEN": LIMITED}
    with serve_http(site, env=env) as (port, _stderr):
        yield f"http://127.0.0.1:{port}"


def _signed_in(server: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no csrf field"
    return found.group(1)


# ---- over plain HTTP ------------------------------------------------------------------------------


def test_without_a_token_the_page_asks_to_sign_in_and_a_refused_token_is_not_echoed(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as http:
        first = http.get("/ui/kb/docs")
        refused = http.post("/ui/login", data={"token": "guess-<b>1</b>"}, headers={"Origin": server})
        admitted = http.post("/ui/login?next=/ui/kb/docs", data={"token": READER}, headers={"Origin": server})
        page = http.get("/ui/kb/docs")
    assert first.status_code == 303 and first.headers["location"] == "/ui/login?next=%2Fui%2Fkb%2Fdocs"
    assert refused.status_code == 401 and "refused" in refused.text and "guess" not in refused.text
    assert admitted.status_code == 303 and admitted.headers["location"] == "/ui/kb/docs"
    assert (
        "httponly" in admitted.headers["set-cookie"].lower()
        and "samesite=strict" in admitted.headers["set-cookie"].lower()
    )
    assert page.status_code == 200 and "broken-a.pdf" in page.text


def test_the_failed_files_filter_works_without_the_script(server: str) -> None:
    with _signed_in(server, ADMIN) as http:
        narrowed = http.get("/ui/kb/docs", params={"filter": "BROKEN-B"}).text
        by_reason = http.get("/ui/kb/docs", params={"filter": "malformed pdf"}).text
    assert "broken-b.pdf" in narrowed and "broken-a.pdf" not in narrowed and "1</span> of 3 shown" in narrowed
    assert "3</span> of 3 shown" in by_reason


def test_a_scoped_token_sees_its_kbs_only_and_others_answer_like_unknown_ones(server: str) -> None:
    with _signed_in(server, READER) as http:
        overview = http.get("/").text
        hidden, missing = http.get("/ui/kb/notes"), http.get("/ui/kb/nope")
        hidden_search = http.get("/ui/kb/notes/search", params={"q": "年假"})
        status = http.get("/ui/status.json").json()
        docs = http.get("/ui/kb/docs").text
    assert 'data-kb="docs"' in overview and 'data-kb="notes"' not in overview and "/ui/kb/bulk" not in overview
    assert hidden.status_code == missing.status_code == hidden_search.status_code == 404
    assert "unknown knowledge base &#39;notes&#39;" in hidden.text
    assert hidden.text.replace("notes", "X") == missing.text.replace("nope", "X")
    assert [kb["name"] for kb in status] == ["docs"]
    assert 'id="sync"' not in docs  # no sync right: no buttons


def test_forms_need_this_pages_origin_its_csrf_token_and_the_sync_right(server: str) -> None:
    with _signed_in(server, ADMIN) as admin, _signed_in(server, READER) as reader:
        token = _csrf(admin.get("/ui/kb/docs").text)
        before = admin.get("/ui/status.json").json()
        forged = [
            admin.post("/ui/kb/notes/sync", data={"csrf": token}),  # no Origin: not sent by this page
            admin.post("/ui/kb/notes/sync", data={"csrf": token}, headers={"Origin": "http://evil.example"}),
            admin.post("/ui/kb/notes/sync", data={"csrf": "0" * 64}, headers={"Origin": server}),
            admin.post("/ui/kb/notes/sync", data={}, headers={"Origin": server}),
            reader.post(
                "/ui/kb/docs/sync", data={"csrf": _csrf(reader.get("/ui/kb/docs").text)}, headers={"Origin": server}
            ),
            # another port of this host (a local dev server's page): cookies ignore ports, origins do not
            admin.post("/ui/kb/notes/sync", data={"csrf": token}, headers={"Origin": _other_port(server)}),
            admin.post(
                "/ui/kb/notes/sync", data={"csrf": token}, headers={"Origin": server.replace("http:", "https:")}
            ),
            admin.post("/ui/kb/notes/sync", data={"csrf": token}, headers={"Origin": "null"}),
        ]
        read = admin.get("/ui/kb/notes/sync")
        after = admin.get("/ui/status.json").json()
    assert [r.status_code for r in forged] == [403] * 8
    assert read.status_code == 405
    assert [kb["last_sync"] for kb in after] == [kb["last_sync"] for kb in before]  # nothing ran


def test_a_sign_in_from_another_port_of_this_host_gets_no_cookie(server: str) -> None:
    """Login CSRF: a page on localhost:3000 must not sign this browser in (under a token it chose)."""
    localhost = server.replace("127.0.0.1", "localhost")
    with httpx.Client(base_url=server, timeout=60) as http:
        planted = http.post("/ui/login", data={"token": READER}, headers={"Origin": _other_port(server)})
        other_name = http.post("/ui/login", data={"token": READER}, headers={"Origin": localhost})
        out = http.post("/ui/logout", headers={"Origin": _other_port(server)})
        own = http.post("/ui/login", data={"token": READER}, headers={"Origin": server})
    assert planted.status_code == other_name.status_code == out.status_code == 403
    assert "set-cookie" not in planted.headers and "set-cookie" not in other_name.headers
    assert own.status_code == 303 and "mcp_kb_token=" in own.headers["set-cookie"]


def _other_port(url: str) -> str:
    base, port = url.rsplit(":", 1)
    return f"{base}:{int(port) % 60000 + 1}"


def test_a_sync_button_press_syncs_the_kb(server: str, site: Path) -> None:
    with _signed_in(server, ADMIN) as admin:
        before = {kb["name"]: kb for kb in admin.get("/ui/status.json").json()}["notes"]
        pressed = admin.post(
            "/ui/kb/notes/sync", data={"csrf": _csrf(admin.get("/ui/kb/notes").text)}, headers={"Origin": server}
        )

        def finished() -> dict[str, Any] | None:
            notes = {kb["name"]: kb for kb in admin.get("/ui/status.json").json()}["notes"]
            return notes if notes["last_sync"] != before["last_sync"] and not notes["sync_running"] else None

        notes = until(finished, 120, 0.2, what="the sync a button started")
        page = admin.get("/ui/kb/notes").text
    assert pressed.status_code == 303 and pressed.headers["location"] == "/ui/kb/notes?notice=started"
    assert notes["last_outcome"] == "ok" and notes["files"] == 1
    assert page.count("<td>ok</td>") >= 2  # the first sync and this one, in the recent syncs
    trail = [json.loads(line) for line in (site.parent / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert any({"who": "admin", "kb": "notes", "action": "page sync"}.items() <= entry.items() for entry in trail)


def test_a_token_holder_is_not_told_where_the_index_lives(server: str, site: Path) -> None:
    with _signed_in(server, ADMIN) as admin:
        page = admin.get("/ui/kb/docs").text
    assert "<dt>Index</dt>" not in page and str(site.parent / "index") not in page


def test_a_never_synced_kb_offers_its_first_sync_on_the_overview_to_those_who_may_sync(server: str) -> None:
    with _signed_in(server, ADMIN) as admin, _signed_in(server, READER) as reader:
        cards = _cards(admin.get("/").text)
        read_only = reader.get("/").text
    assert 'class="first-sync"' in cards["bulk"] and 'class="first-sync"' not in cards["docs"]
    assert 'class="first-sync"' not in read_only  # no sync right, no button


def test_a_sync_pressed_while_another_kb_syncs_says_it_waits_then_runs(server: str, site: Path) -> None:
    from mcp_kb.app import App
    from mcp_kb.index.state import sync_lock
    from mcp_kb.settings import load_config

    app = App(load_config(site))
    syncs_before = len(app.sync_history("notes").recent)  # not last_sync: two syncs may end within one second
    with _signed_in(server, ADMIN) as admin:
        csrf = _csrf(admin.get("/ui/kb/notes").text)
        with sync_lock(app.store, ["docs"]):  # as a sync of docs by another process would
            pressed = admin.post("/ui/kb/notes/sync", data={"csrf": csrf}, headers={"Origin": server})
            shown = admin.get(pressed.headers["location"]).text
        until(lambda: len(app.sync_history("notes").recent) > syncs_before, 120, 0.2, what="the queued sync")
        notes = {kb["name"]: kb for kb in admin.get("/ui/status.json").json()}["notes"]
    assert pressed.headers["location"] == "/ui/kb/notes?notice=queued"
    assert "Another sync holds this index" in shown and "Sync started" not in shown
    assert notes["last_outcome"] == "ok"


def test_the_playground_filter_example_uses_fields_the_kb_has(server: str) -> None:
    with _signed_in(server, ADMIN) as admin:
        page = admin.get("/ui/kb/docs/search").text
    placeholder = re.search(r'placeholder="([^"]*)"', page[page.index('id="filters"') :])
    assert placeholder, "no placeholder"
    example = placeholder.group(1)
    assert example == "path^=folder/" and "doc_type" not in page and "year" not in example


def _cards(overview: str) -> dict[str, str]:
    return dict(re.findall(r'<section class="card" data-kb="([^"]+)".*?>(.*?)</section>', overview, re.DOTALL))


def test_the_page_and_the_mcp_endpoint_share_a_callers_rate_limit(server: str) -> None:
    with _signed_in(server, LIMITED) as http:
        answers = [
            http.get("/"),
            http.get("/ui/status.json"),
            http.get("/ui/status.json"),
            http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            ),
        ]
    assert [answer.status_code for answer in answers] == [200, 200, 429, 429]
    assert int(answers[2].headers["retry-after"]) >= 1 and "2 requests a minute" in answers[2].json()["error"]


def test_other_hosts_and_return_addresses_elsewhere_are_refused(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    with httpx.Client(base_url=server, timeout=60) as http:
        rebound = http.get("/", headers={"Host": f"evil.example:{port}", "Authorization": f"Bearer {ADMIN}"})
        away = http.post("/ui/login?next=//evil.example/x", data={"token": ADMIN}, headers={"Origin": server})
        page = http.get("/", headers={"Authorization": f"Bearer {ADMIN}"})
    assert rebound.status_code == 421
    assert away.headers["location"] == "/"
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy


def test_odd_document_addresses_and_oversized_forms_get_clear_answers(server: str) -> None:
    with _signed_in(server, ADMIN) as http:
        nul = http.get("/ui/kb/docs/document", params={"path": "setup.md\x00.md", "chunk": "0"})
        huge = http.get("/ui/kb/docs/document", params={"path": "setup.md", "chunk": "9" * 30})
        outside = http.get("/ui/kb/docs/document", params={"path": "../kb.toml"})
        flood = http.post(
            "/ui/login",
            content=b"token=" + b"a" * (1 << 20),
            headers={"Origin": server, "Content-Type": "application/x-www-form-urlencoded"},
        )
    assert nul.status_code == 404 and "has no document" in nul.text
    assert huge.status_code == 200 and "Install with pip" in huge.text and 'id="passage"' not in huge.text
    assert outside.status_code == 404
    assert flood.status_code == 413


def test_hostile_names_and_text_are_escaped(server: str, site: Path) -> None:
    with _signed_in(server, ADMIN) as http:
        pages = [
            http.get("/").text,
            http.get("/ui/kb/docs").text,
            http.get("/ui/kb/docs/search", params={"q": "annual leave <script>alert(1)</script>"}).text,
            http.get("/ui/kb/docs/document", params={"path": f"{INJECTED_NAME}.md", "chunk": "0"}).text,
        ]
    for page in pages:
        assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in pages[0]
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;.pdf" in pages[1]
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in pages[3]
    trail = [json.loads(line) for line in (site.parent / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert any(
        entry["action"] == "page search" and entry["who"] == "admin" and entry["kb"] == "docs" and entry["results"] >= 1
        for entry in trail
    )


def test_mcp_kb_ui_serves_this_machine_without_a_token(site: Path) -> None:
    with serve_page(site) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        overview = http.get("/")
        rebound = http.get("/", headers={"Host": "evil.example"})
        own_page = http.get("/ui/kb/docs").text
        past_the_last = http.get("/ui/kb/docs/document", params={"path": "setup.md", "chunk": "1000001"})
    assert f'<dt>Index</dt><dd class="path">{site.parent / "index"}</dd>' in own_page  # the owner sees where
    # a chunk number past any a read takes names no passage: the document from its start (was a 500, a traceback)
    assert past_the_last.status_code == 200 and "Install with pip" in past_the_last.text
    assert overview.status_code == 200
    assert all(f'data-kb="{name}"' in overview.text for name in ("docs", "notes", "bulk"))
    assert rebound.status_code == 421


def test_a_repository_kbs_page_names_the_commit_it_is_indexed_at(tmp_path: Path, embedder: FastEmbedder) -> None:
    from git_server import Repo

    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    repo = Repo(tmp_path / "service")
    repo.write("docs/runbook.md", "# Runbook\n\nRestart the worker, then page the owner.\n")
    commit = repo.commit()
    config = tmp_path / "kb.toml"
    storage = tmp_path / "index"
    config.write_text(
        f'storage = "{storage}"\n[[kb]]\nname = "code"\ndescription = "d"\n'
        f'[[kb.repos]]\nurl = "{repo.folder}"\nref = "main"\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    with serve_page(config) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        page = http.get("/ui/kb/code").text
    assert f"<dt>Commit of service</dt><dd><code>{commit}</code></dd>" in page


def test_the_page_says_a_hit_or_a_document_is_stale_and_a_kb_behind_its_sources(
    tmp_path: Path, embedder: FastEmbedder
) -> None:
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is 25 days a year.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is 30 days a year.\n")
    with serve_page(config) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        found = http.get("/ui/kb/docs/search", params={"q": "annual leave"}).text
        document = http.get("/ui/kb/docs/document", params={"path": "leave.md"}).text
        overview = http.get("/").text
    assert '<p class="stale" role="note">Stale: modified since it was indexed' in found and "indexed 20" in found
    assert '<p class="stale" role="note">Stale: modified since it was indexed' in document
    assert "0 added, 1 changed, 0 deleted since the last sync (counted " in overview


def test_without_a_token_a_form_value_cannot_be_worked_out_from_a_planted_cookie(site: Path) -> None:
    """`mcp-kb ui`: a page elsewhere can plant a cookie for this host; the form value must still be one only
    this process can make, so no forged POST runs a full rebuild with mass deletion allowed."""
    import hashlib
    import hmac

    planted = "planted-by-another-page"
    guess = hmac.new(planted.encode(), b"mcp-kb page form", hashlib.sha256).hexdigest()
    with serve_page(site) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        before = http.get("/ui/status.json").json()
        forged = http.post(
            "/ui/kb/notes/sync",
            data={"csrf": guess, "full": "1", "allow_mass_delete": "1"},
            headers={"Origin": f"http://127.0.0.1:{port}", "Cookie": f"mcp_kb_token={planted}"},
        )
        rendered = _csrf(http.get("/ui/kb/notes", headers={"Cookie": f"mcp_kb_token={planted}"}).text)
        after = http.get("/ui/status.json").json()
    assert forged.status_code == 403 and rendered != guess
    assert [kb["last_sync"] for kb in after] == [kb["last_sync"] for kb in before]


# ---- the parts ------------------------------------------------------------------------------------


def test_charts_escape_their_labels_and_pick_a_round_axis_top() -> None:
    chart = line_chart("Latency <b>", ["<script>"], {"p95 <i>": [123.0]}, "ms")
    assert "<script>" not in chart and "&lt;script&gt;" in chart and "&lt;b&gt;" in chart
    assert ">200</text>" in chart  # 123 ms under an axis topped at 200
    assert ">5</text>" in bar_chart("Syncs", ["a", "b"], [2.5, 4.0], "s")


# ---- in a browser -------------------------------------------------------------------------------


def _sign_in(browser: Chrome, server: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(f"{server}/")
    field = browser.find_element(By.ID, "token")
    field.send_keys(token)
    field.submit()
    until(lambda: _heading(browser) == "Knowledge bases", what="the overview after signing in")


def _heading(browser: Chrome) -> str:
    """The page's h1, read in one step: finding it and then reading it raced the sign-in's navigation (a stale
    element: the sign-in page's h1 was gone by the read)."""
    from selenium.common.exceptions import JavascriptException, StaleElementReferenceException

    try:
        heading: str = browser.execute_script(
            "const h = document.querySelector('h1'); return h ? h.textContent.trim() : '';"
        )
        return heading
    except (JavascriptException, StaleElementReferenceException):  # the page was being replaced
        return ""


def _shot(browser: Chrome, tmp_path: Path, name: str) -> None:
    """A screenshot of the page once it has loaded; Chrome on a loaded machine once timed out taking one while the
    page was still settling ("aborted by navigation"): it is taken again when the page says it is complete."""
    from selenium.common.exceptions import TimeoutException

    try:
        browser.save_screenshot(str(tmp_path / f"{name}.png"))
    except TimeoutException:
        until(lambda: browser.execute_script("return document.readyState") == "complete", what="the page loaded")
        browser.save_screenshot(str(tmp_path / f"{name}.png"))


def _no_injection(browser: Chrome) -> None:
    """Nothing from the content became markup: no alert, no image, no script but the page's own."""
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = browser.switch_to.alert.text
    assert browser.execute_script("return document.images.length") == 0
    assert browser.execute_script("return [...document.scripts].map(s => new URL(s.src).pathname)") == [
        "/ui/static/ui.js"
    ]


def test_browser_overview_and_a_scoped_tokens_view(server: str, browser: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _sign_in(browser, server, ADMIN)
    cards = [card.get_attribute("data-kb") for card in browser.find_elements(By.CSS_SELECTOR, ".card")]
    docs = browser.find_element(By.CSS_SELECTOR, '[data-kb="docs"]').text
    _no_injection(browser)
    _shot(browser, tmp_path, "overview-admin")
    assert cards == ["docs", "notes", "bulk"]
    assert "Product docs <b>bold</b>" in docs and "3 file(s) failed" in docs and "ok" in docs
    assert "团队笔记" in browser.find_element(By.CSS_SELECTOR, '[data-kb="notes"]').text

    _sign_in(browser, server, READER)
    cards = [card.get_attribute("data-kb") for card in browser.find_elements(By.CSS_SELECTOR, ".card")]
    links = [link.text for link in browser.find_elements(By.CSS_SELECTOR, "header nav a")]
    _shot(browser, tmp_path, "overview-reader")
    assert cards == ["docs"] and links == ["mcp-kb", "docs"]
    browser.get(f"{server}/ui/kb/notes")
    assert "unknown knowledge base 'notes'" in browser.find_element(By.CSS_SELECTOR, ".error").text


def test_browser_failed_files_filter_as_you_type(server: str, browser: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _sign_in(browser, server, ADMIN)
    browser.get(f"{server}/ui/kb/docs")

    def shown() -> list[str]:
        return [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#problem-rows tr") if row.is_displayed()]

    everything = shown()
    browser.find_element(By.ID, "filter").send_keys("broken-a")
    only = until(lambda: rows if len(rows := shown()) == 1 else None)
    _no_injection(browser)
    _shot(browser, tmp_path, "kb-filtered")
    assert len(everything) == 3 and any(f"{INJECTED_NAME}.pdf" in row for row in everything)
    assert "broken-a.pdf" in only[0] and "malformed PDF" in only[0]
    assert browser.find_element(By.CSS_SELECTOR, '[data-count="problem-rows"]').text == "1"


@pytest.mark.anyio
async def test_browser_playground_cites_what_the_tool_returns_and_opens_the_passage(
    server: str, browser: Chrome, tmp_path: Path
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    query = "how many days of annual leave"
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {READER}"}, timeout=60)
    async with Client(streamable_http_client(f"{server}/mcp", http_client=http)) as client:
        tool = await client.call_tool("search_docs", {"query": query})
    _sign_in(browser, server, READER)
    browser.get(f"{server}/ui/kb/docs/search")
    browser.find_element(By.ID, "q").send_keys(query, Keys.ENTER)  # the keyboard alone runs a search
    until(lambda: browser.find_elements(By.CSS_SELECTOR, ".hit"))
    citations = [link.text for link in browser.find_elements(By.CSS_SELECTOR, ".hit .citation a")]
    as_sent = browser.find_element(By.CSS_SELECTOR, "pre.cited").get_attribute("textContent")
    stages = browser.find_element(By.CSS_SELECTOR, ".timings").text
    _no_injection(browser)
    _shot(browser, tmp_path, "playground")
    expected = [
        f"{hit['source']} › {hit['heading']}" if hit["heading"] else hit["source"]
        for hit in tool.structured_content["results"]
    ]
    assert citations == expected and citations[0] == f"{INJECTED_NAME}.md › Leave policy"
    assert as_sent == text_of(tool.content[0])
    assert "embed" in stages and "ms" in stages

    browser.find_elements(By.CSS_SELECTOR, ".hit .citation a")[0].click()
    passage = until(lambda: browser.find_elements(By.CSS_SELECTOR, "mark#passage"))[0].text
    _no_injection(browser)
    _shot(browser, tmp_path, "document")
    assert "Annual leave is 25 days a year." in passage and INJECTED_TEXT in passage
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == f"{INJECTED_NAME}.md"


def test_browser_pages_fit_a_narrow_window(server: str, browser: Chrome, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _sign_in(browser, server, ADMIN)
    browser.set_window_size(390, 844)
    try:
        for name, path in [
            ("overview", "/"),
            ("kb", "/ui/kb/docs"),
            ("notes", "/ui/kb/notes/search?q=年假申请"),
            ("document", f"/ui/kb/docs/document?path={INJECTED_NAME}.md&chunk=0"),
        ]:
            browser.get(server + path)
            _shot(browser, tmp_path, f"narrow-{name}")
            overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} is {overflow} px wider than a phone's window"
            if name == "notes":
                assert "年假申请需提前三天提交" in browser.find_element(By.CSS_SELECTOR, ".hit").text
    finally:
        browser.set_window_size(1280, 900)


def test_browser_shows_a_sync_advancing_and_finishing_without_a_reload(
    server: str, browser: Chrome, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    _sign_in(browser, server, ADMIN)
    browser.get(f"{server}/ui/kb/bulk")
    browser.execute_script("document.body.dataset.loadedOnce = 'yes'")  # gone if the page reloads
    browser.find_element(By.ID, "sync").click()
    until(lambda: browser.find_elements(By.CSS_SELECTOR, ".notice"))
    browser.execute_script("document.body.dataset.loadedOnce = 'yes'")
    seen: set[str] = set()
    counted: set[str] = set()

    def finished() -> bool:
        text = browser.find_element(By.CSS_SELECTOR, '[data-progress="bulk"]').get_attribute("textContent")
        assert text is not None
        seen.add(" ".join(text.split()))
        counted.add(browser.find_element(By.CSS_SELECTOR, '[data-field="files"]').text)
        return browser.find_element(By.CSS_SELECTOR, '[data-field="last_outcome"]').text != "never synced"

    until(finished, seconds=600)
    _shot(browser, tmp_path, "sync-finished")
    steps = {int(m.group(1)) for text in seen if (m := re.search(rf"syncing now: (\d+) of {BULK_FILES} files", text))}
    assert any(0 < step < BULK_FILES for step in steps), seen
    assert any(re.search(r"[\d.]+ files/s, about \d+ s left", text) for text in seen), seen  # rate and time left
    # a first sync's figures count what it has written so far, not 0 until it ends
    assert any(0 < int(files) < BULK_FILES for files in counted if files.isdigit()), counted
    assert browser.execute_script("return document.body.dataset.loadedOnce") == "yes"
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="last_outcome"]').text == "ok"
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="files"]').text == str(BULK_FILES)
    assert not browser.find_element(By.CSS_SELECTOR, '[data-progress="bulk"]').is_displayed()


def test_the_page_shows_a_kbs_model_health_search_figures_and_syncs(make_app: MakeApp, tmp_path: Path) -> None:
    """The page reads the core's records by attribute: the model, the latest self-check, the hourly search
    figures and the recent syncs all show."""
    from starlette.testclient import TestClient

    from mcp_kb.api import SearchRequest
    from mcp_kb.http.edge import Edge
    from mcp_kb.http.network import rebinding_protection
    from mcp_kb.ui.routes import page_app

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nEmployees apply for annual leave in the HR portal.\n")
    write(tmp_path / "docs" / "errors.md", "# Errors\n\nE5021 means the access token expired.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    app.self_check(SelfCheckRequest(kb="docs", modes=("hybrid",), sample=2, k=3))
    for query in ("annual leave", "zyxwvut"):
        app.search("docs", SearchRequest(query=query, mode="keyword"))
    edge = Edge(app.config, None, rebinding_protection("127.0.0.1", []))
    with TestClient(page_app(app, None, edge), base_url="http://127.0.0.1") as http:
        overview, page = http.get("/").text, http.get("/ui/kb/docs").text
    model = app.status("docs")[0].model
    assert model
    assert f"{model.name} ({model.dimension}-d)" in overview and f"{model.name} ({model.dimension}-d)" in page
    assert "2 searches" in overview and "50% found nothing" in overview and "hit rate" in overview
    assert "Latest hit rate" in page and "(label-free self-check, 2 queries" in page
    assert all(title in page for title in ("Search latency", "Searches per hour", "Sync durations"))
    assert "<td>ok</td>" in page  # the sync, in the recent syncs


def test_the_search_counters_say_what_they_count(make_app: MakeApp, tmp_path: Path) -> None:
    """The page shows one process's search figures (App.search_figures): this server's, or those another server saved
    when this one has answered none. It says whose, and since when, and that `mcp-kb search` is not counted."""
    from starlette.testclient import TestClient

    from mcp_kb.api import SearchRequest
    from mcp_kb.http.edge import Edge
    from mcp_kb.http.network import rebinding_protection
    from mcp_kb.ui.routes import page_app
    from mcp_kb.ui.views import when

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nEmployees apply for annual leave in the HR portal.\n")
    serving = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    serving.sync()

    def pages(app: App) -> tuple[str, str]:
        edge = Edge(app.config, None, rebinding_protection("127.0.0.1", []))
        with TestClient(page_app(app, None, edge), base_url="http://127.0.0.1") as http:
            return http.get("/").text, http.get("/ui/kb/docs").text

    untouched, _ = pages(serving)
    for query in ("annual leave", "HR portal"):
        serving.search("docs", SearchRequest(query=query, mode="keyword"))
    overview, kb_page = pages(serving)
    since = when(serving.metrics.snapshot("docs").since)
    serving.live_stats("docs")  # saves its figures, as a server does now and then
    restarted, restarted_kb = pages(make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}))

    assert "no searches answered by this server yet" in untouched
    assert f"2 searches answered by this server since {since}: p95" in overview
    assert f"Search figures: 2 searches answered by this server since {since}." in kb_page
    assert all("Searches run with mcp-kb search are not counted" in page for page in (overview, kb_page))
    assert f"2 searches answered by another mcp-kb server since {since} (the figures it last saved)" in restarted
    assert "another mcp-kb server" in restarted_kb


def test_the_pages_forms_say_what_the_requests_say(server: str) -> None:
    """The playground's fields and the sync buttons carry the requests' own words, as the tools and the CLI do."""
    from markupsafe import escape

    from mcp_kb.api import SearchRequest, option_help

    with _signed_in(server, ADMIN) as http:
        kb_page = http.get("/ui/kb/docs").text
        playground = http.get("/ui/kb/docs/search").text
    assert str(escape(option_help(SyncRequest, "allow_mass_delete"))) in kb_page
    assert f'title="{escape(option_help(SyncRequest, "full"))}"' in kb_page
    for field in ("query", "mode", "top_k", "max_tokens", "filters"):
        assert f'title="{escape(option_help(SearchRequest, field))}"' in playground, field


def test_the_owner_rolls_back_from_the_page_after_confirming_and_a_token_holder_cannot(
    server: str, tmp_path: Path, embedder: FastEmbedder
) -> None:
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is twenty days.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    app = App(load_config(config), embedder=embedder)
    app.sync()
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is thirty days.\n")
    app.sync()
    with serve_page(config) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        origin = {"Origin": f"http://127.0.0.1:{port}"}
        page = http.get("/ui/kb/docs").text
        csrf = _csrf(page)
        unconfirmed = http.post("/ui/kb/docs/rollback", data={"csrf": csrf, "to": "1"}, headers=origin)
        forged = http.post(
            "/ui/kb/docs/rollback",
            data={"csrf": csrf, "to": "1", "confirm": "1"},
            headers={"Origin": "http://evil.example"},
        )
        unchanged = [v.number for v in app.versions("docs")]
        done = http.post("/ui/kb/docs/rollback", data={"csrf": csrf, "to": "1", "confirm": "1"}, headers=origin)
        after = http.get(done.headers["location"]).text
    assert page.count('action="/ui/kb/docs/rollback"') == 1  # version 1 only: version 2 is current
    assert unconfirmed.status_code == 400 and "tick the box" in unconfirmed.text
    assert forged.status_code == 403 and unchanged == [1, 2]
    assert done.status_code == 303 and "Rolled back: the version chosen is current again, as version 3." in after
    assert (
        "rolled back to 1" in after
        and "twenty days" in app.read_through("docs", ReadRequest(kb="docs", path="leave.md")).text
    )
    with _signed_in(server, ADMIN) as admin:  # a token that may sync is still not the owner
        assert 'action="/ui/kb/docs/rollback"' not in admin.get("/ui/kb/docs").text
        refused = admin.post(
            "/ui/kb/docs/rollback",
            data={"csrf": _csrf(admin.get("/ui/kb/docs").text), "to": "1", "confirm": "1"},
            headers={"Origin": server},
        )
    assert refused.status_code == 403 and "only the owner rolls back" in refused.text


def _submitted(browser: Chrome, field: WebElement) -> None:
    """Send a field's form as its submit button would, and wait for the answer to replace the page."""
    browser.execute_script("document.body.dataset.sent = 'yes'; arguments[0].form.requestSubmit()", field)
    until(
        lambda: browser.execute_script(
            "return document.readyState === 'complete' && document.body && document.body.dataset.sent === undefined"
        ),
        what="the form's answer",
    )


def test_browser_every_placeholder_typed_into_its_field_is_accepted(
    server: str, browser: Chrome, tmp_path: Path
) -> None:
    """A placeholder is an example of its field's input: typed in as it shows and sent, the page answers without an
    error; the playground's filter example runs the search and narrows it."""
    from selenium.webdriver.common.by import By

    _sign_in(browser, server, ADMIN)
    pages = ["/", "/ui/kb/docs", "/ui/kb/docs/search", "/ui/kb/docs/document?path=setup.md"]
    typed: dict[tuple[str, str], str] = {}
    for path in pages:
        browser.get(server + path)
        for name in [field.get_attribute("name") for field in browser.find_elements(By.CSS_SELECTOR, "[placeholder]")]:
            browser.get(server + path)
            field = browser.find_element(By.NAME, name)
            example = field.get_attribute("placeholder")
            assert example is not None and name is not None
            typed[path, name] = example
            if path.endswith("/search"):
                browser.find_element(By.ID, "q").send_keys("install")  # a search's words (the query has no example)
            field.send_keys(example)
            _submitted(browser, field)
            _shot(browser, tmp_path, f"placeholder-{len(typed)}")
            assert not browser.find_elements(By.CSS_SELECTOR, ".error:not([hidden])"), (path, name, example)
            assert _heading(browser) != "Not available", (path, name, example)
    assert ("/ui/kb/docs/search", "filters") in typed  # the playground's filter example was among them
    prefixes = [
        line.split("^=", 1)[1]
        for line in typed["/ui/kb/docs/search", "filters"].splitlines()
        if line.startswith("path^=")
    ]
    browser.get(f"{server}/ui/kb/docs/search?q=install")
    unfiltered = [link.text for link in browser.find_elements(By.CSS_SELECTOR, ".hit .citation a")]
    browser.find_element(By.ID, "filters").send_keys(typed["/ui/kb/docs/search", "filters"])
    _submitted(browser, browser.find_element(By.ID, "filters"))
    filtered = [link.text for link in browser.find_elements(By.CSS_SELECTOR, ".hit .citation a")]
    assert prefixes and filtered and all(hit.startswith(tuple(prefixes)) for hit in filtered), filtered
    assert any(not hit.startswith(tuple(prefixes)) for hit in unfiltered), unfiltered  # so the filter did narrow it


def test_browser_the_playground_runs_a_filter_search_without_a_query(
    server: str, browser: Chrome, tmp_path: Path
) -> None:
    """Mode filter needs no words: the filter example alone lists the passages it matches."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _sign_in(browser, server, ADMIN)
    browser.get(f"{server}/ui/kb/docs/search")
    Select(browser.find_element(By.ID, "mode")).select_by_visible_text("filter")
    field = browser.find_element(By.ID, "filters")
    field.send_keys("path^=folder/")
    _submitted(browser, field)
    _shot(browser, tmp_path, "filter-mode")
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, ".hit .citation a")] == [
        "folder/windows.md › Windows"
    ]
    assert not browser.find_elements(By.CSS_SELECTOR, ".error")


def test_browser_the_mass_delete_box_goes_with_sync_now(
    browser: Chrome, tmp_path: Path, embedder: FastEmbedder
) -> None:
    """The box that lets a sync delete most of a KB is in Sync now's form: ticked, Full rebuild does not carry it
    (the guard refuses), Sync now does (the files that are gone leave the index)."""
    from selenium.webdriver.common.by import By

    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    for name in ("a", "b"):
        write(tmp_path / "docs" / f"{name}.md", f"# {name}\n\nText {name}.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    App(load_config(config), embedder=embedder).sync()
    for name in ("a", "b"):
        (tmp_path / "docs" / f"{name}.md").unlink()  # all gone: the guard asks for a confirmation
    with serve_page(config) as (port, _stderr), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

        def pressed(button: str, outcome: str) -> dict[str, Any]:
            # by its outcome, which differs from the last one's: two syncs may end within one second (last_sync's)
            browser.get(f"http://127.0.0.1:{port}/ui/kb/docs")
            browser.find_element(By.NAME, "allow_mass_delete").click()
            browser.find_element(By.ID, button).click()
            return until(
                lambda: (
                    (kb := http.get("/ui/status.json").json()[0])["last_outcome"] == outcome
                    and not kb["sync_running"]
                    and kb
                ),
                120,
                0.2,
                what=f"the sync {button} started",
            )

        browser.delete_all_cookies()
        browser.get(f"http://127.0.0.1:{port}/ui/kb/docs")
        in_form = browser.execute_script(
            "const box = document.querySelector('[name=allow_mass_delete]');"
            "return [...box.form.elements].filter(e => e.type === 'submit').map(e => e.id)"
        )
        _shot(browser, tmp_path, "sync-buttons")
        rebuilt = pressed("rebuild", "failed")
        synced = pressed("sync", "ok")
    assert in_form == ["sync"]
    assert rebuilt["last_outcome"] == "failed" and "would delete 2 of its 2 documents" in rebuilt["last_error"]
    assert rebuilt["files"] == 2
    assert synced["last_outcome"] == "ok" and synced["files"] == 0
