"""How a push delivery is judged (webhooks.py), without a server: which ref a push moves, each forge's credential,
delivery ids taken once within a bound, which URL names a webhook. The server around it: tests/http/test_hooks.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from forge_hooks import gitea, github, gitlab, push_body, signature

from mcp_kb.api import RecentDeliveries, Verdict, hook_target, receive_delivery
from mcp_kb.webhooks import HookTarget
from mcp_kb.webhooks import HookOutcome, moves_ref
from helpers import MakeConfig

SECRET = "s3cret-for-the-hook"
MAIN = HookTarget("code", "lib", "main", SECRET)


@pytest.mark.parametrize(
    ("indexed", "pushed", "default_branch", "moves"),
    [
        ("main", "refs/heads/main", "main", True),
        ("main", "refs/heads/mainline", "main", False),
        ("main", "refs/heads/feature", "main", False),
        ("v1.0", "refs/tags/v1.0", "main", True),
        ("refs/heads/main", "refs/heads/main", None, True),
        ("refs/heads/main", "refs/tags/main", None, False),
        ("HEAD", "refs/heads/trunk", "trunk", True),
        ("HEAD", "refs/heads/main", "trunk", False),
        ("HEAD", "refs/tags/v1", "trunk", False),
        ("HEAD", "refs/heads/anything", None, True),  # the body does not say: a sync too many costs one fetch
        ("0123456789abcdef0123456789abcdef01234567", "refs/heads/main", "main", False),  # a commit never moves
    ],
)
def test_which_pushes_move_the_indexed_ref(indexed: str, pushed: str, default_branch: str | None, moves: bool) -> None:
    assert moves_ref(indexed, pushed, default_branch) is moves


def _judge(
    headers: dict[str, str], body: bytes, target: HookTarget = MAIN, seen: RecentDeliveries | None = None
) -> HookOutcome:
    lowered = {name.lower(): value for name, value in headers.items()}
    return receive_delivery(target, lowered, body, seen or RecentDeliveries())


def test_each_forges_push_is_a_sync() -> None:
    body = push_body("a" * 40)
    assert _judge(github(SECRET, body), body).verdict is Verdict.SYNC
    assert _judge(gitlab(SECRET), push_body("a" * 40, owner="project")).verdict is Verdict.SYNC
    gitea_headers = gitea(SECRET, body)
    assert _judge(gitea_headers, body).forge == "gitea"
    forgejo = {name.replace("Gitea", "Forgejo"): value for name, value in gitea_headers.items() if "Gitea" in name}
    assert (_judge(forgejo, body).verdict, _judge(forgejo, body).forge) == (Verdict.SYNC, "forgejo")


def test_a_gitea_delivery_is_judged_by_its_own_signature_not_githubs_copy() -> None:
    body = push_body("a" * 40)
    assert _judge({**gitea(SECRET, body), "X-Gitea-Signature": "0" * 64}, body).verdict is Verdict.UNSIGNED


def test_head_follows_the_default_branch_the_body_names() -> None:
    target = HookTarget("code", "lib", "HEAD", SECRET)
    for body, verdict in (
        (push_body("a" * 40, "refs/heads/trunk", "trunk"), Verdict.SYNC),
        (push_body("a" * 40, "refs/heads/main", "trunk"), Verdict.IGNORED),
    ):
        assert _judge(github(SECRET, body), body, target).verdict is verdict
    gitlab_body = push_body("a" * 40, "refs/heads/trunk", "trunk", owner="project")
    assert _judge(gitlab(SECRET), gitlab_body, target).verdict is Verdict.SYNC


@pytest.mark.parametrize("credential", ["", "sha256=", "sha256=zz", f"sha1={'0' * 40}", "sha256=é", "x" * 10_000])
def test_a_wrong_signature_is_unsigned_and_says_no_secret(credential: str) -> None:
    body = push_body("a" * 40)
    outcome = _judge({**github(SECRET, body), "X-Hub-Signature-256": credential}, body)
    assert outcome.verdict is Verdict.UNSIGNED and SECRET not in outcome.detail


def test_a_signature_is_taken_in_either_case_of_its_hex_digits() -> None:
    body = push_body("a" * 40)
    assert (
        _judge(
            {**github(SECRET, body), "X-Hub-Signature-256": f"sha256={signature(SECRET, body).upper()}"}, body
        ).verdict
        is Verdict.SYNC
    )


def test_a_delivery_without_an_id_is_malformed_and_one_seen_is_replayed() -> None:
    body = push_body("a" * 40)
    headers = github(SECRET, body)
    assert _judge({k: v for k, v in headers.items() if k != "X-GitHub-Delivery"}, body).verdict is Verdict.MALFORMED
    assert _judge({**headers, "X-GitHub-Delivery": "d" * 201}, body).verdict is Verdict.MALFORMED
    seen = RecentDeliveries()
    assert [_judge(headers, body, seen=seen).verdict for _ in range(2)] == [Verdict.SYNC, Verdict.REPLAYED]


def test_an_unsigned_delivery_is_not_remembered() -> None:
    body = push_body("a" * 40)
    headers = github(SECRET, body)
    seen = RecentDeliveries()
    assert _judge({**headers, "X-Hub-Signature-256": "sha256=00"}, body, seen=seen).verdict is Verdict.UNSIGNED
    assert _judge(headers, body, seen=seen).verdict is Verdict.SYNC  # a forger cannot spend a real id first


def test_the_memory_of_deliveries_is_bounded_and_keeps_the_newest() -> None:
    seen = RecentDeliveries(kept=3)
    assert all(seen.first_time(str(n)) for n in range(5))
    assert len(seen._ids) == 3
    assert not seen.first_time("4") and seen.first_time("0")  # forgotten: taken again


def test_a_delivery_id_taken_under_one_forges_header_is_taken_under_another_too() -> None:
    """One delivery resent with its signature under Gitea's header (the same HMAC) is still the delivery taken."""
    body = push_body("a" * 40)
    seen = RecentDeliveries()
    assert _judge(github(SECRET, body, delivery="d-1"), body, seen=seen).verdict is Verdict.SYNC
    as_gitea = {"X-Gitea-Signature": signature(SECRET, body), "X-Gitea-Event": "push", "X-Gitea-Delivery": "d-1"}
    assert _judge(as_gitea, body, seen=seen).verdict is Verdict.REPLAYED


def test_a_secret_ending_in_a_line_break_or_holding_other_bytes_than_utf8_still_signs() -> None:
    body = push_body("a" * 40)
    assert _judge(github(SECRET, body), body, HookTarget("code", "lib", "main", SECRET + "\n")).verdict is Verdict.SYNC
    odd = "s\udce9cret"  # a variable holding bytes that are not UTF-8 (as Python reads them from the environment)
    assert _judge(github(SECRET, body), body, HookTarget("code", "lib", "main", odd)).verdict is Verdict.UNSIGNED


def test_events_other_than_a_push_sync_nothing() -> None:
    body = b'{"zen": "Design for failure."}'
    assert _judge(github(SECRET, body, event="ping"), body).verdict is Verdict.PING
    assert _judge(github(SECRET, body, event="issues"), body).verdict is Verdict.IGNORED
    assert _judge(gitlab(SECRET, event="Merge Request Hook"), body).verdict is Verdict.IGNORED
    deleted = push_body("0" * 40)
    assert _judge(github(SECRET, deleted), deleted).verdict is Verdict.IGNORED


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"1",
        b'"x"',
        b"null",
        b'{"ref": null}',
        b'{"ref": ["refs/heads/main"]}',
        b"{",
        b"\xff",
        '{"ref": "refs/heads/main"}'.encode("utf-16"),
        b"[" * 100_000 + b"]" * 100_000,
        b'{"ref": "refs/heads/main", "repository": 7}',
    ],
)
def test_odd_bodies_are_malformed_or_harmless(body: bytes) -> None:
    outcome = _judge(github(SECRET, body), body)
    assert outcome.verdict in (Verdict.MALFORMED, Verdict.SYNC)
    if outcome.verdict is Verdict.SYNC:  # only a body that names the pushed ref
        assert b"refs/heads/main" in body.decode("utf-16" if body.startswith(b"\xff\xfe") else "utf-8").encode()


def test_a_webhook_is_where_a_repository_names_a_set_variable(
    make_config: MakeConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    monkeypatch.delenv("HOOK_UNSET", raising=False)
    repos = [
        {"url": str(tmp_path / "r"), "name": "lib", "ref": "main", "webhook_secret_env": "HOOK_SECRET"},
        {"url": str(tmp_path / "r"), "name": "plain"},
        {"url": str(tmp_path / "r"), "name": "unset", "webhook_secret_env": "HOOK_UNSET"},
    ]
    versions = [
        {
            "name": "2.0",
            "repos": [{"url": str(tmp_path / "r"), "name": "lib", "ref": "v2", "webhook_secret_env": "HOOK_SECRET"}],
        }
    ]
    config = make_config(
        {"name": "code", "description": "d", "repos": repos}, {"name": "docs", "description": "d", "versions": versions}
    )
    assert hook_target(config, "code", "lib") == HookTarget("code", "lib", "main", SECRET)
    assert hook_target(config, "docs", "2.0/lib") == HookTarget("docs", "2.0/lib", "v2", SECRET)
    for kb, repo in (
        ("code", "plain"),
        ("code", "unset"),
        ("code", "nope"),
        ("nope", "lib"),
        ("docs", "lib"),
        ("code", "../code/lib"),
        ("CODE", "lib"),
    ):
        assert hook_target(config, kb, repo) is None
    assert SECRET not in repr(hook_target(config, "code", "lib"))


def test_a_webhook_secret_variable_must_be_a_variables_name(make_config: MakeConfig, tmp_path: Path) -> None:
    from mcp_kb.api import ConfigError

    with pytest.raises((ConfigError, ValueError), match="not an environment variable"):
        make_config(
            {
                "name": "code",
                "description": "d",
                "repos": [{"url": str(tmp_path / "r"), "webhook_secret_env": "NOT A NAME"}],
            }
        )
