"""The records the core returns (records.py): the state row read one way, and the JSON forms faces show."""

import json
from typing import Any

from mcp_kb.records import (
    NEVER_SYNCED,
    Building,
    HealthCheck,
    IndexedModel,
    KBCheck,
    KBState,
    KBStats,
    KBStatus,
    KBSummary,
    LastSyncFigures,
    Problem,
    Rollback,
    SearchFigures,
    StageLatency,
    SyncBrief,
    SyncProgress,
    SyncReport,
)


def test_a_state_row_reads_the_same_before_any_sync_for_an_old_index_and_after_a_sync() -> None:
    assert (KBState.from_dict({}).generation, KBState.from_dict({}).outcome, KBState.from_dict({}).complete) == (
        None,
        NEVER_SYNCED,
        False,
    )
    assert KBState.from_dict({"model": {"name": "m"}}).generation == ""  # made before generations existed
    synced = KBState.from_dict(
        {
            "generation": "g1",
            "model": {"name": "m"},
            "recent_syncs": [{"outcome": "ok"}],
            "last_sync": {"outcome": "ok", "report": {"skipped": [{"path": "a.bin", "reason": "binary"}]}},
        }
    )
    assert synced.generation == "g1" and synced.complete
    assert synced.recent_syncs == (SyncBrief(outcome="ok"),) and synced.indexed_model == IndexedModel(name="m")
    assert KBState().indexed_model is None and KBState().recent_syncs == ()
    assert synced.last_report.skipped == [Problem("a.bin", "binary")] and synced.last_report.failures == []
    assert KBState.from_dict({"generation": "g2", "complete": True, "last_sync": {"outcome": "failed"}}).complete


def test_the_json_forms_keep_the_shapes_clients_read() -> None:
    status = KBStatus(
        name="docs",
        description="d",
        tool="search_docs",
        files=1,
        chunks=2,
        sync_running=False,
        progress=SyncProgress(),
        last_sync=None,
        last_outcome=NEVER_SYNCED,
        last_error="",
        seconds=None,
        failed_files=1,
        model=None,
        query_model_differs="",
        index_state="",
        health=None,
        failed=(Problem("x.pdf", "corrupt"),),
    )
    shown = json.loads(json.dumps(status.as_dict()))
    assert shown["failed"] == [{"path": "x.pdf", "reason": "corrupt"}] and shown["generation"] is None
    assert shown["query_model_differs"] == "" and shown["health"] == {} and shown["model"] is None
    checked = KBStatus(**{**status.__dict__, "model": IndexedModel("m", 384, "ab"), "health": HealthCheck(k=10)})
    assert checked.as_dict()["model"] == {"name": "m", "dimension": 384, "file_hash": "ab"}
    assert checked.as_dict()["health"] == {"checked_at": "", "k": 10, "queries": 0, "hit_rate": {}}
    assert shown["progress"] == {}  # no sync runs, or one before its first batch: as clients always read it
    running = KBStatus(**{**status.__dict__, "sync_running": True, "progress": SyncProgress(3, 10, started=5.0)})
    assert running.as_dict()["progress"] == {"done": 3, "total": 10, "chunks": 0, "written": 0, "started": 5.0}
    never = KBStats("docs", None, None, LastSyncFigures(None, 0, 0, {}))
    assert never.as_dict() == {
        "name": "docs",
        "search": {},
        "health": {},
        "last_sync": {"finished_at": None, "chunks_embedded": 0, "tokens_embedded": 0, "seconds": {}},
    }
    assert KBCheck("docs", "search_docs", error="cannot read").as_dict() == {
        "kb": "docs",
        "tool": "search_docs",
        "error": "cannot read",
    }
    listed = KBCheck("docs", "search_docs", files=1, skipped=(Problem("a", "b"),)).as_dict()
    assert "error" not in listed and "crawl" not in listed and listed["skipped"] == ({"path": "a", "reason": "b"},)


def test_a_running_syncs_progress_says_how_fast_and_how_long_still_from_its_own_start() -> None:
    progress = SyncProgress(done=30, total=90, chunks=120, started=1000.0)
    assert progress.text(now=1010.0) == "30 of 90 files indexed, 120 chunks embedded, 3.0 files/s, about 20 s left"
    assert SyncProgress(started=1000.0).text(now=1001.0) == "0 of ? files indexed"


def test_progress_is_saved_and_read_back_whole_and_an_old_record_missing_fields_reads_as_zero() -> None:
    progress = SyncProgress(done=3, total=10, chunks=40, written=2, started=1000.5)
    assert SyncProgress.from_dict(progress.as_dict()) == progress
    assert SyncProgress.from_dict({"done": 1, "total": 4}) == SyncProgress(done=1, total=4)
    assert not SyncProgress().counted and SyncProgress(total=4).counted


# What sync.py, metrics.py and a self-check save: read back as records, their JSON forms are the saved ones.
SAVED_SUMMARY = {"documents": 2, "kinds": {"md": 1, "txt": 1}, "chunks": 5, "titles": ["Guide", "notes"]}
SAVED_HEALTH = {
    "checked_at": "2024-05-01T10:00:00Z",
    "k": 10,
    "queries": 6,
    "hit_rate": {"hybrid": 0.8333, "keyword": 1.0},
}
SAVED_BRIEF = {
    "started_at": "2024-05-01T10:00:00Z",
    "finished_at": "2024-05-01T10:00:03Z",
    "outcome": "ok",
    "error": "",
    "rebuilt": "first sync",
    "added": 2,
    "changed": 0,
    "deleted": 0,
    "unchanged": 0,
    "failed": 0,
    "chunks_embedded": 5,
    "chunks_reused": 0,
    "seconds": 3.2,
}
SAVED_SEARCHES = {
    "since": "2024-05-01T09:00:00Z",
    "searches": 3,
    "cache_hit_rate": 0.3333,
    "degraded_answers": 0,
    "zero_result_queries": 1,
    "query_embedding_tokens": 4,
    "rerank_calls": 0,
    "latency_ms": {
        "keyword": {"count": 2, "p50": 1.5, "p95": 2.25, "max": 2.25},
        "total": {"count": 3, "p50": 3.0, "p95": 9.5, "max": 9.5},
    },
    "hourly": [
        {"hour": "2024-05-01T09:00Z", "searches": 3, "zero_results": 1, "degraded": 0, "p50_ms": 3.0, "p95_ms": 9.5}
    ],
}


def test_saved_records_read_back_whole_and_their_json_forms_are_what_was_saved() -> None:
    for record, saved in (
        (KBSummary, SAVED_SUMMARY),
        (HealthCheck, SAVED_HEALTH),
        (SyncBrief, SAVED_BRIEF),
        (SearchFigures, SAVED_SEARCHES),
        (IndexedModel, {"name": "m", "dimension": 384, "file_hash": "ab"}),
    ):
        assert json.loads(json.dumps(record.from_dict(saved).as_dict())) == saved
    figures = SearchFigures.from_dict(SAVED_SEARCHES)
    assert figures.latency_ms["total"] == StageLatency(3, 3.0, 9.5, 9.5) and figures.hourly[0].searches == 3
    assert KBSummary.from_dict(SAVED_SUMMARY).titles == ("Guide", "notes")


def test_old_saved_records_missing_fields_read_as_zero_or_empty() -> None:
    assert KBSummary.from_dict({"documents": 2, "chunks": 5}) == KBSummary(documents=2, chunks=5)
    assert KBSummary.from_dict({}).as_dict() == {"documents": 0, "kinds": {}, "chunks": 0, "titles": []}
    assert HealthCheck.from_dict({"k": 10, "hit_rate": {"hybrid": 0.9}}) == HealthCheck(k=10, hit_rate={"hybrid": 0.9})
    assert SyncBrief.from_dict({"outcome": "failed", "error": "boom"}) == SyncBrief(outcome="failed", error="boom")
    assert SyncBrief.from_dict({}).seconds is None
    old = SearchFigures.from_dict(
        {"since": "2024-05-01T09:00:00Z", "searches": 2, "latency_ms": {"total": {"count": 2, "p50": 1.0}}}
    )  # before hourly figures
    assert old.hourly == () and old.rerank_calls == 0 and old.latency_ms["total"] == StageLatency(2, 1.0)
    assert IndexedModel.from_dict({"name": "m", "dimension": 384}) == IndexedModel("m", 384)  # before weight hashes
    assert SyncBrief.from_dict({**SAVED_BRIEF, "added_later": 1}) == SyncBrief.from_dict(SAVED_BRIEF)  # a newer file


def test_a_check_says_what_crawling_its_web_sources_cost() -> None:
    assert KBCheck("docs", "search_docs", crawl={"requests": 12, "downloaded": 3}).crawl_requests == 12
    assert KBCheck("docs", "search_docs", crawl={"notes": 2}).crawl_requests == 0  # no web source


def test_a_sync_report_is_read_back_from_the_state_as_it_was_saved() -> None:
    report = SyncReport(
        "docs",
        files_added=3,
        chunks_embedded=12,
        seconds={"total": 1.5},
        crawl={"requests": 4},
        failures=[Problem("a.pdf", "encrypted")],
        skipped=[Problem("b.bin", "binary")],
    )
    assert SyncReport.from_dict(report.as_dict()) == report
    assert SyncReport.from_dict({"kb": "docs", "files_added": 1, "a_later_field": 7}) == SyncReport(
        "docs", files_added=1
    )
    assert KBState.from_dict({"last_sync": {"report": report.as_dict(), "finished_at": "t"}}).last_report == report


def test_a_state_row_is_written_and_read_by_its_record() -> None:
    fingerprints = {"model": {"name": "m", "dimension": 384}, "chunking": {"max_tokens": 256}}
    state = KBState.from_dict(KBState.active(fingerprints, "g1", complete=True).as_dict())
    assert (state.generation, state.complete, state.built, state.fingerprint("chunking")) == (
        "g1",
        True,
        True,
        {"max_tokens": 256},
    )
    assert state.building is None and not KBState().built
    rebuilding = KBState.from_dict(state.building_beside("g2", {"model": {"name": "n"}}).as_dict())
    assert rebuilding.building == Building("g2", {"model": {"name": "n"}}) and rebuilding.generation == "g1"
    ended = KBState.from_dict(state.ended("t0", "failed", SyncReport("docs", files_added=2), "boom " * 200).as_dict())
    assert ended.outcome == "failed" and ended.last_report.files_added == 2 and ended.last_error.startswith("boom")
    assert len(ended.recent_syncs[-1].error) == 500 and ended.recent_syncs[-1].added == 2  # the brief keeps a start


def test_a_state_row_reads_back_as_it_was_saved_and_keeps_keys_it_does_not_know_as_fingerprints() -> None:
    row: dict[str, Any] = {
        "model": {"name": "m", "dimension": 384},
        "layout": 3,
        "a_later_fingerprint": [1, 2],
        "generation": "g1",
        "complete": True,
        "building": {"generation": "g2", "fingerprints": {"model": {"name": "n"}}},
        "last_sync": {"started_at": "t0", "finished_at": "t1", "outcome": "ok", "error": "", "report": {"kb": "d"}},
        "recent_syncs": [SyncBrief(outcome="ok").as_dict()],
        "confirmed_at": "t1",
        "version": 4,
        "revisions": {"repo": {"commit": "abc"}},
        "owner": "/p/kb.toml",
        "rolling_back": {"to": 2, "started": "t2", "by": "me"},
    }
    state = KBState.from_dict(row)
    assert state.as_dict() == {**row, "last_sync": {**row["last_sync"], "report": SyncReport("d").as_dict()}}
    assert state.fingerprint("a_later_fingerprint") == [1, 2] and state.rolling_back == Rollback(2, "t2", "me")
    assert KBState().as_dict() == {} and KBState.from_dict({}) == KBState()
