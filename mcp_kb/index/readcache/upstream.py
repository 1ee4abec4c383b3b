"""The store a read cache fronts: its bucket, endpoint and region from LanceDB's options and the AWS
variables, and the AWS Signature Version 4 that every forwarded request carries."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote, urlsplit

from ...settings.variables import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_ENDPOINT_URL,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
    environment,
)

log = logging.getLogger(__name__)

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Upstream:
    """The real S3 endpoint of one bucket and the credentials that sign requests to it."""

    bucket: str
    endpoint: str  # scheme://host[:port], no path
    virtual_hosted: bool  # bucket in the host name rather than the path
    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never the secrets, whatever prints this
        return f"Upstream({self.endpoint}, bucket={self.bucket!r}, region={self.region!r})"

    @classmethod
    def of(cls, uri: str, options: dict[str, str]) -> Upstream | None:
        """The upstream of an s3:// URI from LanceDB's storage options and the AWS variables, or None
        when its credentials are not static keys (instance roles, SSO: only LanceDB can use those)."""
        parts = urlsplit(uri)
        if parts.scheme not in ("s3", "s3a") or not parts.netloc:
            return None
        option = _options_reader({key.lower(): value for key, value in options.items()})
        access_key = option("aws_access_key_id", "access_key_id", env=ENV_AWS_ACCESS_KEY_ID)
        secret_key = option("aws_secret_access_key", "secret_access_key", env=ENV_AWS_SECRET_ACCESS_KEY)
        if not access_key or not secret_key:
            return None
        region = (
            option("aws_region", "region", env=ENV_AWS_REGION) or environment(ENV_AWS_DEFAULT_REGION) or "us-east-1"
        )
        endpoint = option("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url", env=ENV_AWS_ENDPOINT_URL)
        virtual = option("aws_virtual_hosted_style_request", "virtual_hosted_style_request") or ""
        if endpoint:
            endpoint, virtual_hosted = endpoint.rstrip("/"), virtual.lower() == "true"
        else:
            endpoint, virtual_hosted = f"https://s3.{region}.amazonaws.com", True
        return cls(
            parts.netloc,
            endpoint,
            virtual_hosted,
            region,
            access_key,
            secret_key,
            option("aws_session_token", "session_token", "token", env=ENV_AWS_SESSION_TOKEN),
        )

    def url(self, key: str, query: list[tuple[str, str]]) -> tuple[str, str, str]:
        """(URL, Host header, canonical query) of a request for `key` ("" for the bucket itself)."""
        scheme, host = self.endpoint.split("://", 1)
        path = "/" + quote(key, safe="/-_.~")
        if self.virtual_hosted:
            host = f"{self.bucket}.{host}"
        else:
            path = f"/{quote(self.bucket, safe='-_.~')}" + (path if key else "")
        canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query))
        return f"{scheme}://{host}{path}" + (f"?{canonical_query}" if canonical_query else ""), host, canonical_query

    def signed_headers(
        self, method: str, url: str, host: str, canonical_query: str, now: datetime.datetime | None = None
    ) -> dict[str, str]:
        """AWS Signature Version 4 headers for a request without a body."""
        now = now or datetime.datetime.now(datetime.UTC)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": stamp}
        if self.session_token:
            headers["x-amz-security-token"] = self.session_token
        names = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                urlsplit(url).path or "/",
                canonical_query,
                "".join(f"{name}:{headers[name].strip()}\n" for name in sorted(headers)),
                names,
                _EMPTY_SHA256,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        key = f"AWS4{self.secret_key}".encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, SignedHeaders={names}, Signature={signature}"
        )
        return headers


class _Option(Protocol):
    """The first of `names` the options set, else the variable `env` names (None when neither is)."""

    def __call__(self, *names: str, env: str | None = None) -> str | None: ...


def _options_reader(options: dict[str, str]) -> _Option:
    def option(*names: str, env: str | None = None) -> str | None:
        for name in names:
            if options.get(name):
                return options[name]
        return environment(env) if env else None

    return option
