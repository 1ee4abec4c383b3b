"""The KB's `urls` as one Source (ingest/sources.py): ids are normalized URLs, bodies live in the page cache."""

from __future__ import annotations

import posixpath
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit


from ...settings import KBConfig
from ..parsers import is_supported
from ...records import Progress
from ..sources import Revisions, SourceScan
from .urls import ORIGIN, PAGE_SUFFIXES, is_url

class WebSource:
    """The KB's `urls` as one source: document ids are normalized URLs, bodies live in the page cache."""

    ROOTED_ID = ORIGIN  # a path filter starting with "/" matches pages by URL path, on any host

    def __init__(self, kb: KBConfig, cache_folder: Path):
        self.kb = kb
        self.cache_folder = cache_folder

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[WebSource]:
        return [cls(kb, cache_folder)] if kb.urls else []

    owns = staticmethod(is_url)

    @staticmethod
    def kind_of(doc_id: str) -> str:
        """"web page" for an HTML page, else the suffix of the file it serves ("pdf")."""
        suffix = posixpath.splitext(urlsplit(doc_id).path)[1].lower()
        return "web page" if suffix in PAGE_SUFFIXES or not is_supported(suffix) else suffix.lstrip(".")

    def scan(self, known: dict[str, tuple[int, int]], progress: Progress | None = None,
             revisions: Revisions | None = None) -> SourceScan:
        from .crawl import crawl_kb  # the crawler (and httpx) loads to crawl: every sync imports this module

        crawl = crawl_kb(self.kb, self.cache_folder, [doc_id for doc_id in known if is_url(doc_id)], progress)
        return SourceScan(crawl.files, crawl.skipped, asdict(crawl.stats))

    def watch_folders(self) -> list[Path]:
        return []  # pages change on their site: `[kb.sync] interval` (or watch's default) crawls again

    def concerns(self, path: Path) -> bool:
        return False
