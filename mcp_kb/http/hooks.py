"""Push webhooks over HTTP: `POST /hooks/git/KB/REPO` (`/hooks/git/KB/VERSION/REPO` for a library version's
repository), sent by GitHub, GitLab, Gitea or Forgejo when a repository is pushed to.

Neither behind the bearer tokens nor the Host check: a forge cannot send a token and names the server by its public
name; the delivery's signature, made with the repository's own webhook secret, is its credential (webhooks.py
judges it), and no browser a rebinding page drives can sign. Only this handler answers below `/hooks/`.

What a request without the secret can learn: whether a webhook is configured at that exact URL (401 there, 404
everywhere else: an unknown KB, an unknown repository, one that takes no webhook and one whose variable is unset all
answer the same 404). A body over HOOK_BODY_MAX is refused (413) by its declared length, or once that much has come
when it declares none or less, without reading on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from ..api import HOOK_BODY_MAX, RecentDeliveries, Verdict, hook_target, is_number, receive_delivery
from ..settings import Config
from .edge import respond_json

log = logging.getLogger(__name__)

HOOKS_PREFIX = "/hooks/"
_GIT_HOOKS = "/hooks/git/"
RequestSync = Callable[[str, str], None]  # a KB's name and why: ask for one more sync of it

_STATUS_OF = {
    Verdict.SYNC: 202,
    Verdict.IGNORED: 202,
    Verdict.PING: 200,
    Verdict.UNSIGNED: 401,
    Verdict.REPLAYED: 409,
    Verdict.MALFORMED: 400,
}
_NOT_HERE = (
    "no webhook at this address; a repository's is /hooks/git/KB/REPO, served once its [[kb.repos]] entry "
    "names webhook_secret_env and that variable is set"
)


def is_hook_path(path: str) -> bool:
    """Whether a request's path is this handler's (every path below `/hooks/`, known or not)."""
    return path.startswith(HOOKS_PREFIX)


class _TooLarge(Exception):
    """The body is longer than HOOK_BODY_MAX."""


class _Gone(Exception):
    """The client disconnected before its body was whole."""


class HookEndpoint:
    """The webhooks of a server's repositories: a push that moves an indexed ref asks `request_sync` for a sync of
    its KB (None: a read-only server, which refuses them all)."""

    def __init__(self, config: Config, request_sync: RequestSync | None):
        self.config = config
        self.request_sync = request_sync
        self.deliveries = RecentDeliveries()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await respond_json(
                send, 405, {"error": "method_not_allowed", "detail": "webhooks are POSTed"}, {"allow": "POST"}
            )
            return
        if self.request_sync is None:
            await respond_json(
                send,
                403,
                {
                    "error": "read_only",
                    "detail": "this server is read-only ([server] "
                    "read_only): it never syncs; point the webhook at the server that does",
                },
            )
            return
        kb, _, repo = (
            scope["path"].removeprefix(_GIT_HOOKS).partition("/")
            if scope["path"].startswith(_GIT_HOOKS)
            else ("", "", "")
        )
        target = hook_target(self.config, kb, repo) if kb and repo else None
        if target is None:
            await respond_json(send, 404, {"error": "not_found", "detail": _NOT_HERE})
            return
        headers = Headers(scope=scope)
        try:
            body = await _body_within(headers, receive, HOOK_BODY_MAX)
        except _TooLarge:
            await respond_json(
                send, 413, {"error": "too_large", "detail": f"a webhook's body is at most {HOOK_BODY_MAX} bytes"}
            )
            return
        except _Gone:
            return
        outcome = receive_delivery(target, headers, body, self.deliveries)
        if outcome.verdict is Verdict.SYNC:
            log.info("%s: %s webhook %s: %s", target.kb, outcome.forge, outcome.delivery, outcome.detail)
            self.request_sync(target.kb, f"{outcome.forge} push to {target.repo}")
        elif outcome.verdict in (Verdict.UNSIGNED, Verdict.REPLAYED, Verdict.MALFORMED):
            log.warning("%s: webhook of %s refused: %s", target.kb, target.repo, outcome.detail)
        await respond_json(
            send, _STATUS_OF[outcome.verdict], {"status": outcome.verdict.value, "detail": outcome.detail}
        )


async def _body_within(headers: Headers, receive: Receive, limit: int) -> bytes:
    """The request's body, refused (_TooLarge) when its declared length is over `limit`, or once more than `limit`
    bytes came (a body sent in chunks, or longer than it said): nothing past that is read."""
    declared = headers.get("content-length", "")
    if is_number(declared) and int(declared) > limit:
        raise _TooLarge
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            raise _TooLarge
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts)
