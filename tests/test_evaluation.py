import math
import random
from pathlib import Path

from helpers import write

from mcp_kb.evaluation import mrr_at_10, ndcg_at_10, ranked_documents, recall_at_k, self_check, self_query
from mcp_kb.requests import SelfCheckRequest
from helpers import MakeApp


def test_hits_map_to_documents_by_file_stem_first_hit_wins() -> None:
    assert ranked_documents(["a/d1.md", "d2.md", "x/d1.md", "d3.txt"]) == ["d1", "d2", "d3"]


def test_metrics_on_a_hand_worked_ranking() -> None:
    relevant = {"d2": 1, "d9": 1}
    ranked = ["d1", "d2", "d3"]
    assert mrr_at_10(ranked, relevant) == 0.5
    assert recall_at_k(ranked, relevant, 10) == 0.5
    expected = (1 / math.log2(3)) / (1 / math.log2(2) + 1 / math.log2(3))
    assert math.isclose(ndcg_at_10(ranked, relevant), expected)
    assert ndcg_at_10(["d9", "d2"], relevant) == 1.0


def test_the_qrels_header_is_recognised_not_required(tmp_path: Path) -> None:
    from mcp_kb.evaluation import load_qrels

    with_header = tmp_path / "a.tsv"
    with_header.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    without = tmp_path / "b.tsv"
    without.write_text("q1\td1\t1\nq2\td2\t2\n", encoding="utf-8")
    assert load_qrels(with_header) == {"q1": {"d1": 1}}
    assert load_qrels(without) == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_judged_documents_missing_from_the_kb_are_warned_about_or_refused() -> None:
    import pytest

    from mcp_kb.errors import KBError
    from mcp_kb.evaluation import unmatched_documents

    qrels = {"q1": {"d1": 1}, "q2": {"d2.md": 1}}
    assert unmatched_documents(qrels, {"d1", "d2"}).startswith(
        "1 of 2 judged documents are not in the knowledge base (e.g. 'd2.md')"
    )
    assert unmatched_documents({"q1": {"d1": 1}}, {"d1"}) == ""
    with pytest.raises(KBError, match="none of the 2 judged documents is in the knowledge base; .*d1.md"):
        unmatched_documents(qrels, {"other"})


def test_the_first_query_is_run_once_untimed_to_warm_up() -> None:
    from mcp_kb.evaluation import evaluate

    calls: list[str] = []

    def search(text: str) -> list[str]:
        calls.append(text)
        return ["d1.md"]

    scores = evaluate(
        search,
        {"q1": "first", "q2": "second"},
        {"q1": {"d1": 1}, "q2": {"d1": 1}},
        "keyword",
    )
    assert calls == ["first", "first", "second"] and scores.queries == 2 and scores.ndcg_at_10 == 1.0


def test_self_queries_drop_the_heading_and_read_like_a_question() -> None:
    query = self_query(
        "Deploy › Rollback",
        "Short. To roll back a deploy, run the rollback job and watch the "
        "error rate for ten minutes before closing the incident ticket.",
    )
    assert query.startswith("To roll back a deploy") and "Rollback" not in query and len(query.split()) == 16
    assert self_query("发布 › 回滚", "回滚时先运行回滚任务，然后观察十分钟的错误率，再关闭故障单。").startswith(
        "回滚时先运行"
    )
    assert self_query("FAQ › Billing", "Yes.") == "FAQ Billing"  # nothing to quote: the heading path


def test_self_check_counts_hits_and_lists_the_least_served_document() -> None:
    answers = {"q1": ["a.md", "b.md"], "q2": ["b.md"], "q3": ["c.md", "a.md"]}
    check = self_check(lambda query: answers[query], [("q1", "a.md"), ("q2", "a.md"), ("q3", "c.md")], "hybrid", 1)
    assert check.hit_rate == 2 / 3
    assert check.least_served[0] == ("a.md", 1, 2)


def test_self_check_hit_rate_drops_when_chunks_are_too_small(make_app: MakeApp, tmp_path: Path) -> None:
    """The figure is meant to catch a broken chunking setting: tiny chunks must score lower."""
    rng = random.Random(1)
    stores = ["Postgres", "Redis", "the object store", "Kafka", "SQLite", "the shared volume"]
    for i in range(40):
        sentences = [
            f"The {rng.choice(['primary', 'backup', 'regional', 'nightly'])} svc{i:02d} worker keeps "
            f"{rng.choice(['invoices', 'user sessions', 'audit events', 'payment tokens', 'thumbnails'])} in "
            f"{rng.choice(stores)} and retries failed {rng.choice(['uploads', 'writes', 'exports'])} after "
            f"{rng.randint(2, 90)} seconds when {rng.choice(stores)} is slow."
            for _ in range(8)
        ]
        write(tmp_path / "docs" / f"svc{i:02d}.md", f"# Svc{i:02d}\n\n" + " ".join(sentences) + "\n")
    rates = {}
    for label, chunking in (("default", {}), ("tiny", {"max_tokens": 16, "overlap": 0, "min_tokens": 0})):
        app = make_app(
            {"name": "k", "description": "d", "paths": [str(tmp_path / "docs")], "chunking": chunking},
            storage=str(tmp_path / f"index-{label}"),
        )
        app.sync()
        # 200 draws (all 80 default chunks, 200 of the tiny ones): with 60 the figure hung on which tiny chunks
        # were drawn; once a first sync appended rows instead of merging them (another row order) both were 0.83
        [check] = app.self_check(SelfCheckRequest(kb="k", modes=("hybrid",), sample=200, k=3))
        rates[label] = check.hit_rate
    assert rates["tiny"] < rates["default"]
