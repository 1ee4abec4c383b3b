"""A documentation web site on 127.0.0.1 for the crawler's tests: pages with navigation and footers,
robots.txt, a sitemap, ETags, redirects, and switches for misbehaviour. It records every request."""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str = ""  # for redirects
    delay: float = 0.0  # seconds before answering
    etag: bool = True  # answer with an ETag (and honour If-None-Match)
    last_modified: str = ""  # answer with this Last-Modified (and honour If-Modified-Since)
    headers: dict[str, str] = field(default_factory=dict)
    drip: str = ""  # "headers" or "body": sent a byte every `drip_seconds` (a slow or hostile server)
    drip_seconds: float = 0.05
    dripped: int = -1  # bytes of the slow part sent before the client hung up (or all of them)
    drip_ended: threading.Event = field(default_factory=threading.Event)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    status: int


@dataclass
class Site:
    pages: dict[str, Page] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    in_flight: int = 0
    max_in_flight: int = 0
    trap_prefix: str = ""  # paths below it are an endless calendar, each linking to the next
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def html(self, path: str, title: str, body: str, **options: Any) -> None:
        """A page as a documentation site renders it: header, navigation, sidebar, cookie banner, footer."""
        self.pages[path] = Page(page_html(title, body).encode("utf-8"), **options)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status = self._answer(handler)
        finally:
            with self._lock:
                self.in_flight -= 1
        with self._lock:
            self.requests.append(Request(handler.path, dict(handler.headers), status))

    def _answer(self, handler: BaseHTTPRequestHandler) -> int:
        path = handler.path
        page = self.pages.get(path) or self._trap(path)
        if page is None:
            return _send(handler, 404, b"<html><body>Not found</body></html>", {"Content-Type": "text/html"})
        if page.delay:
            time.sleep(page.delay)
        headers = {"Content-Type": page.content_type, **page.headers}
        if page.drip:
            return _drip(handler, page, headers)
        if page.location:
            return _send(handler, page.status, b"", {**headers, "Location": page.location})
        if page.status != 200:
            return _send(handler, page.status, page.body, headers)
        if page.last_modified:
            headers["Last-Modified"] = page.last_modified
            if handler.headers.get("If-Modified-Since") == page.last_modified:
                return _send(handler, 304, b"", {})
        if page.etag:
            etag = '"' + hashlib.sha256(page.body).hexdigest()[:16] + '"'
            headers["ETag"] = etag
            if handler.headers.get("If-None-Match") == etag:
                return _send(handler, 304, b"", {"ETag": etag})
        return _send(handler, 200, page.body, headers)

    def _trap(self, path: str) -> Page | None:
        if not self.trap_prefix or not path.startswith(self.trap_prefix):
            return None
        number = int(path[len(self.trap_prefix) :].strip("/") or 0)
        link = f'<a href="{self.trap_prefix}{number + 1}/">next month</a>'
        return Page(page_html(f"Calendar {number}", f"<h1>Month {number}</h1><p>Nothing planned. {link}</p>").encode())


def page_html(title: str, body: str) -> str:
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head><body>
<header><a href="/guide/">Docs home</a> <a href="/guide/install/">Install</a></header>
<nav class="sidebar"><ul><li><a href="/guide/">Introduction</a></li><li><a href="/guide/install/">Installation</a></li>
<li><a href="/guide/query-params/">Query Parameters</a></li></ul></nav>
<div class="cookie-banner" id="cookie-consent"><p>We use cookies to improve your experience. Accept all cookies?</p>
<button>Accept</button></div>
<main><article>{body}</article></main>
<footer><p>Copyright 2026 Example Docs Inc. All rights reserved. Built with a static site generator.</p></footer>
</body></html>"""


def gzip_bomb(megabytes: int) -> bytes:
    """A small gzip body that inflates to `megabytes` of zeros."""
    return gzip.compress(b"\0" * (megabytes * 1024 * 1024), compresslevel=9)


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> int:
    try:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if body:
            handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):  # the crawler gave up on a slow or large answer
        pass
    return status


def _drip(handler: BaseHTTPRequestHandler, page: Page, headers: dict[str, str]) -> int:
    """Send the answer a byte at a time: the status line and headers too, or only the body."""
    head = "HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(page.body)}\r\n\r\n"
    slow, fast = (head.encode() + page.body, b"") if page.drip == "headers" else (page.body, head.encode())
    sent = 0
    try:
        handler.wfile.write(fast)
        for byte in slow:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            sent += 1
            time.sleep(page.drip_seconds)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up: what the tests expect
        pass
    page.dripped = sent
    page.drip_ended.set()
    return 200


@contextmanager
def serve_site(site: Site) -> Iterator[Site]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            site.answer(self)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a crawler hanging up on a slow or huge answer is part of the tests

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
