"""The records the core returns (records.py): the state row read one way, and the JSON forms faces show."""

import json

from mcp_kb.records import NEVER_SYNCED, KBCheck, KBState, KBStatus, Problem


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
