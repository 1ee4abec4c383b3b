"""The crawl: breadth first within the scope, from the start URL, the sitemaps and the pages the index
holds, to max_pages and max_depth; a SourceFile per page kept and a SkippedFile per page not read."""

from __future__ import annotations

import urllib.robotparser
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


from ...settings import KBConfig, WebSourceConfig, megabytes
from ...errors import KBError
from ..parsers import is_binary_format
from ...records import Progress
from ..sources import SkippedFile, SourceFile
from .fetch import GONE, Fetched, Fetcher, as_utf8
from .links import page_links
from .pagecache import CachedPage, PageCache, body_file_name
from .robots import read_robots, sitemap_urls
from .urls import Scope, suffix_for


@dataclass
class CrawlStats:
    """What a crawl cost, for the sync report."""

    requests: int = 0
    downloaded: int = 0  # pages whose body came (200)
    not_modified: int = 0  # pages answered 304
    stopped_at_max_pages: int = 0  # links in scope left unfetched, when max_pages was reached


@dataclass
class Crawl:
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    stats: CrawlStats = field(default_factory=CrawlStats)


@dataclass(frozen=True)
class _KBCrawl:
    """One KB's crawl as each of its sources adds to it: the KB, the page cache, the page ids its index holds, the
    crawl found so far, and who hears how far it is."""

    kb: KBConfig
    cache: PageCache
    known: set[str]
    crawl: Crawl
    progress: Progress | None


def crawl_kb(kb: KBConfig, cache_folder: Path, known: Iterable[str] = (), progress: Progress | None = None) -> Crawl:
    """Crawl every URL source of a KB; `known` are the page ids its index holds (each is asked
    for again, so a page leaves the index only when its site says it is gone)."""
    crawling = _KBCrawl(kb, PageCache(cache_folder), set(known), Crawl(), progress)
    try:
        for source in kb.urls:
            _crawl_source(crawling, source)
    finally:
        crawling.cache.save()
    return crawling.crawl


def _crawl_source(crawling: _KBCrawl, source: WebSourceConfig) -> None:
    crawl = crawling.crawl
    scope = Scope.of(source)
    fetcher = Fetcher(scope, megabytes(source.max_page_mb))
    try:
        try:
            robots, listed = read_robots(fetcher)
        except KBError as exc:
            crawl.skipped.append(
                SkippedFile(
                    scope.prefix, f"site unreachable ({exc}); its pages keep their indexed version", unreadable=True
                )
            )
            return
        crawl_delay = robots.crawl_delay(source.user_agent)
        if crawl_delay:
            fetcher.delay = max(fetcher.delay, min(float(crawl_delay), 60.0))
        seeds = [scope.start, *sorted(k for k in crawling.known if scope.contains(k))]
        if source.sitemap == "auto":
            listed_pages, problems = sitemap_urls(fetcher, listed)
            seeds += [u for u in (scope.normalize(x) for x in listed_pages) if u and scope.contains(u)]
            crawl.skipped += [SkippedFile(scope.start, problem) for problem in problems]
        _Walk(crawling, scope, fetcher, robots).run(seeds)
    finally:
        crawl.stats.requests += fetcher.requests
        fetcher.close()


class _Walk:
    """Breadth-first fetching of one source, a wave of links per depth, `concurrency` at a time."""

    def __init__(self, crawling: _KBCrawl, scope: Scope, fetcher: Fetcher, robots: urllib.robotparser.RobotFileParser):
        self.kb, self.scope, self.fetcher, self.robots = crawling.kb, scope, fetcher, robots
        self.cache, self.crawl, self.progress = crawling.cache, crawling.crawl, crawling.progress
        self.source = scope.source
        self.requested: set[str] = set()
        self.disallowed: set[str] = set()  # by robots.txt: reported once, never requested
        self.answered = 0
        self.ids: set[str] = {f.doc_id for f in self.crawl.files}  # two sources of a KB may reach one page

    def allowed(self, url: str) -> bool:
        return self.scope.contains(url) and self.robots.can_fetch(self.source.user_agent, url)

    def run(self, seeds: list[str]) -> None:
        frontier = list(dict.fromkeys(seeds))
        with ThreadPoolExecutor(self.source.concurrency, thread_name_prefix="mcp-kb-crawl") as pool:
            for depth in range(self.source.max_depth + 1):
                wave = self._admit(frontier)
                found: list[str] = []
                for url, answer in zip(wave, pool.map(self._fetch, wave)):
                    found += self._take(url, answer)
                    self.answered += 1
                    if self.progress:
                        self.progress(
                            self.answered,
                            len(self.requested),
                            f"{self.kb.name}: crawled {self.answered} pages of {self.scope.start}",
                        )
                following = found if depth < self.source.max_depth else []
                if len(self.requested) >= self.source.max_pages:
                    self._stop_at_max_pages(frontier + following)  # this wave's unadmitted links and the next's
                    return
                if not following:
                    return
                frontier = following

    def _admit(self, frontier: list[str]) -> list[str]:
        """The next wave: new URLs that robots.txt allows, up to max_pages in all."""
        wave = []
        for url in dict.fromkeys(frontier):
            if url in self.requested or url in self.disallowed or len(self.requested) >= self.source.max_pages:
                continue
            if self.robots.can_fetch(self.source.user_agent, url):
                self.requested.add(url)
                wave.append(url)
            else:
                self.disallowed.add(url)
                self.crawl.skipped.append(SkippedFile(url, "disallowed by robots.txt"))
        return wave

    def _stop_at_max_pages(self, links: list[str]) -> None:
        left = len({url for url in links if url not in self.requested and url not in self.disallowed})
        if left:
            self.crawl.stats.stopped_at_max_pages += left
            self.crawl.skipped.append(
                SkippedFile(
                    self.scope.start,
                    f"crawl stopped at max_pages = {self.source.max_pages}: {left} more links in scope not fetched",
                )
            )

    def _fetch(self, url: str) -> Fetched:
        return self.fetcher.get(url, self.cache.get(url), allowed=self.allowed)

    def _take(self, url: str, answer: Fetched) -> list[str]:
        """Record one answer; returns the links to follow from it."""
        cached = self.cache.get(url)
        if answer.final_url:
            self.requested.add(answer.final_url)
        if answer.not_modified and cached:
            self.crawl.stats.not_modified += 1
            return self._keep(cached)
        if answer.status == 200:
            self.crawl.stats.downloaded += 1
            return self._store(url, answer)
        if answer.status in GONE:
            self.cache.forget(url)
        if answer.transient and cached:  # the indexed version stays; its links still lead on
            self.crawl.skipped.append(SkippedFile(cached.doc_id, answer.error, unreadable=True))
            return cached.links
        self.crawl.skipped.append(
            SkippedFile(url, answer.error or f"HTTP {answer.status}", unreadable=answer.transient)
        )
        return []

    def _store(self, url: str, answer: Fetched) -> list[str]:
        suffix = suffix_for(answer.final_url, answer.content_type)
        if suffix is None:
            self.crawl.skipped.append(
                SkippedFile(answer.final_url, f"unsupported content type {answer.content_type or '(none)'}")
            )
            return []
        body = answer.body if is_binary_format(suffix) or not answer.charset else as_utf8(answer.body, answer.charset)
        links: list[str] = []
        canonical, noindex = None, False
        if suffix == ".html":
            links, canonical, noindex = page_links(body, answer.final_url, self.scope)
        page = CachedPage(
            url,
            canonical or answer.final_url,
            body_file_name(url, body, suffix),
            answer.etag,
            answer.last_modified,
            links,
            indexable=not noindex,
        )
        self.cache.put(page, body)
        return self._keep(page)

    def _keep(self, page: CachedPage) -> list[str]:
        if page.indexable and page.doc_id not in self.ids:
            self.ids.add(page.doc_id)
            self.crawl.files.append(_source_file(self.cache, page))
        return page.links


def _source_file(cache: PageCache, page: CachedPage) -> SourceFile:
    path = cache.body_path(page)
    info = path.stat()
    return SourceFile(path, page.doc_id, info.st_size, info.st_mtime_ns)
