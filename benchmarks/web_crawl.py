"""Crawl and index a documentation site served on 127.0.0.1; run by hand, prints figures.

    python benchmarks/web_crawl.py                 # the English FastAPI docs (../shared/eval/fastapi-docs)
    python benchmarks/web_crawl.py --lang zh --concurrency 4

The Markdown pages are rendered to HTML the way a docs generator would (header, a sidebar linking
every page, a footer, a sitemap, ETags) and served by a threaded HTTP server on loopback. Figures:
first crawl + index (pages/s, requests), a re-sync with nothing changed (seconds, requests, 304s,
chunks embedded), and a re-sync after one page changed. Everything is written under /tmp/mcp-kb-bench.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from _beir import progress, use_offline_model  # noqa: E402
from fake_site import Page, Site, serve_site  # noqa: E402

DOCS = ROOT.parent / "shared" / "eval" / "fastapi-docs" / "docs"
WORK = Path("/tmp/mcp-kb-bench/web")


def build_site(lang: str) -> Site:
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").enable("table").render
    folder = DOCS / lang / "docs"
    files = sorted(p for p in folder.rglob("*.md") if not p.name.startswith("_"))
    urls = {
        path: "/docs/" + str(path.relative_to(folder).with_suffix("")).removesuffix("index") + "/" for path in files
    }
    urls = {path: url.replace("//", "/") for path, url in urls.items()}
    sidebar = "".join(f'<li><a href="{url}">{path.stem}</a></li>' for path, url in urls.items())
    site = Site()
    for path, url in urls.items():
        title = path.stem.replace("-", " ").title()
        body = _site_links(render(path.read_text(encoding="utf-8")), path.name == "index.md")
        site.html(url, f"{title} - FastAPI", f"<ul class='toc'>{sidebar}</ul>{body}")
    site.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", content_type="text/plain")
    return site


def _site_links(html: str, is_index: bool) -> str:
    """Links to `other.md` as a docs generator writes them: `../other/` (pages are folders)."""

    def rewrite(match: re.Match[str]) -> str:
        target = match[1].removesuffix("index")
        return f'href="{"" if is_index else "../"}{target}{"/" if target else ""}{match[2] or ""}"'

    return re.sub(r'href="([^":#]*?)\.md(#[^"]*)?"', rewrite, html)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", default="en", choices=["en", "zh"])
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    use_offline_model()
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    site = build_site(args.lang)
    shutil.rmtree(WORK, ignore_errors=True)
    with serve_site(site):
        sitemap = "".join(f"<url><loc>{site.url}{p}</loc></url>" for p in site.pages if p.startswith("/docs/"))
        site.pages["/sitemap.xml"] = Page(f"<urlset>{sitemap}</urlset>".encode(), content_type="application/xml")
        config = build_config(
            {
                "storage": str(WORK / "index"),
                "kb": [
                    {
                        "name": "fastapi",
                        "description": "FastAPI docs",
                        "urls": [{"url": f"{site.url}/docs/", "delay": 0, "concurrency": args.concurrency}],
                    }
                ],
            },
            base_dir=WORK,
            source=None,
        )
        app = App(config)
        app.embedder.embed_query("load the model before timing")
        pages = len([p for p in site.pages if p.startswith("/docs/")])

        def run(label: str) -> None:
            site.clear_log()
            started = time.perf_counter()
            report = app.sync(progress=progress)[0]
            seconds = time.perf_counter() - started
            statuses = {}
            for request in site.requests:
                statuses[request.status] = statuses.get(request.status, 0) + 1
            print(
                f"{label}: {seconds:.2f} s, {report.files_added + report.files_changed + report.files_unchanged} "
                f"pages indexed of {pages} served ({pages / seconds:.1f} pages/s), requests {len(site.requests)} "
                f"{dict(sorted(statuses.items()))}, chunks embedded {report.chunks_embedded}, stages (s) "
                f"crawl+scan {report.seconds.get('scan', 0):.2f}, parse {report.seconds.get('parse', 0):.2f}, "
                f"embed {report.seconds.get('embed', 0):.2f}"
            )

        run("first crawl + index")
        run("re-sync, nothing changed")
        some = next(p for p in site.pages if p.startswith("/docs/tutorial/"))
        site.html(some, "Changed", "<h1>Changed</h1><p>One page was edited since the last crawl.</p>")
        run(f"re-sync, {some} changed")


if __name__ == "__main__":
    main()
