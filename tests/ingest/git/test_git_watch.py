"""A repository given as a local path is followed by the watcher (`[kb.sync] watch = true`): a new commit on its
ref syncs it; the watcher looks at the refs in its git folder, not at its objects or working files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from git_server import Repo, git
from helpers import eventually

from mcp_kb.app import App
from mcp_kb.ingest.git.source import GitSource
from mcp_kb.live import LiveSync, SyncRunner
from helpers import MakeApp
from helpers import MakeConfig

pytestmark = pytest.mark.anyio


def _kb(url: str, ref: str = "main", **sync: object) -> dict[str, Any]:
    return {"name": "code", "description": "a repository", "repos": [{"url": url, "ref": ref}], "sync": sync}


def _source(make_config: MakeConfig, url: str, ref: str = "main") -> GitSource:
    kb = make_config(_kb(url, ref)).kb[0]
    return GitSource(kb, kb.repos[0], Path(kb.repos[0].url).parent / "cache", "")


def _repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "lib")
    repo.write("README.md", "# Library\n\nFirst words.\n")
    repo.commit("first")
    return repo


async def test_a_commit_to_a_watched_local_repository_syncs_it(make_app: MakeApp, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    app = make_app(_kb(str(repo.folder), watch=True, debounce=0.05))
    app.sync()
    runner = SyncRunner(app)

    async def names(commit: str) -> bool:
        return app.status("code")[0].commits.get("lib") == commit

    def commit(words: str) -> str:
        repo.write("notes.md", f"# Notes\n\n{words}\n")
        return repo.commit(words)

    async with anyio.create_task_group() as group:
        group.start_soon(LiveSync(runner, app.config.kb).run)
        # The watcher is up once a commit of ours has synced (one a second until then: it starts in its own time).
        probe = commit("probe 0")
        with anyio.fail_after(30):
            for n in range(1, 1000):
                with anyio.move_on_after(1):
                    await eventually(lambda: names(probe), seconds=30)
                    break
                probe = commit(f"probe {n}")
        later = commit("a later commit")
        await eventually(lambda: names(later), seconds=30, what="status naming the later commit")
        group.cancel_scope.cancel()


def test_the_watcher_follows_a_local_repositorys_refs_only(make_config: MakeConfig, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    git_folder = repo.folder / ".git"
    for url in (str(repo.folder), f"file://{repo.folder}"):
        source = _source(make_config, url)
        assert source.watch_folders() == [git_folder]
        assert source.concerns(git_folder / "refs" / "heads" / "main")
        assert source.concerns(git_folder / "packed-refs")
        for other in ("refs/heads/feature", "refs/heads/main.lock", "objects/ab/cdef", "index", "HEAD", "config"):
            assert not source.concerns(git_folder / other), other
        assert not source.concerns(repo.folder / "README.md")  # a working file: not committed yet


def test_head_follows_any_branch_and_head_itself(make_config: MakeConfig, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    source = _source(make_config, str(repo.folder), ref="HEAD")
    assert source.concerns(repo.folder / ".git" / "HEAD")
    assert source.concerns(repo.folder / ".git" / "refs" / "heads" / "feature")
    assert not source.concerns(repo.folder / ".git" / "refs" / "tags" / "v1")


def test_a_bare_repository_is_watched_in_itself(make_config: MakeConfig, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bare = tmp_path / "lib.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo.folder), str(bare))
    source = _source(make_config, str(bare))
    assert source.watch_folders() == [bare] and source.concerns(bare / "refs" / "tags" / "main")


def test_a_remote_repository_or_a_folder_that_is_none_is_not_watched(make_config: MakeConfig, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    for url in ("https://git.example.com/team/lib.git", str(tmp_path / "plain"), str(tmp_path / "missing")):
        source = _source(make_config, url)
        assert source.watch_folders() == [] and not source.concerns(tmp_path / "plain" / "refs" / "heads" / "main")


async def test_without_watch_a_local_repository_starts_no_watcher(make_app: MakeApp, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    app = make_app(_kb(str(repo.folder), watch=False))
    with anyio.fail_after(10):  # a watcher (or any trigger) would run until cancelled
        await LiveSync(SyncRunner(app), app.config.kb).run()


async def test_a_worker_process_runs_only_the_syncs_pushes_ask_for(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    monkeypatch.setenv("HOOK_SECRET", "s")
    app = make_app(_kb(str(repo.folder), watch=True, on_start=True))
    with anyio.fail_after(10):  # no watcher, no start-up sync: the lead runs those
        await LiveSync(SyncRunner(app), app.config.kb).run(triggers=False)
    pushed = make_app(
        {
            **_kb(str(repo.folder), watch=True),
            "repos": [{"url": str(repo.folder), "ref": "main", "webhook_secret_env": "HOOK_SECRET"}],
        }
    )
    runner = SyncRunner(pushed)
    live = LiveSync(runner, pushed.config.kb)
    async with anyio.create_task_group() as group:
        group.start_soon(live.run, False)
        live.request("code", "github push to lib")
        await eventually(lambda: _synced(pushed, repo.head()), seconds=30, what="the pushed commit synced")
        group.cancel_scope.cancel()
    assert runner.syncs_started == 1


async def _synced(app: App, commit: str) -> bool:
    return app.status("code")[0].commits.get("lib") == commit
