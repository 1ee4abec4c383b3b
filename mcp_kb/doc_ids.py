"""How a KB's document ids are named: the one place both the sources that name documents and the read side that
cites and filters them ask. A repository's files are led by `NAME/` when the KB has other sources (by `VERSION/`
in a library version), so the source that names them and the search that cites them agree; a web page's id is its
URL, whose origin a path filter may pass over."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from .settings import SOURCE_KINDS, KBConfig, RepoConfig

WEB_ORIGIN = "^https?://[^/]+"  # what comes before a web page's URL path in its id


def is_url(doc_id: str) -> bool:
    """Whether a document id names a web page rather than a file."""
    return doc_id.startswith(("http://", "https://"))


@dataclass(frozen=True)
class RepoFile:
    """A document of a repository: the revision key its commit is kept under, the repository, its path in it."""

    key: str
    repo: RepoConfig
    path: str


def id_prefix(kb: KBConfig, repo: RepoConfig) -> str:
    """What leads the ids of a repository's files: nothing when it is the KB's only source, else `NAME/`."""
    alone = len(kb.repos) == 1 and not kb.paths and not kb.urls and not kb.sources
    return "" if alone else f"{repo.label}/"


def repo_file(kb: KBConfig, doc_id: str) -> RepoFile | None:
    """The repository file a document id names (None: the document comes from no repository)."""
    for version in kb.versions:
        if doc_id.startswith(f"{version.name}/"):
            inner = repo_file(kb.of_version(version), doc_id.removeprefix(f"{version.name}/"))
            return RepoFile(f"{version.name}/{inner.key}", inner.repo, inner.path) if inner else None
    for repo in kb.repos:
        prefix = id_prefix(kb, repo)
        if doc_id.startswith(prefix):
            return RepoFile(repo.label, repo, doc_id.removeprefix(prefix))
    return None


def permalink(repo: RepoConfig, commit: str, path: str, start: int | None, end: int | None) -> str:
    """The repository's `url_template` filled in for these lines ("" without a template)."""
    if not repo.url_template:
        return ""
    first = start or 1
    return repo.url_template.format_map(
        {"repo": _repo_path(repo.url), "commit": commit, "path": quote(path), "start": first, "end": end or first}
    )


def _repo_path(url: str) -> str:
    """`team/lib` of `https://host/team/lib.git` or `git@host:team/lib.git`."""
    path = urlsplit(url).path if "://" in url else re.sub(r"^[^:]*:", "", url)
    return path.strip("/").removesuffix(".git")


def rooted_id_patterns() -> list[str]:
    """Regular expressions an id's "root" may match before a path that starts with "/" (a registered source kind's
    `ROOTED_ID`, then a web page's origin), so `{"path": {"prefix": "/guide/"}}` filters pages of any host."""
    registered = [SOURCE_KINDS.implementation(name) for name in SOURCE_KINDS.names()]
    return [rooted for kind in registered if (rooted := getattr(kind, "ROOTED_ID", None))] + [WEB_ORIGIN]
