"""Grants and the gatekeeper: scoped tokens, OAuth access tokens against a real issuer on 127.0.0.1
(forged, expired, foreign, rotated keys, an issuer that is down), and per-caller rate limits."""

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fake_issuer import Issuer, serve_issuer

from mcp_kb.access import OWNER, Gatekeeper, Grant, Identity, IssuerKeys, RateLimits, Refused
from mcp_kb.errors import ConfigError
from helpers import MakeConfig

pytestmark = pytest.mark.anyio

AUDIENCE = "http://127.0.0.1:8765/mcp"
KBS = [
    {"name": name, "description": f"{name} documents", "paths": ["docs"]}
    for name in ("hr-policies", "hr-benefits", "runbooks")
]


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture
def gate(make_config: MakeConfig, issuer: Issuer, monkeypatch: pytest.MonkeyPatch) -> Gatekeeper:
    monkeypatch.setenv("RUNBOOK_TOKEN", "ops-secret-1")
    server = {
        "token": "owner-secret",
        "tokens": [
            {"name": "hr", "secret_sha256": hashlib.sha256(b"hr-secret").hexdigest(), "kbs": ["hr-*"]},
            {"name": "ops", "secret_env": "RUNBOOK_TOKEN", "kbs": ["runbooks"], "sync": True, "requests_per_minute": 3},
        ],
        "oauth": {
            "issuer": issuer.url,
            "audience": AUDIENCE,
            "groups": [{"group": "people-team", "kbs": ["hr-benefits"]}],
        },
    }
    return Gatekeeper(make_config(*KBS, server=server))


async def _refusal(gate: Gatekeeper, token: str) -> Refused:
    with pytest.raises(Refused) as caught:
        await gate.admit(token)
    return caught.value


async def test_a_scoped_token_grants_its_kbs_and_nothing_else(gate: Gatekeeper) -> None:
    hr = await gate.admit("hr-secret")
    ops = await gate.admit("ops-secret-1")
    owner = await gate.admit("owner-secret")
    assert (hr.who.name, hr.search, hr.sync) == ("hr", frozenset({"hr-policies", "hr-benefits"}), frozenset())
    assert (ops.who.name, ops.search, ops.sync) == ("ops", frozenset({"runbooks"}), frozenset({"runbooks"}))
    assert owner.search == owner.sync == {"hr-policies", "hr-benefits", "runbooks"}
    for wrong in ("hr-secret ", "HR-SECRET", "ops-secret-", "", "owner-secret\x00"):
        assert (await _refusal(gate, wrong)).status == 401


async def test_an_access_token_grants_what_its_scopes_and_groups_say(gate: Gatekeeper, issuer: Issuer) -> None:
    scoped = await gate.admit(issuer.token(AUDIENCE, scope="openid kb:runbooks:sync kb:hr-*:search"))
    grouped = await gate.admit(issuer.token(AUDIENCE, subject="bob", groups=["people-team", "other"]))
    assert (scoped.who.name, scoped.search, scoped.sync) == (
        "alice@example.com",
        frozenset({"runbooks", "hr-policies", "hr-benefits"}),
        frozenset({"runbooks"}),
    )
    assert (grouped.who.name, grouped.search, grouped.sync) == ("bob", frozenset({"hr-benefits"}), frozenset())
    nothing = await _refusal(gate, issuer.token(AUDIENCE, scope="openid kb:payroll:search"))
    assert (nothing.status, nothing.error) == (403, "insufficient_scope")


async def test_forged_foreign_and_untimely_access_tokens_are_refused(gate: Gatekeeper, issuer: Issuer) -> None:
    scope: dict[str, Any] = {"scope": "kb:runbooks:search"}
    now = int(time.time())
    public_pem = issuer.keys["key-1"].public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": now + 300, **scope}
    unsigned = jwt.encode(claims, None, algorithm="none")  # type: ignore[arg-type]  # "none" signs with no key
    # the classic confusion: an HMAC "signature" keyed with the issuer's public key
    hmac_signed = jwt.encode(claims, b"x" * 32, algorithm="HS256", headers={"kid": "key-1"})
    hmac_with_public_key = _hs256(claims, public_pem)
    tampered = issuer.token(AUDIENCE, **scope)[:-6] + "AAAAAA"
    refused = {
        "expired": issuer.token(AUDIENCE, lifetime=-120, **scope),
        "not yet valid": issuer.token(AUDIENCE, nbf=now + 600, **scope),
        "another audience": issuer.token("http://other.example/mcp", **scope),
        "another issuer": jwt.encode(
            {**claims, "iss": "http://evil.example"}, issuer.keys["key-1"], algorithm="RS256", headers={"kid": "key-1"}
        ),
        "no expiry": jwt.encode(
            {k: v for k, v in claims.items() if k != "exp"},
            issuer.keys["key-1"],
            algorithm="RS256",
            headers={"kid": "key-1"},
        ),
        "alg none": unsigned,
        "hmac": hmac_signed,
        "hmac keyed with the public key": hmac_with_public_key,
        "tampered signature": tampered,
        "garbage": "a.b.c",
    }
    for what, token in refused.items():
        refusal = await _refusal(gate, token)
        assert refusal.status == 401, what
        assert token not in str(refusal), what
    # a clock a little behind the issuer's is tolerated (leeway)
    assert (await gate.admit(issuer.token(AUDIENCE, nbf=now + 10, **scope))).who.name == "alice@example.com"


def _keys(gate: Gatekeeper) -> IssuerKeys:
    """The gate's cache of its issuer's keys (the gate trusts an issuer)."""
    assert gate.oauth is not None
    return gate.oauth.keys


def _hs256(claims: dict[str, Any], key: bytes) -> str:
    """HS256 by hand: PyJWT itself refuses to use a PEM public key as an HMAC secret."""

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    signing_input = (
        b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "key-1"}).encode())
        + b"."
        + b64(json.dumps(claims).encode())
    )
    return (signing_input + b"." + b64(hmac.new(key, signing_input, hashlib.sha256).digest())).decode()


async def test_rotated_keys_are_fetched_once_and_forged_key_ids_cannot_hammer_the_issuer(
    gate: Gatekeeper, issuer: Issuer
) -> None:
    scope: dict[str, Any] = {"scope": "kb:runbooks:search"}
    await gate.admit(issuer.token(AUDIENCE, **scope))
    assert issuer.jwks_fetches == 1
    for _ in range(200):  # cached: no fetch per token
        await gate.admit(issuer.token(AUDIENCE, **scope))
    assert issuer.jwks_fetches == 1
    _keys(gate).refetch_gap = 0  # the issuer rotates: a token under the new key fetches the keys again
    issuer.new_key("key-2", kind="EC")
    assert (await gate.admit(issuer.token(AUDIENCE, kid="key-2", **scope))).who.name == "alice@example.com"
    assert issuer.jwks_fetches == 2
    _keys(gate).refetch_gap = 60
    _keys(gate).tried_at = float("-inf")  # the last fetch was long ago
    forged = [
        jwt.encode({"sub": "x"}, issuer.keys["key-1"], algorithm="RS256", headers={"kid": f"forged-{n}"})
        for n in range(1000)
    ]
    for token in forged:
        assert (await _refusal(gate, token)).status == 401
    assert issuer.jwks_fetches == 3  # one more fetch for a thousand unknown key ids


async def test_an_issuer_that_is_down_leaves_cached_keys_working_until_too_old_and_never_admits_without_keys(
    gate: Gatekeeper, issuer: Issuer, make_config: MakeConfig
) -> None:
    scope: dict[str, Any] = {"scope": "kb:runbooks:search"}
    token = issuer.token(AUDIENCE, **scope)
    await gate.admit(token)
    issuer.down = True
    assert (await gate.admit(token)).who.name == "alice@example.com"  # the keys fetched before still serve
    _keys(gate).fetched_at -= 10 * 3600  # they are now older than keys_max_age
    _keys(gate).tried_at = float("-inf")
    assert (await _refusal(gate, issuer.token(AUDIENCE, subject="zed", **scope))).status == 503
    assert (await gate.admit(token)).who.name == "alice@example.com"  # checked before, in date: still admitted

    cold = Gatekeeper(make_config(*KBS, server={"oauth": {"issuer": issuer.url, "audience": AUDIENCE}}))
    refusals = [await _refusal(cold, token) for _ in range(3)]
    assert [r.status for r in refusals] == [503] * 3


async def test_concurrent_first_tokens_share_one_key_fetch(gate: Gatekeeper, issuer: Issuer) -> None:
    tokens = [issuer.token(AUDIENCE, subject=f"user{n}", scope="kb:runbooks:search") for n in range(20)]
    async with anyio.create_task_group() as group:
        for token in tokens:
            group.start_soon(gate.admit, token)
    assert issuer.jwks_fetches == 1


def test_rate_limits_count_per_caller_and_say_when_to_retry() -> None:
    now = [1000.0]
    limits = RateLimits(kept=100, clock=lambda: now[0])
    ops = Grant(Identity("token", "ops"), frozenset({"runbooks"}), requests_per_minute=3)
    hr = Grant(Identity("token", "hr"), frozenset({"hr"}), requests_per_minute=3)
    assert [limits.wait(ops) for _ in range(3)] == [0, 0, 0]
    assert limits.wait(ops) == pytest.approx(20)  # a third of a minute refills one request
    now[0] += 15
    assert limits.wait(ops) == pytest.approx(5)  # refused requests spend nothing
    now[0] += 5
    assert limits.wait(ops) == 0 and limits.wait(ops) == pytest.approx(20)
    assert limits.wait(hr) == 0 and limits.wait(Grant(OWNER, frozenset())) == 0
    for n in range(1000):  # callers come and go: memory stays bounded
        limits.wait(Grant(Identity("token", f"user{n}"), frozenset(), requests_per_minute=60))
    assert len(limits.buckets) == 100


async def test_an_oauth_subject_named_like_a_token_or_the_owner_is_neither(gate: Gatekeeper, issuer: Issuer) -> None:
    as_owner = await gate.admit(issuer.token(AUDIENCE, subject="owner", scope="kb:runbooks:search"))
    as_ops = await gate.admit(issuer.token(AUDIENCE, subject="ops", scope="kb:runbooks:search"))
    ops, owner = await gate.admit("ops-secret-1"), await gate.admit("owner-secret")
    assert as_owner.who != owner.who and as_owner.who.kind == "oauth" and as_owner.who.issuer == issuer.url
    assert as_ops.who != ops.who and as_ops.who.key != ops.who.key
    limits = RateLimits()
    spent = Grant(ops.who, ops.search, requests_per_minute=1)
    assert limits.wait(spent) == 0 and limits.wait(spent) > 0  # the token "ops" has used its minute
    assert limits.wait(Grant(as_ops.who, as_ops.search, requests_per_minute=1)) == 0  # the subject "ops" has not


@pytest.mark.parametrize(
    "server, message",
    [
        (
            {"tokens": [{"name": "hr", "secret_env": "X_TOKEN", "kbs": ["payroll*"]}]},
            "'payroll*' matches no knowledge base",
        ),
        ({"tokens": [{"name": "hr", "kbs": ["runbooks"]}]}, "give the token's secret one way"),
        ({"tokens": [{"name": "hr", "secret_sha256": "abc", "kbs": ["runbooks"]}]}, "64 lowercase hex"),
        (
            {
                "tokens": [
                    {"name": "a", "secret_env": "X_TOKEN", "kbs": ["runbooks"]},
                    {"name": "b", "secret_env": "X_TOKEN", "kbs": ["hr-*"]},
                ]
            },
            "share a secret",
        ),
        (
            {"oauth": {"issuer": "http://i", "audience": "http://a/mcp", "groups": [{"group": "g", "kbs": ["nope"]}]}},
            "'nope' matches no knowledge base",
        ),
    ],
)
def test_grants_that_cannot_work_are_config_errors(
    make_config: MakeConfig, server: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_config(*KBS, server=server)


def test_an_unset_secret_variable_is_named_and_no_secret_is_shown(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MISSING_TOKEN", raising=False)
    config = make_config(*KBS, server={"tokens": [{"name": "hr", "secret_env": "MISSING_TOKEN", "kbs": ["hr-*"]}]})
    with pytest.raises(ConfigError, match="MISSING_TOKEN"):
        Gatekeeper(config)
    monkeypatch.setenv("X_TOKEN", "leaky-secret-value")
    with pytest.raises(ConfigError) as caught:
        make_config(*KBS, server={"tokens": [{"name": "hr", "secret_env": "X_TOKEN", "kbs": ["hr-*"], "sync": "yes"}]})
    assert "leaky-secret-value" not in str(caught.value)


GARBAGE_JWKS = [
    b'{"keys": 5}',
    b'{"keys": [{"kty": "RSA", "kid": ["a"], "n": "x", "e": "AQAB"}]}',
    b"[" * 200_000 + b"]" * 200_000,
    b'{"keys": [{"kty": "RSA", "n": 5, "e": []}]}',
    b"\xff\xfe{",
    b"null",
    b'{"keys": [' + b'{"kty": "EC"},' * 10_000 + b"{}]}",
    b'{"keys": "' + b"A" * 2_000_000 + b'"}',
]


@pytest.mark.parametrize("garbage", GARBAGE_JWKS, ids=lambda body: body[:24].decode(errors="replace"))
async def test_an_issuer_answering_garbage_gets_refusals_never_a_server_error(
    gate: Gatekeeper, issuer: Issuer, make_config: MakeConfig, garbage: bytes
) -> None:
    scope: dict[str, Any] = {"scope": "kb:runbooks:search"}
    known = issuer.token(AUDIENCE, **scope)
    await gate.admit(known)  # keys held from before
    issuer.garbage = garbage
    _keys(gate).refetch_gap = 0
    unknown = jwt.encode({"sub": "x"}, issuer.keys["key-1"], algorithm="RS256", headers={"kid": "unknown"})
    assert (await _refusal(gate, unknown)).status == 401
    assert (await gate.admit(issuer.token(AUDIENCE, subject="bob", **scope))).who.name == "bob"  # old keys serve
    cold = Gatekeeper(make_config(*KBS, server={"oauth": {"issuer": issuer.url, "audience": AUDIENCE}}))
    refused = await _refusal(cold, known)
    assert refused.status == 503 and refused.retry_after


async def test_a_token_whose_key_id_is_not_text_is_refused_as_malformed(gate: Gatekeeper, issuer: Issuer) -> None:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    token = f"{part({'alg': 'RS256', 'kid': ['key-1']})}.{part({'sub': 'x'})}.AAAA"
    assert (await _refusal(gate, token)).status == 401


async def test_requests_waiting_on_a_slow_issuer_share_one_fetch(gate: Gatekeeper, issuer: Issuer) -> None:
    """Three unknown key ids and a token under a newly published key, while the issuer takes 1.5 s an
    answer: one fetch serves them all (it used to be one after another, each after the last had ended)."""
    scope: dict[str, Any] = {"scope": "kb:runbooks:search"}
    await gate.admit(issuer.token(AUDIENCE, **scope))
    _keys(gate).refetch_gap = 1.0  # shorter than one slow answer
    _keys(gate).tried_at = float("-inf")  # the last fetch was long ago
    issuer.delay = 1.5
    issuer.new_key("key-new")
    tokens = [
        jwt.encode({"sub": "x"}, issuer.keys["key-1"], algorithm="RS256", headers={"kid": f"forged-{n}"})
        for n in range(3)
    ]
    outcomes: dict[int, object] = {}

    async def admit(number: int, token: str) -> None:
        try:
            outcomes[number] = (await gate.admit(token)).who.name
        except Refused as refusal:
            outcomes[number] = refusal.status

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for number, token in enumerate([*tokens, issuer.token(AUDIENCE, kid="key-new", subject="new", **scope)]):
                group.start_soon(admit, number, token)
    assert outcomes == {0: 401, 1: 401, 2: 401, 3: "new"}
    assert issuer.jwks_fetches == 2  # the first one, and one for the burst


async def test_a_dripped_jwks_is_cut_at_the_fetch_deadline(make_config: MakeConfig, issuer: Issuer) -> None:
    """A byte every 20 ms would take a minute to send the keys: the fetch as a whole has a deadline."""
    cold = Gatekeeper(make_config(*KBS, server={"oauth": {"issuer": issuer.url, "audience": AUDIENCE}}))
    assert cold.oauth
    cold.oauth.keys.deadline = 1.0
    issuer.drip = 0.02
    with anyio.fail_after(30):
        refused = await _refusal(cold, issuer.token(AUDIENCE, scope="kb:runbooks:search"))
    assert refused.status == 503
    assert issuer.bytes_dripped < len(json.dumps(issuer.jwks())) / 2
