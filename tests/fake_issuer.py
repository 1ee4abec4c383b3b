"""An OAuth 2.1 authorization server on 127.0.0.1, as far as a resource server sees one: its metadata
(RFC 8414, naming its jwks_uri) and its JWKS, with signing keys the test makes, rotates, or takes
down. `token()` signs an access token as the issuer would. It counts the JWKS fetches, and can turn
hostile: answer garbage, answer slowly, or drip its answer a byte at a time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import jwt
from asgi_server import json_answer, serve_asgi
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Issuer:
    url: str = ""
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> private key, all published
    down: bool = False  # every request answers 500
    garbage: bytes | None = None  # the JWKS answer instead of the keys
    delay: float = 0.0  # seconds before each JWKS answer
    drip: float = 0.0  # seconds between the bytes of a JWKS answer
    jwks_fetches: int = 0
    bytes_dripped: int = 0

    def new_key(self, kid: str, kind: str = "RSA") -> str:
        """Make and publish a signing key."""
        self.keys[kid] = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if kind == "RSA"
            else ec.generate_private_key(ec.SECP256R1())
        )
        return kid

    def jwks(self) -> dict[str, Any]:
        published = []
        for kid, key in self.keys.items():
            rsa_key = isinstance(key, rsa.RSAPrivateKey)
            algorithm = jwt.algorithms.RSAAlgorithm if rsa_key else jwt.algorithms.ECAlgorithm
            public = json.loads(algorithm.to_jwk(key.public_key()))
            published.append({**public, "kid": kid, "use": "sig", "alg": "RS256" if rsa_key else "ES256"})
        return {"keys": published}

    def token(
        self,
        audience: str,
        subject: str = "alice@example.com",
        kid: str | None = None,
        lifetime: float = 300,
        **claims: Any,
    ) -> str:
        """An access token for `audience`, signed with key `kid` (the first key by default)."""
        kid = kid or next(iter(self.keys))
        key = self.keys[kid]
        now = int(time.time())
        payload = {"iss": self.url, "aud": audience, "sub": subject, "iat": now, "exp": now + int(lifetime), **claims}
        return jwt.encode(
            payload, key, algorithm="RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256", headers={"kid": kid}
        )

    async def answer(self, request: Request) -> Response:
        if self.down:
            return JSONResponse({"error": "down"}, status_code=500)
        if request.url.path == "/.well-known/oauth-authorization-server":
            return JSONResponse(
                {
                    "issuer": self.url,
                    "jwks_uri": f"{self.url}/jwks.json",
                    "authorization_endpoint": f"{self.url}/authorize",
                    "token_endpoint": f"{self.url}/token",
                }
            )
        self.jwks_fetches += 1
        if self.delay:
            await anyio.sleep(self.delay)
        body = self.garbage if self.garbage is not None else json.dumps(self.jwks()).encode()
        return json_answer(body, self.drip, self._dripped_byte)

    def _dripped_byte(self) -> None:
        self.bytes_dripped += 1


@contextmanager
def serve_issuer() -> Iterator[Issuer]:
    issuer = Issuer()
    app = Starlette(
        routes=[Route(path, issuer.answer) for path in ("/.well-known/oauth-authorization-server", "/jwks.json")]
    )
    with serve_asgi(app) as url:
        issuer.url = url
        issuer.new_key("key-1")
        yield issuer
