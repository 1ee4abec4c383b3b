"""The KB's `urls` as one Source (ingest/sources.py): ids are normalized URLs, bodies live in the page cache."""

from __future__ import annotations

import posixpath
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit


from ...doc_ids import is_url
from ...settings import KBConfig
from ..parsers import is_supported
from ...records import Progress, seconds_of
from ..sources import Indexed, Recorded, Revisions, SourceScan
from .urls import PAGE_SUFFIXES

_FRESH_SECONDS = 86_400.0  # a page of a KB that asks its sites again on no schedule is old after a day


class WebSource:
    """The KB's `urls` as one source: document ids are normalized URLs, bodies live in the page cache."""

    def __init__(self, kb: KBConfig, cache_folder: Path):
        self.kb = kb
        self.cache_folder = cache_folder

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[WebSource]:
        return [cls(kb, cache_folder)] if kb.urls else []

    owns = staticmethod(is_url)

    @staticmethod
    def kind_of(doc_id: str) -> str:
        """ "web page" for an HTML page, else the suffix of the file it serves ("pdf")."""
        suffix = posixpath.splitext(urlsplit(doc_id).path)[1].lower()
        return "web page" if suffix in PAGE_SUFFIXES or not is_supported(suffix) else suffix.lstrip(".")

    def scan(
        self, known: dict[str, tuple[int, int]], progress: Progress | None = None, revisions: Revisions | None = None
    ) -> SourceScan:
        from .crawl import crawl_kb  # the crawler (and httpx) loads to crawl: every sync imports this module

        crawl = crawl_kb(self.kb, self.cache_folder, [doc_id for doc_id in known if is_url(doc_id)], progress)
        return SourceScan(crawl.files, crawl.skipped, asdict(crawl.stats))

    def changed(self, recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
        """Each page when its site was last asked longer ago than the KB asks it again (`[kb.sync] interval`, an hour
        under `watch`, else a day): the site may have changed it since (asking the site would make an answer wait)."""
        fresh_for = self.kb.sync.asks_again_every or _FRESH_SECONDS
        asked = seconds_of(indexed.confirmed_at)  # every sync asks every page again
        age = time.time() - asked if asked is not None else None
        old = (
            f"its site was last asked {_age(age)} ago; it may have changed the page since"
            if age is not None and age > fresh_for
            else ""
        )
        return {doc_id: old for doc_id in recorded if is_url(doc_id)}

    @staticmethod
    def listing(known: dict[str, tuple[int, int]]) -> None:
        return None  # pages are asked of their site: a sync's crawl counts them

    def watch_folders(self) -> list[Path]:
        return []  # pages change on their site: `[kb.sync] interval` (or watch's default) crawls again

    def concerns(self, path: Path) -> bool:
        return False


def _age(seconds: float) -> str:
    """A time span as a person says it: seconds, minutes, hours, then days."""
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} seconds"
