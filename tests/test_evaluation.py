import math

from mcp_kb.evaluation import mrr_at_10, ndcg_at_10, ranked_documents, recall_at_k


def test_hits_map_to_documents_by_file_stem_first_hit_wins():
    assert ranked_documents(["a/d1.md", "d2.md", "x/d1.md", "d3.txt"]) == ["d1", "d2", "d3"]


def test_metrics_on_a_hand_worked_ranking():
    relevant = {"d2": 1, "d9": 1}
    ranked = ["d1", "d2", "d3"]
    assert mrr_at_10(ranked, relevant) == 0.5
    assert recall_at_k(ranked, relevant, 10) == 0.5
    expected = (1 / math.log2(3)) / (1 / math.log2(2) + 1 / math.log2(3))
    assert math.isclose(ndcg_at_10(ranked, relevant), expected)
    assert ndcg_at_10(["d9", "d2"], relevant) == 1.0


def test_the_qrels_header_is_recognised_not_required(tmp_path):
    from mcp_kb.evaluation import load_qrels

    with_header = tmp_path / "a.tsv"
    with_header.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    without = tmp_path / "b.tsv"
    without.write_text("q1\td1\t1\nq2\td2\t2\n", encoding="utf-8")
    assert load_qrels(with_header) == {"q1": {"d1": 1}}
    assert load_qrels(without) == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_judged_documents_missing_from_the_kb_are_warned_about_or_refused():
    import pytest

    from mcp_kb.errors import KBError
    from mcp_kb.evaluation import unmatched_documents

    qrels = {"q1": {"d1": 1}, "q2": {"d2.md": 1}}
    assert unmatched_documents(qrels, {"d1", "d2"}).startswith("1 of 2 judged documents are not in the knowledge base "
                                                              "(e.g. 'd2.md')")
    assert unmatched_documents({"q1": {"d1": 1}}, {"d1"}) == ""
    with pytest.raises(KBError, match="none of the 2 judged documents is in the knowledge base; .*d1.md"):
        unmatched_documents(qrels, {"other"})


def test_the_first_query_is_run_once_untimed_to_warm_up():
    from mcp_kb.evaluation import evaluate

    calls = []
    scores = evaluate(lambda text: calls.append(text) or ["d1.md"], {"q1": "first", "q2": "second"},
                      {"q1": {"d1": 1}, "q2": {"d1": 1}}, "keyword")
    assert calls == ["first", "first", "second"] and scores.queries == 2 and scores.ndcg_at_10 == 1.0
