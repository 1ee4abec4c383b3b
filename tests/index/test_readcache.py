"""The read cache in front of an index on S3 (index/readcache/), against a real S3-compatible server
(moto on 127.0.0.1): searches answer as the store does, a warm cache fetches no pages, a writer's sync
is never hidden by it, damaged / deleted / unwritable cache files cost only speed, its size is bounded,
and its endpoint serves nobody but this process's reader."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import httpx
import pytest

from helpers import write
from mcp_kb.index.readcache import pages as readcache_pages
from mcp_kb.index.readcache.cache import ReadCache
from mcp_kb.index.readcache.pages import PAGE_BYTES, ObjectMeta, PageStore
from mcp_kb.index.readcache.upstream import Upstream
from s3_server import CREDENTIALS, S3Server, serve_s3
from mcp_kb.api import SearchRequest, SyncRequest
from mcp_kb.app import App
from helpers import MakeConfig
from mcp_kb.models.fastembed import FastEmbedder

QUERIES = ["E5021 token expired", "restart the ingest worker", "queue backs up"]


class _OpenApp(Protocol):
    """The bucket fixture: an App on the synced bucket, with the folder and storage it was synced from."""

    docs: Path
    storage: dict[str, Any]

    def __call__(self, **settings: object) -> App: ...


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with serve_s3() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server, tmp_path: Path, make_config: MakeConfig, embedder: FastEmbedder) -> _OpenApp:
    """Runbooks synced into a fresh bucket; `open(**storage)` gives an App on it."""
    from mcp_kb.app import App

    docs = tmp_path / "docs"
    for i in range(8):
        write(
            docs / f"note{i}.md",
            f"# Note {i}\n\nRunbook {i}: restart the ingest worker number {i} when its "
            f"queue backs up past {i * 100} messages.\n\n" + "Background. " * 200,
        )
    write(docs / "errors.md", "# Errors\n\nE5021 means the access token expired; sign in again.\n")
    storage = s3.storage(s3.new_bucket())

    def open_app(**settings: object) -> App:
        config = make_config(
            {"name": "docs", "description": "Runbooks", "paths": [str(docs)]},
            storage={**storage, "read_consistency": 0, **settings},
        )
        return App(config, embedder=embedder)

    opener = cast(_OpenApp, open_app)
    opener(read_cache_mb=0).sync()
    opener.docs, opener.storage = docs, storage
    return opener


def _answers(app: App, mode: str = "hybrid") -> list[list[tuple[str, int, float]]]:
    return [
        [
            (hit.source, hit.chunk_index, round(hit.score, 5))
            for hit in app.search("docs", SearchRequest(query=query, mode=mode, top_k=5), record=False).hits
        ]
        for query in QUERIES
    ]


def _page_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and path.name != "meta.json"]


def _pages_fetched(s3: S3Server) -> list[str]:
    """Data and index files of the chunk table read from the store (the small state table is read directly)."""
    return [
        r["url"]
        for r in s3.recorded()
        if r["method"] == "GET" and "__chunks__" in r["url"] and ("/data/" in r["url"] or "/_indices/" in r["url"])
    ]


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_searches_through_the_cache_answer_as_the_store_does_and_a_warm_cache_fetches_no_pages(
    bucket: _OpenApp, s3: S3Server, tmp_path: Path, mode: str
) -> None:
    direct = _answers(bucket(read_cache_mb=0), mode)
    assert direct[0] and direct[0][0][0] == "errors.md"
    assert _answers(bucket(read_cache_dir=str(tmp_path / "cache")), mode) == direct
    assert _page_files(tmp_path / "cache")

    s3.start_recording()  # another process on the warm cache: it finds the pages on disk
    found = _search_in_a_new_process(bucket, tmp_path, QUERIES[0], mode)
    assert [(hit["source"], round(hit["score"], 5)) for hit in found] == [(s, score) for s, _, score in direct[0]]
    assert _pages_fetched(s3) == []


def _search_in_a_new_process(bucket: _OpenApp, tmp_path: Path, query: str, mode: str) -> list[dict[str, Any]]:
    import json
    import subprocess
    import sys

    storage = bucket.storage
    config = tmp_path / "kb.toml"
    config.write_text(
        f'[storage]\nuri = "{storage["uri"]}"\nread_consistency = 0\nread_cache_dir = "{tmp_path / "cache"}"\n'
        f"[storage.options]\n"
        + "".join(f'{k} = "{v}"\n' for k, v in storage["options"].items())
        + f'[[kb]]\nname = "docs"\ndescription = "Runbooks"\npaths = ["{bucket.docs}"]\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_kb",
            "search",
            "docs",
            query,
            "--json",
            "--top-k",
            "5",
            "--mode",
            mode,
            "-c",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    results: list[dict[str, Any]] = json.loads(result.stdout)["results"]
    return results


def test_a_writers_sync_is_never_hidden_by_the_cache(bucket: _OpenApp, tmp_path: Path) -> None:
    reader = bucket(read_cache_dir=str(tmp_path / "cache"))
    assert _answers(reader)[0][0][0] == "errors.md"
    writer = bucket(read_cache_mb=0)

    write(bucket.docs / "errors.md", "# Errors\n\nE7730 means the disk quota is used up; free some space.\n")
    writer.sync()
    assert _hits(reader, "E7730 quota")[0] == "errors.md"
    texts = [
        hit.text
        for hit in reader.search(
            "docs", SearchRequest(query="E5021 token expired", mode="keyword", top_k=5), record=False
        ).hits
    ]
    assert not any("E5021" in text for text in texts), texts  # the old text is gone

    (bucket.docs / "note3.md").unlink()  # and a full rebuild writes every file anew, under new names
    writer.sync(SyncRequest(full=True))
    assert "note3.md" not in _hits(reader, "restart the ingest worker number 3", mode="keyword")
    assert _hits(reader, "E7730 quota")[0] == "errors.md"


def _hits(app: App, query: str, mode: str = "hybrid") -> list[str]:
    return [hit.source for hit in app.search("docs", SearchRequest(query=query, mode=mode, top_k=5), record=False).hits]


def test_damaged_and_deleted_cache_files_are_read_again_from_the_store(
    bucket: _OpenApp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    cache = tmp_path / "cache"
    expected = _answers(bucket(read_cache_dir=str(cache)))
    for page in _page_files(cache):  # flip a byte in every page
        data = bytearray(page.read_bytes())
        data[len(data) // 2] ^= 0xFF
        page.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="mcp_kb.index.readcache"):
        reader = bucket(read_cache_dir=str(cache))
        assert _answers(reader) == expected
    assert "dropped a damaged page" in caplog.text
    assert len([r for r in caplog.records if "damaged" in r.getMessage()]) == 1  # said once, not per page

    shutil.rmtree(cache)  # deleted under the running reader
    assert _answers(bucket(read_cache_dir=str(cache))) == expected
    assert _page_files(cache)  # and filled again


def test_a_disk_that_refuses_writes_costs_only_the_caching(
    bucket: _OpenApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    expected = _answers(bucket(read_cache_mb=0))
    monkeypatch.setattr(readcache_pages, "write_atomically", full)
    with caplog.at_level(logging.WARNING, logger="mcp_kb.index.readcache"):
        assert _answers(bucket(read_cache_dir=str(tmp_path / "cache"))) == expected
    warnings = [r.getMessage() for r in caplog.records if "cannot keep pages" in r.getMessage()]
    assert len(warnings) == 1 and "No space left on device" in warnings[0]
    assert not _page_files(tmp_path / "cache")


def test_the_cache_stays_within_its_size_and_keeps_what_was_used_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readcache_pages, "_TOUCH_INTERVAL", 0)  # a page's use is recorded once a minute: here at once
    pages = PageStore(tmp_path, max_bytes=4 * PAGE_BYTES)
    meta = ObjectMeta(PAGE_BYTES, '"v1"', "x")
    leftover = write(tmp_path / "ab" / "ab12" / "page-0.1f2e.tmp", "x" * PAGE_BYTES)  # a killed process's
    os.utime(leftover, (1, 1))
    for n in range(12):
        pages.put("b", f"t.lance/data/{n}.lance", meta, {0: bytes([n]) * PAGE_BYTES})
        for page in Path(pages._object_folder("b", f"t.lance/data/{n}.lance")).iterdir():
            os.utime(page, (1000 + n, 1000 + n))  # written in this order, long ago: no waiting on the clock
        if n >= 1:
            assert pages.page("b", "t.lance/data/0.lance", meta, 0) is not None  # used all along (now)
    used = sum(path.stat().st_size for path in _page_files(tmp_path))
    assert used <= 4 * (PAGE_BYTES + 4)
    assert pages.page("b", "t.lance/data/0.lance", meta, 0) == bytes([0]) * PAGE_BYTES
    assert pages.page("b", "t.lance/data/11.lance", meta, 0) == bytes([11]) * PAGE_BYTES
    assert pages.page("b", "t.lance/data/1.lance", meta, 0) is None  # the least recently used went first
    assert not leftover.exists()  # counted and evicted like a page
    folders = [folder for folder in tmp_path.glob("??/*") if folder.is_dir()]
    assert len(folders) == len(_page_files(tmp_path))  # evicted objects took their records with them
    other_version = ObjectMeta(PAGE_BYTES, '"v2"', "x")  # pages of one version are never taken for another's
    assert pages.page("b", "t.lance/data/11.lance", other_version, 0) is None


def test_its_endpoint_serves_only_this_processes_reader_and_only_reads(
    s3: S3Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bucket_name = s3.new_bucket()
    options = {**s3.storage(bucket_name)["options"]}
    cache = ReadCache.for_store(f"s3://{bucket_name}/index", options, tmp_path / "cache", 2**20)
    assert cache is not None
    assert ReadCache.for_store(f"s3://{bucket_name}/index", options, tmp_path / "cache", 2**20) is cache
    own = cache.lancedb_options(options)
    assert CREDENTIALS["aws_secret_access_key"] not in str(own) and CREDENTIALS["aws_access_key_id"] not in str(own)

    def signed(key: str) -> dict[str, str]:
        return {"authorization": f"AWS4-HMAC-SHA256 Credential={key}/20261201/us-east-1/s3/aws4_request, x"}

    url = f"{cache.endpoint}/{bucket_name}/index/t.lance/data/a.lance"
    assert httpx.get(url).status_code == 403  # unsigned
    assert httpx.get(url, headers=signed(CREDENTIALS["aws_access_key_id"])).status_code == 403  # the real key
    odd = {"authorization": signed("\xe9" + cache.key[1:])["authorization"].encode("latin-1")}
    assert httpx.get(url, headers=odd).status_code == 403  # type: ignore[arg-type]  # a raw header value; a non-ASCII key is refused like any other
    assert httpx.get(f"{cache.endpoint}/other-bucket/x", headers=signed(cache.key)).status_code == 403
    assert httpx.put(url, content=b"x" * 10_000, headers=signed(cache.key)).status_code == 405
    assert httpx.delete(url, headers=signed(cache.key)).status_code == 405
    assert httpx.get(url, headers=signed(cache.key)).status_code == 404  # the store's own answer
    assert CREDENTIALS["aws_secret_access_key"] not in repr(cache.upstream) + caplog.text


def test_static_keys_are_needed_and_an_unknown_store_kind_is_left_to_lancedb(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert Upstream.of("s3://b/index", {"aws_region": "eu-west-1"}) is None  # an instance role: LanceDB's job
    assert Upstream.of("gs://b/index", dict(CREDENTIALS)) is None
    aws = Upstream.of("s3://b/index", {"aws_access_key_id": "k", "aws_secret_access_key": "s", "region": "eu-west-1"})
    assert aws is not None
    assert aws.url("x/y z.lance", [])[0] == "https://b.s3.eu-west-1.amazonaws.com/x/y%20z.lance"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    local = Upstream.of("s3://b/index", {"aws_endpoint": "http://127.0.0.1:9000/"})
    assert local is not None
    assert (
        local.url("", [("prefix", "a/b"), ("list-type", "2")])[0] == "http://127.0.0.1:9000/b?list-type=2&prefix=a%2Fb"
    )


@pytest.mark.parametrize(
    "key, query",
    [
        ("index/t.lance/data/0a1b.lance", []),
        ("index/odd name+plus=eq~tilde/数据.lance", []),
        ("", [("list-type", "2"), ("prefix", "index/t.lance/_versions/"), ("delimiter", "/")]),
    ],
)
def test_its_signatures_are_the_ones_botocore_makes(key: str, query: list[tuple[str, str]]) -> None:
    """The store checks every forwarded request's signature; botocore's signer is the reference."""
    import datetime

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    upstream = Upstream("bucket", "http://127.0.0.1:9000", False, "eu-west-1", "AKID", "SECRET", "TOKEN")
    url, host, canonical_query = upstream.url(key, query)
    request = AWSRequest(method="GET", url=url, headers={"host": host})
    S3SigV4Auth(Credentials("AKID", "SECRET", "TOKEN"), "s3", "eu-west-1").add_auth(request)
    stamp = datetime.datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    ours = upstream.signed_headers("GET", url, host, canonical_query, now=stamp)
    assert ours["authorization"] == request.headers["Authorization"]


def test_ranges_are_answered_byte_for_byte_as_the_store_answers_them(s3: S3Server, tmp_path: Path) -> None:
    import random

    bucket_name = s3.new_bucket()
    data = random.Random(7).randbytes(3 * PAGE_BYTES + 1234)
    key = "index/t.lance/data/0f1e2d.lance"
    s3._client().put_object(Bucket=bucket_name, Key=key, Body=data)
    options = s3.storage(bucket_name)["options"]
    cache = ReadCache.for_store(f"s3://{bucket_name}/index", options, tmp_path / "cache", 2**30)
    assert cache is not None
    auth = {"authorization": f"AWS4-HMAC-SHA256 Credential={cache.key}/20261201/us-east-1/s3/aws4_request, x"}
    url = f"{cache.endpoint}/{bucket_name}/{key}"
    size = len(data)
    first = httpx.head(url, headers=auth)  # a HEAD before any read (opening an earlier version of a table asks one)
    assert (first.status_code, first.headers["content-length"]) == (200, str(size))
    for _ in range(2):  # first sight (from the store), then from pages
        for wanted, expected in [
            ("bytes=10-20", data[10:21]),
            ("bytes=-5", data[-5:]),
            (f"bytes={PAGE_BYTES - 3}-{2 * PAGE_BYTES + 3}", data[PAGE_BYTES - 3 : 2 * PAGE_BYTES + 4]),
            (f"bytes={size - 10}-", data[-10:]),
            (f"bytes=0-{size * 2}", data),
        ]:
            answer = httpx.get(url, headers={**auth, "range": wanted})
            assert (answer.status_code, answer.content) == (206, expected), wanted
            assert answer.headers["content-range"].endswith(f"/{size}")
        whole = httpx.get(url, headers=auth)
        assert (whole.status_code, whole.content) == (200, data)
        assert httpx.head(url, headers=auth).headers["content-length"] == str(size)
    for hostile in (f"bytes={size}-", "bytes=20-10", "bytes=-0", "bytes=a-b"):
        assert httpx.get(url, headers={**auth, "range": hostile}).status_code == 416, hostile


def test_a_flood_of_headers_or_a_body_on_a_read_closes_only_that_connection(s3: S3Server, tmp_path: Path) -> None:
    import socket

    bucket_name = s3.new_bucket()
    cache = ReadCache.for_store(f"s3://{bucket_name}/index", s3.storage(bucket_name)["options"], tmp_path / "c", 2**20)
    assert cache is not None
    host, port = cache.endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as flood:
        flood.sendall(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Fill: " + b"a" * 100_000 + b"\r\n\r\n")
        while flood.recv(65536):
            pass  # the endpoint closes the connection
    with socket.create_connection((host, int(port)), timeout=30) as body:
        body.sendall(b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n" + b"b" * 200_000)
        while body.recv(65536):
            pass
    assert httpx.get(f"{cache.endpoint}/{bucket_name}/x").status_code == 403  # still answering others


def test_without_a_loopback_port_searches_read_the_store_and_say_so(
    bucket: _OpenApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    async def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    expected = _answers(bucket(read_cache_mb=0))
    monkeypatch.setattr(asyncio, "start_server", refused)
    with caplog.at_level(logging.WARNING, logger="mcp_kb.index.readcache"):
        assert _answers(bucket(read_cache_dir=str(tmp_path / "no-port"))) == expected
    assert "cannot listen on 127.0.0.1" in caplog.text
