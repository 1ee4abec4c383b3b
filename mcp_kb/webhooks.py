"""Push webhooks from git forges (GitHub, GitLab, Gitea and Forgejo): which repository a webhook's URL names, whether
a delivery carries that repository's secret, whether it was taken before, and whether the push moved the ref the KB
indexes. Decisions only: the HTTP face (http/hooks.py) reads the request and words the answer, and the sync a
push asks for is LiveSync's (one more sync per KB, however many pushes come while one runs).

A delivery is judged in this order, so an unsigned request learns nothing and cannot fill the memory of deliveries:
its credential (a forge's HMAC-SHA256 signature of the body, or GitLab's token, compared in constant time), its
delivery id (taken once), its event (a push, or GitHub's ping), its body (a JSON object naming the pushed ref).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from .settings import Config

__all__ = [
    "HOOK_BODY_MAX",
    "RecentDeliveries",
    "Verdict",
    "hook_target",
    "receive_delivery",
]

HOOK_BODY_MAX = 1 << 20  # bytes of a delivery's body: a push of many commits is some tens of KB
_DELIVERY_ID_MAX = 200  # characters: forges send a UUID
_DELIVERIES_KEPT = 4096  # delivery ids remembered per process, newest kept: a day of busy pushes, under 1 MB
_DELETED = frozenset("0")  # a push's `after` of only zeros: the ref was deleted


class Verdict(Enum):
    """What a delivery to a repository's webhook amounts to."""

    SYNC = "sync"  # a signed push that moved the ref the KB indexes: sync it
    IGNORED = "ignored"  # signed, but of another ref, a deletion, or an event that is no push
    PING = "ping"  # signed: the forge checks the webhook works
    UNSIGNED = "unsigned"  # no credential, or a wrong one
    REPLAYED = "replayed"  # signed, with a delivery id already taken
    MALFORMED = "malformed"  # signed, but without a delivery id, or with a body that is not a push


@dataclass(frozen=True)
class HookTarget:
    """The repository a webhook URL names, the ref its KB indexes and the secret its deliveries carry."""

    kb: str
    repo: str  # as the URL names it: the repository's name, `VERSION/NAME` for a library version's
    ref: str
    secret: str = field(repr=False)


@dataclass(frozen=True)
class HookOutcome:
    """A delivery's verdict, what the answer tells the forge (never the secret), and the forge's name."""

    verdict: Verdict
    detail: str
    forge: str = ""
    delivery: str = ""  # its id ("" when it has none, or was not signed)


@dataclass(frozen=True)
class _Forge:
    """Where one forge puts a delivery's credential, event and id, and the pushed repository's default branch."""

    name: str
    credential: str  # header
    event: str  # header
    delivery: str  # header
    signed: bool  # the credential is an HMAC-SHA256 of the body (else the secret itself: GitLab's token)
    prefix: str  # before the signature's hex digits
    pushes: frozenset[str]  # event names of a push (branch or tag)
    pings: frozenset[str]
    owner: str  # the body's key for the repository, which holds its `default_branch`


# Gitea and Forgejo also send GitHub's headers: their own are looked for first.
_FORGES = (
    _Forge(
        "gitea",
        "x-gitea-signature",
        "x-gitea-event",
        "x-gitea-delivery",
        True,
        "",
        frozenset({"push"}),
        frozenset(),
        "repository",
    ),
    _Forge(
        "forgejo",
        "x-forgejo-signature",
        "x-forgejo-event",
        "x-forgejo-delivery",
        True,
        "",
        frozenset({"push"}),
        frozenset(),
        "repository",
    ),
    _Forge(
        "github",
        "x-hub-signature-256",
        "x-github-event",
        "x-github-delivery",
        True,
        "sha256=",
        frozenset({"push"}),
        frozenset({"ping"}),
        "repository",
    ),
    _Forge(
        "gitlab",
        "x-gitlab-token",
        "x-gitlab-event",
        "x-gitlab-event-uuid",
        False,
        "",
        frozenset({"Push Hook", "Tag Push Hook"}),
        frozenset(),
        "project",
    ),
)


def hook_target(config: Config, kb: str, repo: str) -> HookTarget | None:
    """The repository `repo` of KB `kb` when it takes webhooks (it names `webhook_secret_env`, and that variable is
    set); else None, whichever of these is missing: the answer must not tell which KBs exist."""
    known = next((candidate for candidate in config.kb if candidate.name == kb), None)
    if known is None:
        return None
    entry = dict(known.pushed_repos).get(repo)
    secret = entry.webhook_secret() if entry else None
    if entry is None or not secret:
        return None
    return HookTarget(known.name, repo, entry.ref, secret)


class RecentDeliveries:
    """The ids of the deliveries this process took, the newest `kept`: a delivery sent again is refused."""

    def __init__(self, kept: int = _DELIVERIES_KEPT):
        self.kept = kept
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, delivery: str) -> bool:
        """Remember a delivery id (whichever forge's header carried it); False when it was remembered already."""
        key = delivery
        with self._lock:
            if key in self._ids:
                return False
            self._ids[key] = None
            while len(self._ids) > self.kept:
                self._ids.popitem(last=False)
            return True


def receive_delivery(
    target: HookTarget, headers: Mapping[str, str], body: bytes, deliveries: RecentDeliveries
) -> HookOutcome:
    """Judge one delivery to `target`'s webhook (`headers` looked up by lower-case name)."""
    forge = next((forge for forge in _FORGES if forge.credential in headers), None)
    if forge is None:
        return HookOutcome(
            Verdict.UNSIGNED,
            "no signature (X-Hub-Signature-256, X-Gitea-Signature) or token (X-Gitlab-Token): set the webhook's secret",
        )
    if not _credential_holds(forge, headers[forge.credential], body, target.secret):
        return HookOutcome(
            Verdict.UNSIGNED,
            f"the {forge.name} {'signature' if forge.signed else 'token'} does not "
            f"match this repository's webhook secret",
            forge.name,
        )
    delivery = headers.get(forge.delivery, "").strip()
    if not delivery or len(delivery) > _DELIVERY_ID_MAX:
        return HookOutcome(
            Verdict.MALFORMED, f"no delivery id ({forge.delivery}) of at most {_DELIVERY_ID_MAX} characters", forge.name
        )
    if not deliveries.first_time(delivery):
        return HookOutcome(
            Verdict.REPLAYED, "this delivery was taken already; push again to sync", forge.name, delivery
        )
    return replace(_judge_event(forge, headers.get(forge.event, ""), body, target), delivery=delivery)


def _credential_holds(forge: _Forge, given: str, body: bytes, secret: str) -> bool:
    """Whether a delivery's credential is the secret's (as bytes, in constant time: a header is Latin-1 text)."""
    presented = given.strip().encode("latin-1", "replace")
    # as the variable holds it (bytes that are not UTF-8 too), without the line break a file read into it may end with
    key = secret.strip().encode("utf-8", "surrogateescape")
    if not forge.signed:
        return hmac.compare_digest(presented, key)
    digest = hmac.new(key, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(presented.lower(), f"{forge.prefix}{digest}".encode())


def _judge_event(forge: _Forge, event: str, body: bytes, target: HookTarget) -> HookOutcome:
    """A signed delivery's event: a push of the indexed ref is a sync; a ping or another event is nothing to do."""
    if event in forge.pings:
        return HookOutcome(Verdict.PING, "pong: the webhook works", forge.name)
    if event not in forge.pushes:
        return HookOutcome(
            Verdict.IGNORED, f"a {event[:40] or 'nameless'} event is not a push: nothing to sync", forge.name
        )
    push = _push(body, forge.owner)
    if push is None:
        return HookOutcome(
            Verdict.MALFORMED,
            "the body is not a push event's JSON object with its `ref` (choose the content type application/json)",
            forge.name,
        )
    ref, default_branch, after = push
    if not moves_ref(target.ref, ref, default_branch):
        return HookOutcome(
            Verdict.IGNORED, f"a push to {ref[:200]}, not to the indexed {target.ref}: nothing to sync", forge.name
        )
    if after and set(after) <= _DELETED:
        return HookOutcome(Verdict.IGNORED, f"the push deleted {ref[:200]}: nothing to sync", forge.name)
    return HookOutcome(Verdict.SYNC, f"a push to {ref[:200]}: {target.kb} syncs", forge.name)


def _push(body: bytes, owner: str) -> tuple[str, str | None, str] | None:
    """A push body's ref, its repository's default branch (None: not given) and the commit it moved to ("" when not
    given); None for a body that is no push."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # not UTF-8 or not JSON; nested past the parser's depth
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("ref"), str):
        return None
    repository = payload.get(owner)
    default_branch = repository.get("default_branch") if isinstance(repository, dict) else None
    after = payload.get("after")
    return (
        payload["ref"],
        default_branch if isinstance(default_branch, str) and default_branch else None,
        after if isinstance(after, str) else "",
    )


def moves_ref(indexed: str, pushed: str, default_branch: str | None) -> bool:
    """Whether a push to `pushed` (`refs/heads/…`, `refs/tags/…`) moves the ref a KB indexes: `HEAD` is the
    default branch (any branch when the body does not say which it is: a sync too many costs one fetch), a full
    `refs/…` name itself, a short name the branch or tag of that name. A commit id never moves."""
    if indexed == "HEAD":
        return pushed.startswith("refs/heads/") if default_branch is None else pushed == f"refs/heads/{default_branch}"
    if indexed.startswith("refs/"):
        return pushed == indexed
    return pushed in (f"refs/heads/{indexed}", f"refs/tags/{indexed}")
