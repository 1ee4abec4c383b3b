"""The page cache: each crawled page's body and validators (ETag, Last-Modified) on this machine, so an
unchanged site answers 304 and costs no download, parse or embedding."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...files import write_atomically


@dataclass
class CachedPage:
    """What the cache keeps about one requested URL: its body file and validators."""

    url: str  # as requested
    doc_id: str  # the page's id: the final URL after redirects, or its canonical link
    file: str  # body file name in the cache folder; its suffix picks the parser
    etag: str = ""
    last_modified: str = ""
    links: list[str] = field(default_factory=list)  # in-scope links found on it (for 304 answers)
    indexable: bool = True  # false for pages marked noindex (their links are still followed)


class PageCache:
    """Bodies and validators of fetched pages, in a folder per KB; a cache, so losing it costs
    one full download of each page (never a re-embedding: the content hashes decide that).

    A body's file is named by its URL and content, so the validators in pages.json always
    describe the body they name, even after a crash between writing a body and saving the list.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.pages: dict[str, CachedPage] = {}
        try:
            raw = json.loads((folder / "pages.json").read_text(encoding="utf-8"))
            self.pages = {url: CachedPage(**entry) for url, entry in raw.items()}
        except (OSError, ValueError, TypeError):
            self.pages = {}

    def get(self, url: str) -> CachedPage | None:
        page = self.pages.get(url)
        return page if page and (self.folder / page.file).is_file() else None

    def body_path(self, page: CachedPage) -> Path:
        return self.folder / page.file

    def put(self, page: CachedPage, body: bytes) -> None:
        """Keep a body; an unchanged body keeps its file (and mtime), so its hash is not recomputed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / page.file
        if not path.is_file():
            write_atomically(path, body)
        self.pages[page.url] = page

    def forget(self, url: str) -> None:
        self.pages.pop(url, None)

    def save(self) -> None:
        """Write the list of pages, then remove bodies no page names any more."""
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomically(
            self.folder / "pages.json", json.dumps({u: asdict(p) for u, p in self.pages.items()}).encode("utf-8")
        )
        named = {page.file for page in self.pages.values()} | {"pages.json"}
        for entry in os.scandir(self.folder):
            if entry.name not in named:
                Path(entry.path).unlink(missing_ok=True)


def body_file_name(url: str, body: bytes, suffix: str) -> str:
    return f"{_digest(url.encode('utf-8'))[:24]}-{_digest(body)[:16]}{suffix}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
