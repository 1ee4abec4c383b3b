"""The audit trail: what a line holds (and does not), rotation, and `mcp-kb stats --callers`."""

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mcp_kb.access import OWNER, Identity
from mcp_kb.audit import AuditTrail, callers
from mcp_kb.errors import AuditUnavailable
from mcp_kb.files import json_lines
from mcp_kb.cli import main
from mcp_kb.settings import ServerConfig


HR = Identity("token", "hr")


def test_a_line_says_who_did_what_and_holds_the_query_only_when_asked(tmp_path: Path) -> None:
    quiet = AuditTrail(ServerConfig(audit_log=str(tmp_path / "quiet.jsonl")))
    telling = AuditTrail(ServerConfig(audit_log=str(tmp_path / "telling.jsonl"), audit_queries=True))
    for trail in (quiet, telling):
        trail.record(HR, "policies", "tool search_policies", 12.345, results=3, query="my salary")
        trail.record(HR, "runbooks", "read kb://runbooks/status", 1.0, error="unknown knowledge base " + "x" * 1000)
    quiet_lines = [json.loads(line) for line in (tmp_path / "quiet.jsonl").read_text().splitlines()]
    telling_lines = [json.loads(line) for line in (tmp_path / "telling.jsonl").read_text().splitlines()]
    assert {k: v for k, v in quiet_lines[0].items() if k != "time"} == {
        "who": "hr",
        "kind": "token",
        "kb": "policies",
        "action": "tool search_policies",
        "latency_ms": 12.35,
        "results": 3,
    }
    assert "query" not in quiet_lines[1] and len(quiet_lines[1]["error"]) == 300
    assert telling_lines[0]["query"] == "my salary"


def test_the_trail_rotates_by_size_and_the_summary_reads_both_files(tmp_path: Path) -> None:
    trail = AuditTrail(ServerConfig(audit_log=str(tmp_path / "audit.jsonl"), audit_max_mb=0.001))  # ~1 KB
    for n in range(30):
        trail.record(
            Identity("token", "dev" if n % 3 else "carol"),
            "api",
            "tool search_api",
            5.0,
            results=1,
            error="boom" if n == 29 else None,
        )
    with (tmp_path / "audit.jsonl").open("a") as handle:
        handle.write('{"who": "cut by a cra')  # a crash mid-line
    assert (tmp_path / "audit.jsonl.1").exists() and (tmp_path / "audit.jsonl").stat().st_size <= 1100
    summary = {c.who.name: c for c in callers(tmp_path / "audit.jsonl")}
    assert set(summary) == {"dev", "carol"}
    total = sum(c.requests for c in summary.values())
    assert 0 < total <= 30 and summary["dev"].errors == 1
    assert summary["dev"].kbs == {"api": summary["dev"].requests}


def test_a_token_an_oauth_subject_and_the_owner_of_one_name_are_three_callers(tmp_path: Path) -> None:
    trail = AuditTrail(ServerConfig(audit_log=str(tmp_path / "audit.jsonl")))
    for who in (
        OWNER,
        Identity("token", "owner"),
        Identity("oauth", "owner", "https://id.example"),
        Identity("oauth", "owner", "https://id.example"),
    ):
        trail.record(who, "api", "tool search_api", 1.0, results=1)
    with (tmp_path / "audit.jsonl").open("a") as handle:  # a line from before kinds were recorded
        handle.write(json.dumps({"who": "owner", "kb": "api", "action": "tool search_api"}) + "\n")
    figures = {(c.who.kind, c.who.issuer): c.requests for c in callers(tmp_path / "audit.jsonl")}
    assert figures == {("owner", ""): 2, ("token", ""): 1, ("oauth", "https://id.example"): 2}
    assert [c.who.label for c in callers(tmp_path / "audit.jsonl")] == [
        "owner (OAuth https://id.example)",
        "owner",
        "owner (token)",
    ]


def test_stats_callers_prints_the_summary_and_says_when_there_is_no_trail(tmp_path: Path) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[server]\naudit_log = "audit.jsonl"\n'
        '[[kb]]\nname = "api"\ndescription = "API"\npaths = ["docs"]\n'
    )
    AuditTrail(ServerConfig(audit_log=str(tmp_path / "audit.jsonl"))).record(
        Identity("token", "dev"), "api", "tool search_api", 5, 2
    )
    shown = CliRunner().invoke(main, ["stats", "--callers", "-c", str(config)])
    as_json = CliRunner().invoke(main, ["stats", "--callers", "--json", "-c", str(config)])
    assert shown.exit_code == 0 and shown.output.startswith("dev (token): 1 requests (0 failed)")
    assert "by KB: api 1" in shown.output
    assert json.loads(as_json.output)[0]["who"] == "dev"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "api"\ndescription = "API"\npaths = ["docs"]\n'
    )
    missing = CliRunner().invoke(main, ["stats", "--callers", "-c", str(config)])
    assert missing.exit_code != 0 and "set [server] audit_log" in missing.output


def test_a_line_holding_unicode_line_separators_is_still_one_request(tmp_path: Path) -> None:
    trail = AuditTrail(ServerConfig(audit_log=str(tmp_path / "audit.jsonl"), audit_queries=True))
    for query in ("plain", "one\u2028two", "three\u2029four", "five\x85six", "seven\x1cseven"):
        trail.record(HR, "policies", "tool search_policies", 1.0, results=1, query=query)
    [hr] = callers(tmp_path / "audit.jsonl")
    assert hr.requests == 5  # str.splitlines() would have cut four of them in two


def test_caller_text_printed_by_stats_callers_cannot_forge_a_line_or_command_the_terminal(tmp_path: Path) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[server]\naudit_log = "audit.jsonl"\n'
        '[[kb]]\nname = "api"\ndescription = "API"\npaths = ["docs"]\n'
    )
    trail = AuditTrail(ServerConfig(audit_log=str(tmp_path / "audit.jsonl")))
    forged = "x\nowner: 999 requests (0 failed)\x1b[2J\u2028\u202e"
    trail.record(Identity("oauth", forged, "https://id.example"), forged, "read kb://" + forged, 1.0)
    shown = CliRunner().invoke(main, ["stats", "--callers", "-c", str(config)]).output
    assert shown.count("\n") == 1 and not any(c in shown for c in "\x1b\u2028\u202e")
    assert "x\\nowner: 999 requests (0 failed)\\x1b[2J\\u2028\\u202e (OAuth https://id.example): 1 requests" in shown


def test_a_trail_that_cannot_be_written_lets_requests_go_on_loudly_unless_it_is_required(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "blocked").write_text("a file where the trail's folder should be")
    settings: dict[str, Any] = {"audit_log": str(tmp_path / "blocked" / "audit.jsonl")}
    lenient = AuditTrail(ServerConfig(**settings))
    with caplog.at_level("ERROR", logger="mcp_kb.audit"):
        for _ in range(3):
            lenient.record(HR, "policies", "tool search_policies", 1.0, results=1)
    assert lenient.failure is not None and lenient.failure.lost == 3
    assert lenient.failure.reason in ("Not a directory", "File exists") and "blocked" not in lenient.failure.reason
    assert len(caplog.records) == 1 and "blocked" in caplog.records[0].getMessage()  # the operator's log names it
    strict = AuditTrail(ServerConfig(**settings, audit_required=True))
    with pytest.raises(AuditUnavailable) as refused:
        strict.record(HR, "policies", "tool search_policies", 1.0, results=1)
    assert "audit_required" in str(refused.value) and str(tmp_path) not in str(refused.value)
    (tmp_path / "blocked").unlink()  # the operator frees the way
    lenient.record(HR, "policies", "tool search_policies", 1.0, results=1)
    assert lenient.failure is None and len(list(json_lines(tmp_path / "blocked" / "audit.jsonl"))) == 1
