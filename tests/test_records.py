"""The records the core returns (records.py): the state row read one way, and the JSON forms faces show."""

import json

from mcp_kb.records import NEVER_SYNCED, KBCheck, KBState, KBStatus, Problem, SyncProgress


def test_a_state_row_reads_the_same_before_any_sync_for_an_old_index_and_after_a_sync():
    assert (KBState({}).generation, KBState({}).outcome, KBState({}).complete) == (None, NEVER_SYNCED, False)
    assert KBState({"model": {"name": "m"}}).generation == ""  # made before generations existed
    synced = KBState({"generation": "g1", "model": {"name": "m"}, "recent_syncs": [{"outcome": "ok"}],
                      "last_sync": {"outcome": "ok", "report": {"skipped": [{"path": "a.bin", "reason": "binary"}]}}})
    assert synced.generation == "g1" and synced.complete and synced.recent_syncs == [{"outcome": "ok"}]
    assert synced.problems("skipped") == [Problem("a.bin", "binary")] and synced.problems("failures") == []
    assert KBState({"generation": "g2", "complete": True, "last_sync": {"outcome": "failed"}}).complete


def test_the_json_forms_keep_the_shapes_clients_read():
    status = KBStatus(name="docs", description="d", tool="search_docs", files=1, chunks=2, sync_running=False,
                      progress={}, last_sync=None, last_outcome=NEVER_SYNCED, last_error="", seconds=None,
                      failed_files=1, model=None, query_model_differs="", index_state="", health={},
                      failed=(Problem("x.pdf", "corrupt"),))
    shown = json.loads(json.dumps(status.as_dict()))
    assert shown["failed"] == [{"path": "x.pdf", "reason": "corrupt"}] and shown["generation"] is None
    assert shown["query_model_differs"] == ""
    assert KBCheck("docs", "search_docs", error="cannot read").as_dict() == {
        "kb": "docs", "tool": "search_docs", "error": "cannot read"}
    checked = KBCheck("docs", "search_docs", files=1, skipped=(Problem("a", "b"),)).as_dict()
    assert "error" not in checked and "crawl" not in checked and checked["skipped"] == ({"path": "a", "reason": "b"},)


def test_a_running_syncs_progress_says_how_fast_and_how_long_still_from_its_own_start():
    progress = SyncProgress(done=30, total=90, chunks=120, started=1000.0)
    assert progress.text(now=1010.0) == "30 of 90 files indexed, 120 chunks embedded, 3.0 files/s, about 20 s left"
    assert SyncProgress(started=1000.0).text(now=1001.0) == "0 of ? files indexed"


def test_progress_is_saved_and_read_back_whole_and_an_old_record_missing_fields_reads_as_zero():
    progress = SyncProgress(done=3, total=10, chunks=40, written=2, started=1000.5)
    assert SyncProgress.from_dict(progress.as_dict()) == progress
    assert SyncProgress.from_dict({"done": 1, "total": 4}) == SyncProgress(done=1, total=4)
    assert not SyncProgress().counted and SyncProgress(total=4).counted
