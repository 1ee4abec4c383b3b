"""An S3-compatible server on 127.0.0.1 (moto's standalone server) for the shared-index tests,
with moto's request recorder to see which requests a process made."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import httpx

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing-secret", "aws_region": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str
    moto: Any = None  # the running ThreadedMotoServer

    def drop(self) -> None:
        """Stop answering, as a store that went away (the buckets stay in this process)."""
        self.moto.stop()
        self.moto = None

    def restore(self) -> None:
        """Answer again at the same address, with the same buckets (nothing to do when answering)."""
        from moto.server import ThreadedMotoServer

        if self.moto is not None:
            return
        host, port = self.endpoint.removeprefix("http://").split(":")
        self.moto = ThreadedMotoServer(ip_address=host, port=int(port), verbose=False)
        self.moto.start()

    def new_bucket(self) -> str:
        name = f"kb-{uuid.uuid4().hex[:12]}"
        self._client().create_bucket(Bucket=name)
        return name

    def storage(self, bucket: str, prefix: str = "index") -> dict[str, Any]:
        """The kb.toml `[storage]` table for a folder of this bucket."""
        return {
            "uri": f"s3://{bucket}/{prefix}",
            "options": {"aws_endpoint": self.endpoint, "allow_http": "true", **CREDENTIALS},
        }

    def start_recording(self) -> None:
        httpx.post(f"{self.endpoint}/moto-api/recorder/reset-recording")
        httpx.post(f"{self.endpoint}/moto-api/recorder/start-recording")

    def recorded(self) -> list[dict[str, Any]]:
        """Requests made since start_recording: method, path, headers (the user agent tells who)."""
        httpx.post(f"{self.endpoint}/moto-api/recorder/stop-recording")
        text = httpx.get(f"{self.endpoint}/moto-api/recorder/download-recording").text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _client(self) -> Any:  # boto3 ships no type hints
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["aws_access_key_id"],
            aws_secret_access_key=CREDENTIALS["aws_secret_access_key"],
            region_name=CREDENTIALS["aws_region"],
        )


@contextmanager
def serve_s3() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    recording = tempfile.NamedTemporaryFile(prefix="moto-recording-", delete=False)
    recording.close()
    os.environ["MOTO_RECORDER_FILEPATH"] = recording.name  # else the recorder writes into the working folder
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = S3Server(f"http://{host}:{port}", server)
    try:
        yield s3
    finally:
        if s3.moto is not None:
            s3.moto.stop()
        os.unlink(recording.name)
