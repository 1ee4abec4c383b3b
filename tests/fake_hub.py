"""A model hub on 127.0.0.1 that serves one folder as a Hugging Face model repository.

It answers the few calls huggingface_hub makes to download files (repo info, tree listing, file
metadata and contents), so model downloads run for real without the internet, and it records
which files were fetched.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from collections.abc import Iterator
from urllib.parse import unquote, urlparse

from helpers import http_on_loopback

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self, repo_id: str, folder: Path, files: list[str]) -> None:
        self.repo_id = repo_id
        self.files = {name: folder / name for name in files}
        self.fetched: list[str] = []  # file names whose contents were sent
        self.url = ""

    def _tree(self) -> list[dict[str, object]]:
        return [
            {"type": "file", "path": name, "size": path.stat().st_size, "oid": _oid(path)}
            for name, path in self.files.items()
        ]

    def answer(self, handler: BaseHTTPRequestHandler, send_body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        api = f"/api/models/{self.repo_id}"
        if path in (api, f"{api}/revision/main", f"{api}/revision/{COMMIT}"):
            siblings = [{"rfilename": name} for name in self.files]
            return _send_json(handler, {"id": self.repo_id, "sha": COMMIT, "siblings": siblings})
        if path.startswith(f"{api}/tree/"):
            return _send_json(handler, self._tree())
        prefix = f"/{self.repo_id}/resolve/"
        if path.startswith(prefix):
            name = path[len(prefix) :].split("/", 1)[1]
            if name in self.files:
                return self._send_file(handler, name, send_body)
        handler.send_response(404)
        handler.send_header("X-Error-Code", "EntryNotFound")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _send_file(self, handler: BaseHTTPRequestHandler, name: str, send_body: bool) -> None:
        data = self.files[name].read_bytes()
        handler.send_response(200)
        handler.send_header("X-Repo-Commit", COMMIT)
        handler.send_header("ETag", f'"{_oid(self.files[name])}"')
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if send_body:
            self.fetched.append(name)
            handler.wfile.write(data)


def _oid(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id


def _send_json(handler: BaseHTTPRequestHandler, value: object) -> None:
    body = json.dumps(value).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def serve_hub(hub: FakeHub) -> Iterator[FakeHub]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hub.answer(self, send_body=True)

        def do_HEAD(self) -> None:
            hub.answer(self, send_body=False)

        def log_message(self, *args: object) -> None:
            pass

    with http_on_loopback(Handler) as hub.url:
        yield hub
