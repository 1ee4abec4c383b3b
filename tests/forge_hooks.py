"""Push deliveries as GitHub, GitLab and Gitea send them, signed with a secret, for the webhook tests."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid


def signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def push_body(
    commit: str, ref: str = "refs/heads/main", default_branch: str = "main", owner: str = "repository"
) -> bytes:
    """A push event's body as the forges send it (the fields the server reads, and a few it does not)."""
    return json.dumps(
        {
            "ref": ref,
            "before": "0" * 40,
            "after": commit,
            "checkout_sha": commit,
            owner: {"name": "lib", "default_branch": default_branch},
            "commits": [{"id": commit, "message": "change"}],
        }
    ).encode()


def github(secret: str, body: bytes, event: str = "push", delivery: str | None = None) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={signature(secret, body)}",
    }


def gitlab(secret: str, event: str = "Push Hook", delivery: str | None = None) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": delivery or str(uuid.uuid4()),
        "X-Gitlab-Token": secret,
    }


def gitea(secret: str, body: bytes, event: str = "push", delivery: str | None = None) -> dict[str, str]:
    """Gitea sends GitHub's headers too (signed alike)."""
    delivery = delivery or str(uuid.uuid4())
    return {
        "Content-Type": "application/json",
        "X-Gitea-Event": event,
        "X-Gitea-Delivery": delivery,
        "X-Gitea-Signature": signature(secret, body),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={signature(secret, body)}",
    }
