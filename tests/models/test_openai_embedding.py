"""The OpenAI-compatible provider against a real HTTP service on 127.0.0.1 (tests/fake_embeddings.py)."""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_embeddings import EmbeddingService, serve_embeddings
from helpers import write

from mcp_kb.app import App
from mcp_kb.errors import ModelError
from mcp_kb.api import SearchRequest
from helpers import MakeConfig
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

DOCS = {
    "leave.md": "# Leave\n\n## Annual leave\n\nEmployees apply for annual leave in the HR portal two weeks ahead.\n",
    "errors.md": "# Errors\n\n## Tokens\n\nE5021 means the access token expired; request a new one and retry.\n",
    "travel.md": "# Travel\n\nBook flights through the travel desk; economy class below six hours.\n",
}


@pytest.fixture
def service(embedder: FastEmbedder) -> Iterator[EmbeddingService]:
    with serve_embeddings(EmbeddingService(embedder)) as running:
        yield running


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    for name, text in DOCS.items():
        write(tmp_path / "docs" / name, text)
    return tmp_path / "docs"


@pytest.fixture
def remote_app(
    make_config: MakeConfig, docs: Path, service: EmbeddingService, model_folder: Path
) -> Callable[..., App]:
    """An App over `docs` embedding through the service, counting tokens with the tests' model folder."""

    def make(**embedding: object) -> App:
        settings = {
            "provider": "openai",
            "base_url": service.url,
            "model": service.model,
            "tokenizer_path": str(model_folder),
            "max_input_tokens": 256,
            "max_retries": 2,
            **embedding,
        }
        return App(make_config({"name": "docs", "description": "d", "paths": [str(docs)]}, embedding=settings))

    return make


def test_sync_and_search_through_the_service_match_the_local_model(
    make_app: MakeApp, docs: Path, remote_app: Callable[..., App]
) -> None:
    remote = remote_app()
    [report] = remote.sync()
    assert report.files_added == 3 and not report.failures
    local = make_app(
        {"name": "docs", "description": "d", "paths": [str(docs)]}, storage=str(docs.parent / "local-index")
    )
    local.sync()
    for query in ("how do I request annual leave", "E5021 token expired", "flight booking class"):
        got = remote.search("docs", SearchRequest(query=query, mode="vector", top_k=3)).hits
        want = local.search("docs", SearchRequest(query=query, mode="vector", top_k=3)).hits
        assert [h.source for h in got] == [h.source for h in want]
        assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)


def test_identity_names_the_service_and_switching_provider_rebuilds(
    make_app: MakeApp, docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    local = make_app({"name": "docs", "description": "d", "paths": [str(docs)]})
    local.sync()
    [report] = remote_app().sync()
    assert "embedding model changed" in report.rebuilt and "openai-compatible" in report.rebuilt
    status = remote_app().status("docs")[0]
    assert status.model and status.model.name == f"openai-compatible {service.url} {service.model}"
    assert status.model.dimension == 384


def test_429_with_retry_after_is_waited_for_and_retried(
    service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    service.faults.status, service.faults.status_count, service.faults.retry_after = 429, 2, "1"
    [report] = remote_app().sync()
    assert report.files_added == 3 and not report.failures
    refused = [t for t, _, status in service.requests if status == 429]
    after = [t for t, _, status in service.requests if not status]
    assert len(refused) == 2 and after[0] - refused[-1] >= 0.9  # Retry-After: 1 was honoured


def test_a_batch_that_keeps_failing_fails_its_files_only_and_the_next_sync_retries(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    app = remote_app(max_retries=1)
    app.sync()
    write(docs / "new.md", "# New\n\nThe parking garage opens at seven.\n")
    write(docs / "leave.md", "# Leave\n\nAnnual leave is now requested in the new HR app.\n")
    service.faults.status, service.faults.status_count = 500, 2  # the first try and the one retry
    [report] = app.sync()
    assert sorted(f.path for f in report.failures) == ["leave.md", "new.md"]
    assert all("retried on the next sync" in f.reason for f in report.failures)
    hit = app.search("docs", SearchRequest(query="annual leave", mode="keyword", top_k=1)).hits[0]
    assert "HR portal" in hit.text  # the indexed version stayed
    assert "new.md" not in app.document_ids("docs")
    [retry] = app.sync()
    assert retry.files_added == 1 and retry.files_changed == 1 and not retry.failures
    assert "new HR app" in app.search("docs", SearchRequest(query="annual leave", mode="keyword", top_k=1)).hits[0].text


def test_a_changed_dimension_fails_the_batch_then_rebuilds_with_the_reason(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    app = remote_app()
    app.sync()
    service.faults.dimension = 128  # the service now runs another model under the same name
    write(docs / "travel.md", "# Travel\n\nTrains are booked through the travel desk too.\n")
    [report] = app.sync()
    assert [f.path for f in report.failures] == ["travel.md"]
    assert "128-dimensional" in report.failures[0].reason
    assert (
        app.search("docs", SearchRequest(query="economy class flights", mode="keyword", top_k=1)).hits[0].source
        == "travel.md"
    )
    [rebuilt] = app.sync()  # the next sync asks the service its dimension again
    assert "embedding model changed" in rebuilt.rebuilt and "128" in rebuilt.rebuilt and not rebuilt.failures
    assert (
        app.search("docs", SearchRequest(query="economy class flights", mode="vector", top_k=1)).hits[0].source
        == "travel.md"
    )


def test_malformed_answers_and_refused_keys_say_what_is_wrong(
    service: EmbeddingService, monkeypatch: pytest.MonkeyPatch, remote_app: Callable[..., App]
) -> None:
    service.faults.malformed = True
    with pytest.raises(ModelError, match="not an embeddings response"):
        remote_app().sync()
    service.faults.malformed = False
    monkeypatch.setenv("TEST_EMBEDDING_KEY", "sk-wrong-secret-1234")
    service.faults.api_key = "sk-right"
    with pytest.raises(ModelError, match=r"refused the credentials \(401\).*\$TEST_EMBEDDING_KEY"):
        remote_app(api_key_env="TEST_EMBEDDING_KEY").sync()


def test_the_key_is_sent_but_never_stored(
    docs: Path, service: EmbeddingService, monkeypatch: pytest.MonkeyPatch, remote_app: Callable[..., App]
) -> None:
    monkeypatch.setenv("TEST_EMBEDDING_KEY", "sk-secret-5678")
    service.faults.api_key = "sk-secret-5678"
    app = remote_app(api_key_env="TEST_EMBEDDING_KEY")
    [report] = app.sync()
    assert report.files_added == 3
    stored = b"".join(path.read_bytes() for path in (docs.parent / "index").rglob("*") if path.is_file())
    assert b"sk-secret-5678" not in stored
    assert "sk-secret-5678" not in json.dumps([status.as_dict() for status in app.status("docs")])


def test_a_slow_service_degrades_search_to_keyword_after_one_attempt(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    app = remote_app(timeout=0.5)
    app.sync()
    service.faults.delay = 3.0
    before = len(service.requests)
    result = app.search("docs", SearchRequest(query="annual leave portal", mode="hybrid", top_k=1))
    assert result.mode == "keyword" and "vector search unavailable" in result.notes[0]
    assert result.hits[0].source == "leave.md"
    assert len(service.requests) == before + 1  # no retries while a client waits


def test_query_vectors_are_cached(docs: Path, service: EmbeddingService, remote_app: Callable[..., App]) -> None:
    app = remote_app()
    app.sync()
    before = len(service.requests)
    for mode in ("vector", "hybrid"):  # two searches (the result cache is per request), one embedding
        app.search("docs", SearchRequest(query="parental leave rules", mode=mode, top_k=2))
    assert len(service.requests) == before + 1


def test_without_a_tokenizer_chunks_are_sized_by_a_conservative_estimate(
    docs: Path, tokenizer: ModelTokenizer, remote_app: Callable[..., App]
) -> None:
    from mcp_kb.models.estimate import EstimatedTokens

    estimate = EstimatedTokens(256)
    for text in (
        DOCS["errors.md"],
        "员工需要提前两周在人事系统中提交年假申请，经直属经理审批后生效。",
        "getUserInfo reads snake_case_names under API-V2.1 (see https://example.com/a?b=c).",
    ):
        assert estimate.count([text])[0] >= tokenizer.count([text])[0]
    app = remote_app(tokenizer_path=None, max_input_tokens=64)
    write(docs / "long.md", "# Long\n\n" + "Each rollout step drains traffic and checks health. " * 60)
    [report] = app.sync()
    assert not report.failures
    chunks = app.chunks(docs / "long.md")[0]
    assert len(chunks) > 3 and all(tokenizer.count([c.embed_text])[0] <= 64 for c in chunks)


def test_a_search_in_a_new_process_after_the_dimension_changed_falls_back_to_keyword(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    remote_app().sync()
    service.faults.dimension = 128
    result = remote_app().search("docs", SearchRequest(query="annual leave portal", mode="hybrid", top_k=1))
    assert result.mode == "keyword" and result.notes[0].startswith("vector search is off: the index holds vectors")
    assert "(384-d) and queries here are embedded with" in result.notes[0] and result.notes[0].count("(128-d)") == 1
    assert result.hits[0].source == "leave.md"


def _repeat_an_index(answer: dict[str, Any]) -> dict[str, Any]:
    for item in answer["data"]:
        item["index"] = 0
    return answer


def _zero_vectors(answer: dict[str, Any]) -> dict[str, Any]:
    for item in answer["data"]:
        item["embedding"] = [0.0] * len(item["embedding"])
    return answer


def _first(field: str, value: object, literal: bytes | None = None) -> Callable[[dict[str, Any]], object]:
    """The true answer with the first item's `field` set to `value` (written as `literal` when given)."""

    def lie(answer: dict[str, Any]) -> object:
        answer["data"][0][field] = "MARK" if literal else value
        return json.dumps(answer).encode().replace(b'"MARK"', literal) if literal else answer

    return lie


LIES: dict[str, tuple[dict[str, Any], str]] = {  # what a service may send instead of vectors, and what the refusal says
    "nested 200,000 deep": ({"raw": b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"}, "nested deeper"),
    "a number past a float": (
        {"lie": _first("embedding", None, b"[1e400" + b", 0.5" * 383 + b"]")},
        "NaN or infinite numbers",
    ),
    "a whole number past a float": (
        {"lie": _first("embedding", None, b"[1" + b"0" * 400 + b", 0.5" * 383 + b"]")},
        "OverflowError",
    ),
    "every index the same": ({"lie": _repeat_an_index}, "repeats one"),
    "an index that is true": ({"lie": _first("index", True)}, "not one of the inputs"),
    "an index of 1e400": ({"lie": _first("index", None, b"1e400")}, "not one of the inputs"),
    "all-zero vectors": ({"lie": _zero_vectors}, "all-zero vector"),
    "a redirect elsewhere": ({"redirect": "http://127.0.0.1:9/v1/embeddings"}, "a redirect (not followed)"),
    "an endless body": ({"raw": b'{"data": [' + b" " * 40_000_000 + b"]}"}, "sent more than"),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_a_lying_service_fails_the_batch_and_the_query_falls_back_to_keyword(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App], lie: str
) -> None:
    faults, reason = LIES[lie]
    app = remote_app(max_retries=0)
    app.sync()
    write(docs / "travel.md", "# Travel\n\nTrains are booked through the travel desk too.\n")
    write(docs / "parking.md", "# Parking\n\nThe garage opens at seven.\n")  # a batch of two passages
    for name, value in faults.items():
        setattr(service.faults, name, value)
    [report] = app.sync()
    result = app.search("docs", SearchRequest(query="annual leave portal", mode="hybrid", top_k=1))
    assert sorted(f.path for f in report.failures) == ["parking.md", "travel.md"]
    assert all(reason in f.reason and "retried on the next sync" in f.reason for f in report.failures), report.failures
    assert "parking.md" not in app.document_ids("docs")  # no wrong vector was stored
    if lie != "every index the same":  # a query is one input: nothing to repeat
        assert result.mode == "keyword" and "vector search unavailable" in result.notes[0] and reason in result.notes[0]
    assert result.hits[0].source == "leave.md"
    service.faults = type(service.faults)()
    [retry] = app.sync()
    assert retry.files_added == retry.files_changed == 1 and not retry.failures


def test_a_dripped_answer_is_cut_at_one_deadline_for_the_whole_request(
    docs: Path, service: EmbeddingService, remote_app: Callable[..., App]
) -> None:
    """A byte every 20 ms: the whole answer would take minutes; each request ends at its 1 s timeout."""
    app = remote_app(max_retries=0, timeout=1.0)
    app.sync()
    service.faults.drip = 0.02
    write(docs / "travel.md", "# Travel\n\nTrains are booked through the travel desk too.\n")
    [report] = app.sync()
    result = app.search("docs", SearchRequest(query="annual leave portal", mode="hybrid", top_k=1))
    assert [f.path for f in report.failures] == ["travel.md"] and "did not answer in time" in report.failures[0].reason
    assert result.mode == "keyword" and "did not answer in time" in result.notes[0]
    assert service.bytes_dripped < 2 * 3 * 50  # two requests, each cut within a few bytes of its 1 s
