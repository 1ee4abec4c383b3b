"""The reranking-service provider against a real service on 127.0.0.1 (both API families): order,
batching, retries, timeouts and lying answers; a search keeps its fused order when the service fails."""

import math
from collections.abc import Iterator
from typing import Any, Literal
from pathlib import Path

import numpy as np
import pytest
from fake_rerank import RerankService, serve_rerank
from helpers import write

from mcp_kb.settings import ServiceRerankSettings
from mcp_kb.errors import ConfigError, ModelError
from mcp_kb.models.rerank_service import ServiceReranker
from mcp_kb.api import SearchRequest
from helpers import MakeConfig
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder

DOCS = {
    "leave.md": "# Leave\n\nApply for annual leave in the HR portal two weeks ahead; unused days carry over.\n",
    "travel.md": "# Travel\n\nBook flights through the travel desk; economy class for trips under six hours.\n",
    "expenses.md": "# Expenses\n\nSubmit receipts within thirty days; meals are refunded up to a daily limit.\n",
    "security.md": "# Security\n\nReport lost laptops to IT at once; passwords rotate every ninety days.\n",
    "holidays.md": "# Public holidays\n\nThe office closes on public holidays; leave is not deducted for them.\n",
}
PASSAGES = [text for text in DOCS.values()]


@pytest.fixture
def service(
    fp32_embedder: FastEmbedder,
) -> Iterator[RerankService]:  # its scores do not depend on how passages are batched
    with serve_rerank(RerankService(fp32_embedder)) as running:
        yield running


def _settings(
    service: RerankService, api: Literal["cohere", "tei"] = "cohere", **options: Any
) -> ServiceRerankSettings:
    base = service.url + ("/v1" if api == "cohere" else "")
    return ServiceRerankSettings(
        enabled=True, base_url=base, api=api, model=service.model if api == "cohere" else None, **options
    )


def _cosines(embedder: FastEmbedder, query: str, passages: list[str]) -> list[float]:
    vectors = embedder.embed_batch([query, *passages])
    return [float(score) for score in np.asarray(vectors[1:]) @ np.asarray(vectors[0])]


@pytest.mark.parametrize("api", ["cohere", "tei"])
def test_scores_come_back_in_passage_order_whatever_order_the_service_answers_in(
    service: RerankService, fp32_embedder: FastEmbedder, api: Literal["cohere", "tei"]
) -> None:
    scores = ServiceReranker(_settings(service, api)).score("how do I take days off", PASSAGES)
    expected = _cosines(fp32_embedder, "how do I take days off", PASSAGES)
    assert scores == pytest.approx(expected, abs=1e-6)
    assert sorted(range(len(scores)), key=lambda i: -scores[i]) != list(range(len(scores)))  # it did reorder


def test_passages_go_in_batches_and_are_scored_in_order(service: RerankService, fp32_embedder: FastEmbedder) -> None:
    scores = ServiceReranker(_settings(service, batch_size=2)).score("lost laptop", PASSAGES)
    assert service.batches == [2, 2, 1]
    assert scores == pytest.approx(_cosines(fp32_embedder, "lost laptop", PASSAGES), abs=1e-6)


def test_a_transient_failure_is_retried_and_a_lasting_one_is_a_clear_error(service: RerankService) -> None:
    service.status, service.status_count = 503, 1
    assert len(ServiceReranker(_settings(service, max_retries=1)).score("q", PASSAGES[:2])) == 2
    service.status_count = 5
    with pytest.raises(ModelError, match="answered 503"):
        ServiceReranker(_settings(service, max_retries=1)).score("q", PASSAGES[:2])


@pytest.mark.parametrize(
    "answer, message",
    [
        ({"results": [{"index": 0, "relevance_score": 0.5}]}, "scored 1 of 2 passages"),
        ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]}, "repeated"),
        ({"results": [{"index": 0, "relevance_score": 0.5}, {"index": 7, "relevance_score": 0.4}]}, "out of range"),
        ({"results": [{"index": 0, "relevance_score": math.nan}, {"index": 1, "relevance_score": 0.4}]}, "finite"),
        ({"results": [{"index": 0, "score": 0.5}]}, "not a rerank response"),
        ({"data": []}, "not a rerank response"),
        ([1, 2], "not a rerank response"),
    ],
)
def test_an_answer_that_does_not_score_every_passage_once_is_refused(
    service: RerankService, answer: dict[str, list[dict[str, Any]]] | dict[str, Any] | list[int], message: str
) -> None:
    service.answer = answer
    with pytest.raises(ModelError, match=message):
        ServiceReranker(_settings(service)).score("q", PASSAGES[:2])


@pytest.mark.parametrize(
    "raw, message",
    [
        (b'{"results": [{"index": 1e400, "relevance_score": 0.5}]}', "not a whole number"),
        (b'{"results": [{"index": 0, "relevance_score": 1' + b"0" * 400 + b"}]}", "too large for a number"),
        (b'{"results": [{"index": 0, "relevance_score": 1e400}]}', "not a finite number"),
        (b'{"results": [{"index": true, "relevance_score": 0.5}]}', "not a whole number"),
        (b'{"results": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested deeper"),
        (b'{"results": [' + b" " * 10_000_000 + b"]}", "sent more than"),
    ],
)
def test_an_answer_past_what_a_number_or_a_parser_can_hold_is_refused_not_a_crash(
    service: RerankService, raw: bytes, message: str
) -> None:
    service.raw = raw
    with pytest.raises(ModelError, match=message):
        ServiceReranker(_settings(service)).score("q", PASSAGES[:1])


def test_one_call_ends_within_its_timeout_whatever_the_service_does(service: RerankService) -> None:
    """A dripped body, a Retry-After of an hour, a redirect: each is the call's failure within `timeout`,
    never a longer wait (the search then keeps its fused order)."""
    service.drip = 0.02
    with pytest.raises(ModelError, match="did not answer in time"):
        ServiceReranker(_settings(service, timeout=0.5, max_retries=0)).score("q", PASSAGES[:2])
    assert service.bytes_dripped < 50  # cut within a few bytes of its deadline
    service.drip = 0.0
    service.status, service.status_count, service.retry_after = 429, 1, "3600"
    with pytest.raises(ModelError, match="answered 429"):
        ServiceReranker(_settings(service, timeout=0.5, max_retries=3)).score("q", PASSAGES[:2])
    assert service.calls == 2  # the hour was not waited for, nor was the retry made
    service.redirect = "http://127.0.0.1:9/rerank"
    with pytest.raises(ModelError, match=r"answered 307, a redirect \(not followed\)"):
        ServiceReranker(_settings(service, timeout=0.5)).score("q", PASSAGES[:2])


def test_refused_keys_unknown_models_and_unreachable_services_say_what_to_check(
    service: RerankService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.api_key = "right-key"
    monkeypatch.setenv("RERANK_KEY", "wrong-key")
    with pytest.raises(ModelError, match=r"refused the credentials \(401\): check the key in \$RERANK_KEY"):
        ServiceReranker(_settings(service, api_key_env="RERANK_KEY")).score("q", PASSAGES[:1])
    monkeypatch.setenv("RERANK_KEY", "right-key")
    assert len(ServiceReranker(_settings(service, api_key_env="RERANK_KEY")).score("q", PASSAGES[:1])) == 1
    monkeypatch.delenv("RERANK_KEY")
    with pytest.raises(ModelError, match=r"\$RERANK_KEY, which is not set"):
        ServiceReranker(_settings(service, api_key_env="RERANK_KEY")).score("q", PASSAGES[:1])
    service.api_key = None
    wrong_model = ServiceRerankSettings(
        enabled=True, base_url=service.url.replace("://", "://user:pw@") + "/v1", model="no-such-model"
    )
    with pytest.raises(ModelError, match="answered 404.*no-such-model") as caught:
        ServiceReranker(wrong_model).score("q", PASSAGES[:1])
    assert "pw@" not in str(caught.value)
    gone = ServiceRerankSettings(enabled=True, base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    with pytest.raises(ModelError, match="unreachable after 1 attempt"):
        ServiceReranker(gone).score("q", PASSAGES[:1])


def test_settings_name_the_service_and_the_model_it_needs(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match="needs base_url"):
        make_config(rerank={"enabled": True, "provider": "service"})
    with pytest.raises(ConfigError, match='api "cohere" needs model'):
        make_config(rerank={"enabled": True, "provider": "service", "base_url": "http://x/v1"})
    with pytest.raises(ConfigError, match="did you mean 'base_url'"):
        make_config(rerank={"enabled": True, "provider": "service", "base_ur": "http://x/v1"})


@pytest.fixture
def kb(tmp_path: Path) -> dict[str, Any]:
    for name, text in DOCS.items():
        write(tmp_path / "docs" / name, text)
    return {"name": "handbook", "description": "staff handbook", "paths": [str(tmp_path / "docs")]}


def test_a_search_returns_the_services_order(
    make_app: MakeApp, kb: dict[str, Any], service: RerankService, fp32_embedder: FastEmbedder
) -> None:
    app = make_app(
        kb, rerank={"enabled": True, "provider": "service", "base_url": service.url, "api": "tei", "candidates": 5}
    )
    app.sync()
    result = app.search("handbook", SearchRequest(query="days off work", top_k=5, max_per_document=1))
    scores = [hit.score for hit in result.hits]
    assert not result.notes and "rerank" in result.timings_ms
    assert scores == sorted(scores, reverse=True) and service.batches == [5]
    texts = [hit.text for hit in result.hits]
    assert scores == pytest.approx(_cosines(fp32_embedder, "days off work", texts), abs=1e-5)


def test_a_slow_or_failing_service_leaves_the_fused_order_with_a_note(
    make_app: MakeApp, kb: dict[str, Any], service: RerankService
) -> None:
    app = make_app(
        kb,
        rerank={
            "enabled": True,
            "provider": "service",
            "base_url": service.url + "/v1",
            "model": service.model,
            "timeout": 0.3,
            "max_retries": 0,
        },
    )
    assert isinstance(app.searcher.reranker, ServiceReranker)
    app.searcher.reranker.pause.seconds = 0  # each failure kind on its own (the pause has its test)
    plain = make_app(kb)
    plain.sync()
    fused = [hit.source for hit in plain.search("handbook", SearchRequest(query="annual leave", top_k=3)).hits]
    service.delay = 2.0
    slow = app.search("handbook", SearchRequest(query="annual leave", top_k=3))
    service.delay, service.answer = 0.0, {"results": "nonsense"}
    lying = app.search("handbook", SearchRequest(query="annual leave", top_k=3))
    for result in (slow, lying):
        assert [hit.source for hit in result.hits] == fused and result.degraded
        assert any(note.startswith("reranking unavailable") and "fused order" in note for note in result.notes)
    figures = app.live_stats("handbook").search
    assert figures and figures.degraded_answers == 2  # the health figures count them
    service.answer = None
    assert not app.search(
        "handbook", SearchRequest(query="annual leave", top_k=3)
    ).notes  # not cached: the next search reranks


def test_a_failed_service_is_not_asked_again_by_every_search_for_a_while(
    make_app: MakeApp, kb: dict[str, Any], service: RerankService
) -> None:
    app = make_app(
        kb,
        rerank={
            "enabled": True,
            "provider": "service",
            "base_url": service.url + "/v1",
            "model": service.model,
            "max_retries": 0,
        },
    )
    app.sync()
    service.status, service.status_count = 503, 100
    first = app.search("handbook", SearchRequest(query="annual leave", top_k=3))
    second = app.search("handbook", SearchRequest(query="public holidays", top_k=3))
    assert service.calls == 1  # the second search did not wait on the failing service
    assert any("answered 503" in note for note in first.notes)
    assert any("not asked again for 30 s" in note for note in second.notes)
    assert isinstance(app.searcher.reranker, ServiceReranker)
    app.searcher.reranker.pause.seconds = 0  # the pause is over
    service.status_count = 0
    assert not app.search("handbook", SearchRequest(query="travel desk", top_k=3)).notes and service.calls == 2
