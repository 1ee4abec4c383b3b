"""An OAuth 2.1 authorization server on 127.0.0.1, as far as a resource server sees one: its metadata
(RFC 8414, naming its jwks_uri) and its JWKS, with signing keys the test makes, rotates, or takes
down. `token()` signs an access token as the issuer would. It counts the JWKS fetches."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa


@dataclass
class Issuer:
    url: str = ""
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> private key, all published
    down: bool = False  # every request answers 500
    jwks_fetches: int = 0

    def new_key(self, kid: str, kind: str = "RSA") -> str:
        """Make and publish a signing key."""
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" \
            else ec.generate_private_key(ec.SECP256R1())
        return kid

    def jwks(self) -> dict[str, Any]:
        published = []
        for kid, key in self.keys.items():
            algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
            public = json.loads(algorithm.to_jwk(key.public_key()))
            published.append({**public, "kid": kid, "use": "sig",
                              "alg": "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"})
        return {"keys": published}

    def token(self, audience: str, subject: str = "alice@example.com", kid: str | None = None,
              lifetime: float = 300, **claims: Any) -> str:
        """An access token for `audience`, signed with key `kid` (the first key by default)."""
        kid = kid or next(iter(self.keys))
        key = self.keys[kid]
        now = int(time.time())
        payload = {"iss": self.url, "aud": audience, "sub": subject, "iat": now, "exp": now + int(lifetime), **claims}
        return jwt.encode(payload, key, algorithm="RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256",
                          headers={"kid": kid})

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        if self.down:
            return _send(handler, 500, {"error": "down"})
        if handler.path == "/.well-known/oauth-authorization-server":
            return _send(handler, 200, {"issuer": self.url, "jwks_uri": f"{self.url}/jwks.json",
                                        "authorization_endpoint": f"{self.url}/authorize",
                                        "token_endpoint": f"{self.url}/token"})
        if handler.path == "/jwks.json":
            self.jwks_fetches += 1
            return _send(handler, 200, self.jwks())
        return _send(handler, 404, {"error": "not found"})


def _send(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


@contextmanager
def serve_issuer() -> Iterator[Issuer]:
    issuer = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.answer(self)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}"
    issuer.new_key("key-1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
