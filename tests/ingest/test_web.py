"""Web sources: a real site on 127.0.0.1 crawled into a real index with the real model."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import mcp_kb.settings.kb
from click.testing import CliRunner
from mcp import Client

from fake_site import Page, Site, gzip_bomb, serve_site
from mcp_kb import cli, live
from mcp_kb.settings import WebSourceConfig
from mcp_kb.errors import ConfigError, KBError, MassDeleteError
from mcp_kb.mcp.server import build_server
from mcp_kb.ingest.web.pagecache import PageCache
from mcp_kb.ingest.web.urls import Scope, normalize_url, suffix_for
from pdfs import text_pdf
from mcp_kb.api import SearchRequest, SyncRequest
from helpers import MakeApp, chunk_table, text_of
from mcp_kb.app import App

QUERY_PARAMS = """<h1>Query Parameters</h1>
<p>When you declare function parameters that are not part of the path, they are read from the query string.</p>
<h2>Defaults</h2><p>Query parameters can have default values such as skip=0 and limit=10.</p>
<h2>Optional parameters</h2>
<p>Declare an optional query parameter by setting its default to None; FastAPI then treats q as optional.</p>
<pre><code>from fastapi import FastAPI

app = FastAPI()

@app.get("/items/{item_id}")
async def read_item(item_id: str, q: str | None = None):
    if q:
        return {"item_id": item_id, "q": q}
    return {"item_id": item_id}
</code></pre>
<p>Links: <a href="/guide/old-install/">the old install page</a>, <a href="/guide/missing/">a broken link</a>,
<a href="/outside/secret/">a page outside the guide</a>, <a href="http://127.0.0.2:9/guide/">another host</a>,
<a href="/guide/private/notes/">private notes</a>, <a href="/guide/manual.pdf">the manual</a>,
<a href="/guide/query-params/?utm_source=nav#optional">this page again</a>.</p>"""


def build_site(tmp_path: Path) -> Site:
    site = Site()
    site.html(
        "/guide/",
        "Introduction - Example Docs",
        "<h1>Introduction</h1><p>Example Docs explain how to build web APIs with typed Python functions. "
        "Start with <a href='/guide/install/'>installation</a>, then read about "
        "<a href='query-params/'>query parameters</a>.</p>",
    )
    site.html(
        "/guide/install/",
        "Installation - Example Docs",
        "<h1>Installation</h1><p>Install the package with pip install example-docs inside a virtual "
        "environment, then run the development server with uvicorn.</p>",
    )
    site.html("/guide/query-params/", "Query Parameters - Example Docs", QUERY_PARAMS)
    site.html(
        "/guide/from-sitemap/",
        "Deployment - Example Docs",
        "<h1>Deployment</h1><p>Deploy behind a reverse proxy such as nginx with several worker processes; "
        "no page links here, only the sitemap names it.</p>",
    )
    site.html("/guide/private/notes/", "Private", "<h1>Private</h1><p>Internal salary bands are listed here.</p>")
    site.html("/outside/secret/", "Secret", "<h1>Secret</h1><p>The launch codes live outside the guide.</p>")
    site.pages["/guide/old-install/"] = Page(b"", status=301, location="/guide/install/")
    manual = text_pdf(tmp_path / "manual.pdf", ["The printed manual covers rate limiting with a token bucket."])
    site.pages["/guide/manual.pdf"] = Page(manual.read_bytes(), content_type="application/pdf")
    site.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /guide/private/\n", content_type="text/plain")
    site.pages["/sitemap.xml"] = Page(
        b'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>URL/guide/from-sitemap/</loc></url><url><loc>URL/outside/secret/</loc></url></urlset>",
        content_type="application/xml",
    )
    return site


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = build_site(tmp_path)
    with serve_site(site):
        sitemap = site.pages["/sitemap.xml"]
        sitemap.body = sitemap.body.replace(b"URL", site.url.encode())
        yield site


def web_kb(site: Site, **source: object) -> dict[str, Any]:
    return {
        "name": "docs",
        "description": "Example Docs web site",
        "urls": [{"url": f"{site.url}/guide/", "delay": 0, **source}],
    }


def indexed(app: App) -> set[str]:
    return {
        path.removeprefix(app.config.kb[0].urls[0].url.rsplit("/guide/", 1)[0]) for path in app.document_ids("docs")
    }


# ---- URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("HTTP://Docs.Example.COM:80/a/b/../c/#frag", "http://docs.example.com/a/c/"),
        ("https://docs.example.com:443", "https://docs.example.com/"),
        ("https://docs.example.com:8443/x?utm=1&b=2", "https://docs.example.com:8443/x"),
        ("https://docs.example.com/./a//b", "https://docs.example.com/a/b"),
        ("mailto:someone@example.com", None),
        ("javascript:alert(1)", None),
        ("https://[::1]:8000/a", "https://[::1]:8000/a"),
        ("https://x.org/docs/café page/", "https://x.org/docs/caf%C3%A9%20page/"),
        ("https://x.org/docs/caf%c3%a9%20page/", "https://x.org/docs/caf%C3%A9%20page/"),
    ],
)
def test_urls_are_normalized_to_one_spelling(raw: str, expected: str | None) -> None:
    assert normalize_url(raw) == expected


def test_query_parameters_that_name_a_page_are_kept_sorted() -> None:
    assert (
        normalize_url("https://w.example/index.php?title=Main&action=view&oldid=3", ["title", "oldid"])
        == "https://w.example/index.php?oldid=3&title=Main"
    )


def test_scope_is_the_start_folder_on_its_host_within_the_globs() -> None:
    scope = Scope.of(WebSourceConfig(url="https://docs.example.com/guide/index.html", exclude=["*/changelog/*"]))
    assert scope.prefix == "https://docs.example.com/guide/"
    assert scope.contains("https://docs.example.com/guide/tutorial/")
    assert not scope.contains("https://docs.example.com/guide/changelog/2024/")
    assert not scope.contains("https://docs.example.com/blog/")
    assert not scope.contains("https://evil.example/guide/")
    assert not scope.contains("https://docs.example.com.evil.example/guide/")


def test_a_body_is_parsed_by_its_content_type_or_telling_suffix() -> None:
    assert suffix_for("https://x/guide/", "text/html") == ".html"
    assert suffix_for("https://x/README.md", "text/plain") == ".md"
    assert suffix_for("https://x/download?id=3", "application/pdf") == ".pdf"
    assert suffix_for("https://x/logo.svg", "image/svg+xml") is None


# ---- crawling a site --------------------------------------------------------------------------


def test_a_site_is_crawled_within_its_scope_and_searched_with_url_citations(site: Site, make_app: MakeApp) -> None:
    kb = web_kb(site, concurrency=2)
    kb["chunking"] = {"max_tokens": 128, "overlap": 12}  # a section a chunk, so citations name sections
    app = make_app(kb)
    report = app.sync(SyncRequest(kb="docs"))[0]

    assert indexed(app) == {
        "/guide/",
        "/guide/install/",
        "/guide/query-params/",
        "/guide/from-sitemap/",
        "/guide/manual.pdf",
    }
    assert report.crawl["downloaded"] == 6  # five documents and the redirect's target reached once more
    skipped = {s.path.removeprefix(site.url): s.reason for s in report.skipped}
    assert "gone" in skipped["/guide/missing/"]
    assert "robots.txt" in skipped["/guide/private/notes/"]
    # Nothing outside the scope was requested, nor more at once than allowed.
    assert all(p.startswith("/guide/") or p in ("/robots.txt", "/sitemap.xml") for p in site.paths())
    assert "/guide/private/notes/" not in site.paths() and site.max_in_flight <= 2

    hit = app.search("docs", SearchRequest(query="how do I make a query parameter optional", top_k=1)).hits[0]
    assert hit.source == f"{site.url}/guide/query-params/" and "Optional parameters" in hit.text
    chunks = chunk_table(app.store, "docs").to_arrow().to_pylist()
    code = next(c for c in chunks if "async def read_item" in c["text"])
    assert code["heading"] == "Query Parameters › Optional parameters" and code["title"].startswith("Query Parameters")
    assert '    if q:\n        return {"item_id": item_id, "q": q}' in code["text"]  # code, indentation kept
    text = " ".join(
        h.text
        for h in app.search("docs", SearchRequest(query="cookies copyright sidebar", top_k=20, mode="keyword")).hits
    )
    assert "cookies" not in text and "Copyright" not in text  # banners and footers are not content
    assert (
        app.search("docs", SearchRequest(query="token bucket rate limiting", top_k=1))
        .hits[0]
        .source.endswith("/guide/manual.pdf")
    )
    assert app.summary("docs").kinds == {"web page": 4, "pdf": 1}


def test_an_unchanged_site_costs_one_conditional_request_a_page_and_no_embedding(site: Site, make_app: MakeApp) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    site.clear_log()
    report = app.sync(SyncRequest(kb="docs"))[0]

    assert report.chunks_embedded == 0 and report.files_unchanged == 5
    pages = [r for r in site.requests if r.path.startswith("/guide/") and r.status != 404]
    assert pages and all("If-None-Match" in r.headers for r in pages if r.status != 301)
    assert {r.status for r in pages} <= {304, 301}
    # five pages, and the old address that redirects to one of them
    assert report.crawl["not_modified"] == 6 and report.crawl["downloaded"] == 0


def test_changed_removed_and_failing_pages(site: Site, make_app: MakeApp) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    site.html(
        "/guide/install/",
        "Installation - Example Docs",
        "<h1>Installation</h1><p>Install the package with conda from the community channel instead.</p>",
    )
    del site.pages["/guide/from-sitemap/"]
    site.pages["/sitemap.xml"].body = site.pages["/sitemap.xml"].body.replace(b"from-sitemap", b"gone-page")
    query_page = site.pages["/guide/query-params/"]
    site.pages["/guide/query-params/"] = Page(b"<html><body>Internal Server Error</body></html>", status=500)
    report = app.sync(SyncRequest(kb="docs"))[0]

    assert report.files_changed == 1 and report.files_deleted == 1
    assert 0 < report.chunks_embedded <= 2  # only the changed page
    assert "/guide/from-sitemap/" not in indexed(app)
    assert "/guide/query-params/" in indexed(app)  # a 500 keeps the old version...
    assert any("HTTP 500" in f.reason and f.path.endswith("/guide/query-params/") for f in report.failures)
    assert (
        app.search("docs", SearchRequest(query="optional query parameter None", top_k=1))
        .hits[0]
        .source.endswith("/query-params/")
    )
    assert (
        app.search("docs", SearchRequest(query="conda community channel", top_k=1))
        .hits[0]
        .source.endswith("/guide/install/")
    )

    site.pages["/guide/query-params/"] = query_page  # ...until the page is back: nothing to embed then
    assert app.sync(SyncRequest(kb="docs"))[0].chunks_embedded == 0


def test_an_unreachable_site_keeps_its_index(site: Site, make_app: MakeApp, tmp_path: Path) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    before = indexed(app)
    site.pages["/robots.txt"] = Page(b"", status=503)
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert report.files_deleted == 0 and indexed(app) == before
    assert any("unreachable" in f.reason for f in report.failures)


# ---- bad input and manners --------------------------------------------------------------------


def test_hostile_pages_are_bounded_and_reported(site: Site, make_app: MakeApp) -> None:
    site.trap_prefix = "/guide/calendar/"
    site.pages["/guide/bomb/"] = Page(gzip_bomb(64), headers={"Content-Encoding": "gzip"})
    site.pages["/guide/huge/"] = Page(b"<html><body><p>" + b"word " * 500_000 + b"</p></body></html>")
    site.pages["/guide/slow/"] = Page(b"<html><body><p>late</p></body></html>", delay=3)
    site.pages["/guide/loop-a/"] = Page(b"", status=302, location="/guide/loop-b/")
    site.pages["/guide/loop-b/"] = Page(b"", status=302, location="/guide/loop-a/")
    site.pages["/guide/away/"] = Page(b"", status=301, location="http://127.0.0.2:9/elsewhere/")
    site.pages["/guide/broken/"] = Page(b"<html><body><div><p>Unclosed <b>tags <table><tr><td>cell")
    site.pages["/guide/latin/"] = Page(
        "<html><body><h1>编码</h1><p>这页用 UTF-8 写成，服务器却声称是 Latin-1 编码。</p></body></html>".encode(),
        content_type="text/html; charset=iso-8859-1",
    )
    links = "".join(
        f'<a href="/guide/{p}/">{p}</a> '
        for p in ("calendar/1", "bomb", "huge", "slow", "loop-a", "away", "broken", "latin")
    )
    site.html("/guide/", "Introduction", f"<h1>Introduction</h1><p>Every odd page: {links}</p>")
    app = make_app(web_kb(site, max_pages=40, max_depth=100, timeout=1, max_page_mb=1))
    report = app.sync(SyncRequest(kb="docs"))[0]

    reasons = {s.path.removeprefix(site.url): s.reason for s in report.skipped + report.failures}
    assert "too large" in reasons["/guide/bomb/"] and "too large" in reasons["/guide/huge/"]
    assert "within 1 s" in reasons["/guide/slow/"]
    assert "redirect loop" in reasons["/guide/loop-a/"]
    assert "out of scope" in reasons["/guide/away/"]
    assert "max_pages = 40" in reasons["/guide/"] and report.crawl["stopped_at_max_pages"] >= 1
    assert len([p for p in site.paths() if p.startswith("/guide/")]) <= 40 + 2  # + the loop's second hop
    assert all(p.startswith("/guide/") or p in ("/robots.txt", "/sitemap.xml") for p in site.paths())
    assert (
        app.search("docs", SearchRequest(query="服务器 编码", top_k=1, mode="keyword"))
        .hits[0]
        .source.endswith("/guide/latin/")
    )
    assert "/guide/broken/" in indexed(app)


def test_robots_txt_disallowing_everything_fetches_nothing(site: Site, make_app: MakeApp) -> None:
    site.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /\n", content_type="text/plain")
    app = make_app(web_kb(site, sitemap="off"))
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert site.paths() == ["/robots.txt"]
    assert report.files_added == 0 and any("robots.txt" in s.reason for s in report.skipped)


def test_header_tokens_come_from_the_environment_and_never_reach_the_index(
    site: Site, make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WIKI_TOKEN", "s3cr3t-wiki-token")
    app = make_app(web_kb(site, headers={"Authorization": "Bearer ${WIKI_TOKEN}"}))
    app.sync(SyncRequest(kb="docs"))
    assert all(r.headers.get("Authorization") == "Bearer s3cr3t-wiki-token" for r in site.requests)
    stored = b"".join(p.read_bytes() for p in (tmp_path / "index").rglob("*") if p.is_file())
    assert b"s3cr3t-wiki-token" not in stored
    monkeypatch.delenv("WIKI_TOKEN")
    with pytest.raises(Exception, match="WIKI_TOKEN, which is not set"):
        app.sync(SyncRequest(kb="docs"))


def test_the_document_resource_returns_a_pages_text_from_the_index_and_refuses_others(
    site: Site, make_app: MakeApp
) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    requests = len(site.requests)
    text = app.document_text("docs", f"{site.url}/guide/query-params/")
    assert "Optional parameters" in text and "Copyright" not in text
    assert len(site.requests) == requests  # read from the index, not fetched again
    with pytest.raises(Exception, match="has no document"):
        app.document_text("docs", f"{site.url}/outside/secret/")


# ---- through the MCP server and the live triggers ---------------------------------------------


@pytest.mark.anyio
async def test_mcp_clients_search_pages_and_read_them_by_url(site: Site, make_app: MakeApp) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    url = f"{site.url}/guide/query-params/"
    async with Client(build_server(app)) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "search_docs")
        assert tool.description and "web page" in tool.description
        result = await client.call_tool("search_docs", {"query": "optional query parameter", "top_k": 1})
        assert result.structured_content["results"][0]["source"] == url
        text = text_of((await client.read_resource(f"kb://docs/documents/{url}")).contents[0])
        assert "Optional parameters" in text
        with pytest.raises(Exception, match="has no document"):
            await client.read_resource(f"kb://docs/documents/{site.url}/outside/secret/")


@pytest.mark.anyio
async def test_watching_a_web_kb_recrawls_it_on_a_schedule(
    site: Site, make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_kb.settings.kb, "WATCH_POLL_SECONDS", 0.3)
    kb = web_kb(site)
    kb["sync"] = {"on_start": True, "watch": True}
    app = make_app(kb)
    runner = live.SyncRunner(app)
    async with anyio.create_task_group() as group:
        group.start_soon(live.LiveSync(runner, app.config.kb).run)
        await _eventually(lambda: "/guide/install/" in indexed(app))
        site.html("/guide/install/", "Installation", "<h1>Installation</h1><p>Use the zipapp installer now.</p>")
        await _eventually(
            lambda: app.search("docs", SearchRequest(query="zipapp installer", top_k=1, mode="keyword")).hits
        )
        group.cancel_scope.cancel()


async def _eventually(check: Callable[[], object], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except KBError:  # not synced yet
            pass
        await anyio.sleep(0.1)
    raise AssertionError("condition not met before the deadline")


def test_path_filters_match_url_paths_on_any_host(site: Site, make_app: MakeApp) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    for condition in (
        {"prefix": "/guide/install"},
        {"glob": "/guide/install/"},
        {"glob": "/guide/inst*/"},
        {"prefix": f"{site.url}/guide/install/"},
    ):
        hits = app.search(
            "docs", SearchRequest(query="install", mode="filter", top_k=10, filters={"path": condition})
        ).hits
        assert {h.source for h in hits} == {f"{site.url}/guide/install/"}, condition
    assert not app.search(
        "docs", SearchRequest(query="x", mode="filter", filters={"path": {"prefix": "/outside/"}})
    ).hits


def test_a_lost_page_cache_costs_downloads_never_embeddings(site: Site, make_app: MakeApp, tmp_path: Path) -> None:
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    shutil.rmtree(tmp_path / "index" / "web")
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert report.crawl["downloaded"] == 6 and report.crawl["not_modified"] == 0
    assert report.chunks_embedded == 0 and report.files_unchanged == 5


def test_a_crawl_cut_short_never_pairs_a_body_with_another_bodys_etag(
    site: Site, make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after a new body was written but before the page list was saved, then the page
    reverts: the old ETag answers 304, and the index must hold the reverted text, not the new one."""
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    original = site.pages["/guide/install/"]
    site.html("/guide/install/", "Installation", "<h1>Installation</h1><p>Install from the nightly tarball.</p>")
    monkeypatch.setattr(PageCache, "save", lambda self: (_ for _ in ()).throw(SystemExit("killed")))
    with pytest.raises(SystemExit):
        app.sync(SyncRequest(kb="docs"))
    monkeypatch.undo()
    site.pages["/guide/install/"] = original
    app.sync(SyncRequest(kb="docs"))
    assert not app.search("docs", SearchRequest(query="nightly tarball", mode="keyword")).hits
    assert (
        app.search("docs", SearchRequest(query="pip install virtual environment", top_k=1))
        .hits[0]
        .source.endswith("/guide/install/")
    )


def test_sitemap_indexes_canonical_links_noindex_and_last_modified(site: Site, make_app: MakeApp) -> None:
    sitemap = (f"<urlset><url><loc>{site.url}/guide/listed/</loc></url></urlset>").encode()
    site.pages["/robots.txt"] = Page(
        f"User-agent: *\nSitemap: {site.url}/maps/index.xml\n".encode(), content_type="text/plain"
    )
    site.pages["/maps/index.xml"] = Page(
        f"<sitemapindex><sitemap><loc>{site.url}/maps/pages.xml.gz</loc></sitemap></sitemapindex>".encode(),
        content_type="application/xml",
    )
    site.pages["/maps/pages.xml.gz"] = Page(gzip.compress(sitemap), content_type="application/gzip")
    site.pages["/guide/listed/"] = Page(
        b'<html><head><title>Listed</title><link rel="canonical" href="/guide/listed/page.html"></head><body>'
        b"<h1>Listed</h1><p>Only the gzipped sitemap behind the sitemap index names this page.</p></body></html>",
        etag=False,
        last_modified="Wed, 21 Oct 2026 07:28:00 GMT",
    )
    site.pages["/guide/hidden/"] = Page(
        b'<html><head><meta name="robots" content="noindex"></head><body>'
        b"<p>Draft notes nobody should find.</p></body></html>"
    )
    site.html("/guide/install/", "Installation", "<h1>Installation</h1><p>See <a href='/guide/hidden/'>drafts</a>.</p>")
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    assert "/guide/listed/page.html" in indexed(app)  # its canonical URL is its id
    assert "/guide/hidden/" not in indexed(app) and "/guide/hidden/" in site.paths()
    site.clear_log()
    app.sync(SyncRequest(kb="docs"))
    listed = next(r for r in site.requests if r.path == "/guide/listed/")
    assert listed.headers.get("If-Modified-Since") == "Wed, 21 Oct 2026 07:28:00 GMT" and listed.status == 304


def test_a_sitemap_is_read_as_xml_means_it_and_its_entities_are_never_expanded(site: Site, make_app: MakeApp) -> None:
    """CDATA and namespace prefixes name pages, a commented-out entry does not, a bare "&" in a URL is
    kept, and neither an entity bomb nor an external entity (a local file) is expanded."""
    bomb = "".join(f'<!ENTITY {b} "{("&" + a + ";") * 10}">' for a, b in zip("abcdefgh", "bcdefghi"))
    site.pages["/robots.txt"] = Page(
        f"User-agent: *\nSitemap: {site.url}/map.xml\n".encode(), content_type="text/plain"
    )
    site.pages["/map.xml"] = Page(
        (
            f'<?xml version="1.0"?><!DOCTYPE s [<!ENTITY a "xxxxxxxxxx">{bomb}<!ENTITY file SYSTEM "file:///etc/passwd">]>'
            f'<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sm:url><sm:loc><![CDATA[{site.url}/guide/cdata/]]></sm:loc></sm:url>"
            f"<!-- <sm:url><sm:loc>{site.url}/guide/retired/</sm:loc></sm:url> -->"
            f"<sm:url><sm:loc>{site.url}/guide/search/?q=1&amp;lang=en&page=2</sm:loc></sm:url>"
            f"<sm:url><sm:loc>{site.url}/guide/&i;&file;</sm:loc></sm:url></sm:urlset>"
        ).encode(),
        content_type="application/xml",
    )
    for path in ("/guide/cdata/", "/guide/retired/", "/guide/search/?lang=en&page=2&q=1"):
        site.html(path, path, f"<h1>{path}</h1><p>A page only the sitemap names: {path}.</p>")
    app = make_app(web_kb(site, keep_query=["q", "lang", "page"]))
    [report] = app.sync(SyncRequest(kb="docs"))
    assert {"/guide/cdata/", "/guide/search/?lang=en&page=2&q=1"} <= indexed(app)
    assert "/guide/retired/" not in site.paths()  # a comment names no page: it was never asked for
    assert not any("root:" in path or "xxxx" in path for path in site.paths())
    assert not report.failures


def test_check_lists_the_pages_a_sync_would_index_without_indexing(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "kb.toml"
    path.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\nurls = ["{site.url}/guide/"]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli.main, ["check", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert "docs (tool search_docs): 5 files" in result.output and f"{site.url}/guide/query-params/" in result.output
    assert "skipped " + f"{site.url}/guide/missing/: HTTP 404" in result.output
    assert not (tmp_path / "index").exists()  # nothing indexed, no page cache left behind


def test_a_site_that_suddenly_loses_most_pages_is_refused_as_a_mass_deletion(site: Site, make_app: MakeApp) -> None:
    links = "".join(f"<a href='/guide/p{i}/'>page {i}</a> " for i in range(24))
    site.html("/guide/", "Introduction", f"<h1>Introduction</h1><p>All pages: {links}</p>")
    for i in range(24):
        site.html(f"/guide/p{i}/", f"Page {i}", f"<h1>Page {i}</h1><p>Topic number {i} of the guide.</p>")
    app = make_app(web_kb(site))
    app.sync(SyncRequest(kb="docs"))
    before = indexed(app)
    for i in range(24):
        del site.pages[f"/guide/p{i}/"]  # a restructured site: every old address answers 404
    with pytest.raises(MassDeleteError, match="--allow-mass-delete"):
        app.sync(SyncRequest(kb="docs"))
    assert indexed(app) == before
    assert app.sync(SyncRequest(kb="docs", allow_mass_delete=True))[0].files_deleted == 24


# ---- hostile servers: one page's failure is that page's alone ---------------------------------

BAD_LOCATIONS = {
    "js": "javascript:alert(1)",
    "mail": "mailto:someone@example.com",
    "ipv6": "http://[::1",
    "space": "http://exa mple.com/guide/",
    "port": "http://127.0.0.1:99999/guide/",
    "data": "data:text/html,<h1>hi</h1>",
}


def test_bad_redirects_links_and_headers_fail_their_page_and_the_rest_is_indexed(site: Site, make_app: MakeApp) -> None:
    for name, location in BAD_LOCATIONS.items():
        site.pages[f"/guide/r-{name}/"] = Page(b"", status=302, location=location)
    site.pages["/guide/bad-length/"] = Page(b"<html><body><p>x</p></body></html>", headers={"Content-Length": "abc"})
    site.pages["/guide/no-location/"] = Page(b"", status=302)
    links = (
        "".join(f'<a href="/guide/r-{name}/">{name}</a> ' for name in BAD_LOCATIONS)
        + '<a href="/guide/no-location/">x</a>'
    )
    site.html(
        "/guide/",
        "Introduction",
        f"<h1>Introduction</h1><p>Odd links: {links} <a href='http://[oops/'>v6</a>"
        f" <a href='/guide/bad-length/'>length</a> <a href='/guide/install/'>install</a></p>",
    )
    app = make_app(web_kb(site))
    report = app.sync(SyncRequest(kb="docs"))[0]

    assert {"/guide/", "/guide/install/", "/guide/query-params/", "/guide/from-sitemap/"} <= indexed(app)
    reasons = {s.path.removeprefix(site.url): s.reason for s in report.skipped + report.failures}
    for name in BAD_LOCATIONS:
        assert "redirects to something that is not an http(s) URL" in reasons[f"/guide/r-{name}/"], name
    assert "request failed" in reasons["/guide/bad-length/"]
    assert "without a Location" in reasons["/guide/no-location/"]


@pytest.mark.parametrize("drip", ["headers", "body"])
def test_a_server_dripping_its_answer_is_cut_at_the_page_timeout(site: Site, make_app: MakeApp, drip: str) -> None:
    # 2,000 bytes at 20 a second: 100 s if the deadline did not hold for headers and body alike
    padding = {"X-Padding": "p" * 2000} if drip == "headers" else {}
    body = b"<html><body><p>" + b"d" * (2000 if drip == "body" else 10) + b"</p></body></html>"
    site.pages["/guide/drip/"] = page = Page(body, drip=drip, headers=padding)
    site.html(
        "/guide/",
        "Introduction",
        "<h1>Introduction</h1><p>See <a href='/guide/drip/'>slow</a> and <a href='/guide/install/'>install</a>.</p>",
    )
    app = make_app(web_kb(site, timeout=1, sitemap="off"))
    report = app.sync(SyncRequest(kb="docs"))[0]
    reasons = {s.path.removeprefix(site.url): s.reason for s in report.skipped + report.failures}
    assert "no complete answer within 1 s" in reasons["/guide/drip/"]
    assert page.drip_ended.wait(30) and page.dripped < 1000  # the crawler hung up long before the drip's end
    assert "/guide/install/" in indexed(app)


def test_declared_charsets_are_honoured(site: Site, make_app: MakeApp) -> None:
    russian = "<h1>Установка</h1><p>Установите пакет командой pip в виртуальном окружении.</p>"
    site.pages["/guide/ru/"] = Page(
        f'<html><head><meta charset="windows-1251"></head><body>{russian}</body></html>'.encode("cp1251"),
        content_type="text/html; charset=windows-1251",
    )
    site.pages["/guide/ru-meta/"] = Page(
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r"></head><body>'
        "<h1>Настройка</h1><p>Настройка сервера описана здесь подробно.</p></body></html>".encode("koi8_r"),
        content_type="text/html",
    )
    site.pages["/guide/ja.txt"] = Page(
        "設定ファイルの書き方を説明します。".encode("shift_jis"), content_type="text/plain; charset=Shift_JIS"
    )
    site.html(
        "/guide/",
        "Introduction",
        "<h1>Introduction</h1><p><a href='/guide/ru/'>ru</a> "
        "<a href='/guide/ru-meta/'>ru</a> <a href='/guide/ja.txt'>ja</a></p>",
    )
    app = make_app(web_kb(site))
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert not [f for f in report.failures if "/guide/ru" in f.path or "ja.txt" in f.path], report.failures
    assert (
        app.search("docs", SearchRequest(query="Установите пакет", top_k=1, mode="keyword"))
        .hits[0]
        .source.endswith("/guide/ru/")
    )
    assert (
        app.search("docs", SearchRequest(query="Настройка сервера", top_k=1, mode="keyword"))
        .hits[0]
        .source.endswith("/guide/ru-meta/")
    )
    assert (
        app.search("docs", SearchRequest(query="設定ファイル", top_k=1, mode="keyword"))
        .hits[0]
        .source.endswith("/guide/ja.txt")
    )


def test_a_header_secret_with_a_control_character_is_refused_naming_the_variable(
    site: Site, make_app: MakeApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WIKI_TOKEN", "s3cr3t-wiki-token\r")
    with pytest.raises(ConfigError, match="WIKI_TOKEN") as refused:
        make_app(web_kb(site, headers={"Authorization": "Bearer ${WIKI_TOKEN}"}))
    assert "s3cr3t" not in str(refused.value)
    monkeypatch.delenv("WIKI_TOKEN")  # set only after the config was read: the crawl refuses it
    app = make_app(web_kb(site, headers={"Authorization": "Bearer ${WIKI_TOKEN}"}))
    monkeypatch.setenv("WIKI_TOKEN", "s3cr3t-wiki-token\n")
    with pytest.raises(ConfigError, match="WIKI_TOKEN") as refused:
        app.sync(SyncRequest(kb="docs"))
    assert "s3cr3t" not in str(refused.value) and "s3cr3t" not in json.dumps(
        [status.as_dict() for status in app.status("docs")]
    )
    assert site.requests == []


def test_http_library_errors_never_carry_request_headers_into_reports_or_state(
    site: Site, make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WIKI_TOKEN", "s3cr3t-wiki-token")
    app = make_app(web_kb(site, headers={"Authorization": "Bearer ${WIKI_TOKEN}"}))
    app.sync(SyncRequest(kb="docs"))
    real_request = httpx.AsyncHTTPTransport.handle_async_request

    async def failing(
        self: httpx.AsyncHTTPTransport, request: httpx.Request
    ) -> httpx.Response:  # what h11 says of a header it refuses: it quotes the value
        if str(request.url).endswith("/guide/install/"):
            raise httpx.LocalProtocolError("Illegal header value b'Bearer s3cr3t-wiki-token'")
        return await real_request(self, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", failing)
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert any(f.path.endswith("/guide/install/") and "LocalProtocolError" in f.reason for f in report.failures)
    assert "s3cr3t" not in json.dumps(report.as_dict()) and "s3cr3t" not in json.dumps(
        [status.as_dict() for status in app.status("docs")]
    )
    stored = b"".join(p.read_bytes() for p in (tmp_path / "index").rglob("*") if p.is_file())
    assert b"s3cr3t" not in stored


def test_a_sitemap_is_read_in_bounds_whatever_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of the protocol's size limit read as a stream: at most its 50,000 URLs, and a flood of empty
    elements stops at the element bound instead of building a tree of millions of them."""
    from mcp_kb.ingest.web import robots

    many = b"<urlset>" + b"".join(b"<url><loc>https://x.test/p%d</loc></url>" % n for n in range(50_001)) + b"</urlset>"
    kind, locations = robots._sitemap_entries(many)
    assert kind == "urlset" and len(locations) == 50_000 and locations[-1] == "https://x.test/p49999"
    monkeypatch.setattr(robots, "_MAX_SITEMAP_ELEMENTS", 1000)
    flood = b"<urlset>" + b"<a/>" * 5000 + b"<url><loc>https://x.test/late</loc></url></urlset>"
    assert robots._sitemap_entries(flood) == ("urlset", [])
