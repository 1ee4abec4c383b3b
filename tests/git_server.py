"""Git repositories for the repository tests: made with the git command line in a temporary folder, and served
over smart HTTP on 127.0.0.1 by git's own `git http-backend` (a CGI program) behind a small server that can ask
for a token, drip, or lie. It records the Authorization headers it saw."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from helpers import http_on_loopback

_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": os.devnull,
}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run git in a test repository (no user or system config), returning its output."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **_ENV}
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=env, check=True)
    return done.stdout.decode()


class Repo:
    """A repository with a working tree, on branch main."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        git(folder, "init", "-q", "-b", "main")

    def write(self, path: str, text: str | bytes) -> None:
        target = self.folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode() if isinstance(text, str) else text)

    def commit(self, message: str = "change") -> str:
        git(self.folder, "add", "-A")
        git(self.folder, "commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return git(self.folder, "rev-parse", "HEAD").strip()


@dataclass
class GitServer:
    url: str
    token: str = ""  # when set, every request needs Basic auth with it as the password
    drip: bool = False  # send the answer a byte at a time, slowly
    lie: bool = False  # answer with garbage that claims to be git's
    redirect: str = ""  # answer every request with a redirect to this base URL (another server)
    authorizations: list[str] = field(default_factory=list)


@contextmanager
def serve_git(root: Path, token: str = "", username: str = "x-access-token") -> Iterator[GitServer]:
    """Repositories below `root` at http://127.0.0.1:PORT/<name>, through `git http-backend`."""
    server = GitServer("", token)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._backend()

        def do_POST(self) -> None:
            self._backend()

        def _backend(self) -> None:
            seen = self.headers.get("Authorization", "")
            server.authorizations.append(seen)
            if server.redirect:
                self.send_response(302)
                self.send_header("Location", server.redirect + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if server.token and seen != "Basic " + base64.b64encode(f"{username}:{server.token}".encode()).decode():
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if server.lie:
                body = b"001e# service=git-upload-pack\n0000" + os.urandom(512)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self._cgi()

        def _cgi(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
                **_ENV,
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": parts.path,
                "QUERY_STRING": parts.query,
                "REMOTE_ADDR": "127.0.0.1",
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            done = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env, check=False)
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if server.drip:
                for byte in payload:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.5)
            else:
                self.wfile.write(payload)

    with http_on_loopback(Handler) as server.url:
        yield server
