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
