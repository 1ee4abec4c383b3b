"""Search metrics: they move as searches run, and the resource, the saved snapshot and the CLI agree."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write

from mcp_kb.app import App
from mcp_kb.records import SearchFigures
from mcp_kb.errors import ModelError
from mcp_kb.api import SearchRequest, SyncRequest
from mcp_kb.requests import SelfCheckRequest
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder


@pytest.fixture
def app(make_app: MakeApp, tmp_path: Path) -> App:
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nEmployees apply for annual leave in the HR portal.\n")
    write(tmp_path / "docs" / "errors.md", "# Errors\n\nE5021 means the access token expired.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]})
    app.sync()
    return app


def _figures(app: App) -> SearchFigures:
    """The search figures of this process (there are some once a KB is configured)."""
    figures = app.live_stats("docs").search
    assert figures is not None
    return figures


def test_metrics_count_searches_stages_cache_hits_and_empty_answers(app: App) -> None:
    assert _figures(app).searches == 0
    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))
    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))  # the same request: answered from the cache
    app.search("docs", SearchRequest(query="zyxwvut", mode="keyword"))
    metrics = _figures(app)
    assert metrics.searches == 3 and metrics.cache_hit_rate == pytest.approx(1 / 3, abs=1e-3)
    assert metrics.zero_result_queries == 1 and metrics.degraded_answers == 0
    latency = metrics.latency_ms
    assert latency["total"].count == 3 and latency["embed"].count == 1 and latency["keyword"].count == 2
    assert 0 < latency["vector"].p50 <= latency["vector"].max
    assert metrics.query_embedding_tokens == app.tokenizer.count(["annual leave"])[0]


def test_searches_are_also_counted_per_hour_for_the_charts(app: App) -> None:
    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))
    app.search("docs", SearchRequest(query="zyxwvut", mode="keyword"))
    hours = _figures(app).hourly
    assert len(hours) == 1 and hours[0].hour.endswith(":00Z")
    assert (hours[0].searches, hours[0].zero_results, hours[0].degraded) == (2, 1, 0)
    assert 0 < hours[0].p50_ms <= hours[0].p95_ms


def test_a_keyword_fallback_counts_as_degraded(
    app: App, embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(text: str) -> None:
        raise ModelError("model file unreadable")

    monkeypatch.setattr(embedder, "embed_query", broken)
    result = app.search("docs", SearchRequest(query="E5021 token", mode="hybrid"))
    assert result.degraded and _figures(app).degraded_answers == 1


def test_the_cli_shows_what_the_answering_process_saved(app: App, tmp_path: Path) -> None:
    from mcp_kb.cli import main

    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))
    live = _figures(app).as_dict()
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{app.config.storage.uri}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{app.config.kb[0].paths[0]}"]\n',
        encoding="utf-8",
    )
    [item] = json.loads(CliRunner().invoke(main, ["stats", "-c", str(config), "--json"]).output)
    assert item["search"] == live
    assert item["last_sync"]["chunks_embedded"] == 2 and item["last_sync"]["tokens_embedded"] > 10
    text = CliRunner().invoke(main, ["stats", "-c", str(config)]).output
    assert "searches 1" in text and "vector" in text and "2 chunks" in text


def test_a_rebuild_measures_the_hit_rate_when_asked(make_app: MakeApp, tmp_path: Path) -> None:
    for i in range(6):
        write(
            tmp_path / "docs" / f"n{i}.md",
            f"# Note {i}\n\nThe service number {i} keeps its records in store {i}"
            f" and retries every {i + 2} seconds when it fails.\n",
        )
    settings = {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}
    make_app(settings).sync()
    assert make_app(settings).status("docs")[0].health is None
    rebuilt = {**settings, "chunking": {"max_tokens": 200}, "sync": {"self_check_sample": 6}}
    [report] = make_app(rebuilt).sync()
    assert report.rebuilt
    health = make_app(rebuilt).status("docs")[0].health
    assert health and health.queries == 6 and 0.5 <= health.hit_rate["hybrid"] <= 1.0


def _log_app(make_app: MakeApp, tmp_path: Path, **search: object) -> App:
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nEmployees apply for annual leave in the HR portal.\n")
    write(tmp_path / "docs" / "errors.md", "# Errors\n\nE5021 means the access token expired.\n")
    app = make_app({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")], "search": search})
    app.sync()
    return app


def test_the_query_log_holds_exactly_the_searches_made(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.index.state import query_log_path

    app = _log_app(make_app, tmp_path, query_log=True)
    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))
    app.search("docs", SearchRequest(query="E5021", mode="keyword", filters={"path": "errors.md"}))
    entries = [json.loads(line) for line in query_log_path(app.config.storage.uri, "docs").read_text().splitlines()]
    assert [(e["query"], e["mode"]) for e in entries] == [("annual leave", "hybrid"), ("E5021", "keyword")]
    assert entries[1]["filters"] == {"path": "errors.md"} and entries[1]["hits"][0]["source"] == "errors.md"
    assert entries[0]["latency_ms"] > 0 and "time" in entries[0]


def test_no_query_log_unless_asked(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.index.state import query_log_path

    app = _log_app(make_app, tmp_path)
    app.search("docs", SearchRequest(query="annual leave", mode="hybrid"))
    assert not query_log_path(app.config.storage.uri, "docs").exists()


def test_the_query_log_rotates_at_its_size(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.index.state import query_log_path

    app = _log_app(make_app, tmp_path, query_log=True, query_log_max_mb=0.001)  # about 1 KB
    for i in range(20):
        app.search("docs", SearchRequest(query=f"annual leave question number {i}", mode="keyword"))
    log = query_log_path(app.config.storage.uri, "docs")
    rotated = log.with_name(log.name + ".1")
    assert rotated.exists() and log.stat().st_size <= 1100 and rotated.stat().st_size <= 1100
    newest = [json.loads(line)["query"] for line in log.read_text().splitlines()]
    assert newest[-1] == "annual leave question number 19"


def test_a_reviewed_log_becomes_a_labelled_query_set(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.cli import main
    from mcp_kb.index.state import query_log_path

    app = _log_app(make_app, tmp_path, query_log=True)
    app.search("docs", SearchRequest(query="how do I apply for leave", mode="hybrid"))
    app.search("docs", SearchRequest(query="token expired error", mode="hybrid"))
    app.search("docs", SearchRequest(query="unreviewed question", mode="hybrid"))
    lines = query_log_path(app.config.storage.uri, "docs").read_text().splitlines()
    reviewed = tmp_path / "reviewed.jsonl"
    relevant = [["leave.md"], ["errors.md"], None]
    reviewed.write_text(
        "\n".join(
            json.dumps({**json.loads(line), **({"relevant": r} if r else {})}) for line, r in zip(lines, relevant)
        ),
        encoding="utf-8",
    )
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{app.config.storage.uri}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{app.config.kb[0].paths[0]}"]\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["eval", "-c", str(config), "docs", "--log", str(reviewed), "--json"])
    scores = {row["mode"]: row for row in json.loads(result.output)}
    assert scores["hybrid"]["queries"] == 2 and scores["hybrid"]["mrr_at_10"] == 1.0


def test_one_off_searches_leave_the_servers_saved_figures_alone(app: App) -> None:
    from mcp_kb.index.state import read_metrics

    app.search("docs", SearchRequest(query="annual leave", mode="keyword"))
    assert read_metrics(app.config.storage.uri, "docs") is None  # not a server: nothing saved
    app.saves_metrics = True
    app.search("docs", SearchRequest(query="E5021", mode="keyword"))
    saved = read_metrics(app.config.storage.uri, "docs")
    assert saved and saved.searches == 2


def test_evaluation_queries_stay_out_of_the_metrics_and_the_query_log(make_app: MakeApp, tmp_path: Path) -> None:
    from mcp_kb.index.state import query_log_path

    app = _log_app(make_app, tmp_path, query_log=True)
    app.self_check(SelfCheckRequest(kb="docs", modes=("keyword", "hybrid"), sample=10, k=3))
    assert _figures(app).searches == 0
    assert not query_log_path(app.config.storage.uri, "docs").exists()


def test_a_rebuild_with_nothing_to_ask_about_still_syncs(make_app: MakeApp, tmp_path: Path) -> None:
    write(tmp_path / "docs" / "a.md", "# A\n\nOnly note.\n")
    settings = {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}
    make_app(settings).sync()
    (tmp_path / "docs" / "a.md").unlink()
    rebuilt = {**settings, "chunking": {"max_tokens": 200}, "sync": {"self_check_sample": 5}}
    [report] = make_app(rebuilt).sync(
        SyncRequest(allow_mass_delete=True)
    )  # empty now: no query can be made, yet it syncs
    assert report.rebuilt and report.chunks_total == 0
