"""Repositories over git's smart HTTP on 127.0.0.1: a private one with a token that is never written or shown,
and servers that drip, lie or send a bomb, refs and URLs that are options or helper transports, and a repository
whose config, attributes and hooks try to run commands."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from git_server import GitServer, Repo, git, serve_git
from helpers import closed_address
from pydantic import ValidationError

from mcp_kb.api import SearchRequest
from mcp_kb.app import App
from mcp_kb.errors import KBError
from mcp_kb.errors import GitError
from mcp_kb.ingest.git.command import Git, Remote
from mcp_kb.settings import RepoConfig
from helpers import MakeApp

TOKEN = "tok-3b1f9c2e7d41a8e6"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[GitServer, Repo, Path]]:
    """A private repository `team/lib.git` served with TOKEN, and its working copy."""
    work = Repo(tmp_path / "work")
    work.write("docs/rotation.md", "# Rotation\n\nThe pager rotates every Monday at nine.\n")
    work.commit()
    root = tmp_path / "served"
    git(tmp_path, "clone", "-q", "--bare", str(work.folder), str(root / "team" / "lib.git"))
    with serve_git(root, token=TOKEN) as server:
        yield server, work, root / "team" / "lib.git"


def _kb(url: str, **settings: object) -> dict[str, Any]:
    return {"name": "lib", "description": "d", "repos": [{"url": url, "ref": "main", **settings}]}


def _everything_written(*folders: Path) -> bytes:
    return b"".join(
        path.read_bytes() for folder in folders if folder.exists() for path in folder.rglob("*") if path.is_file()
    )


def test_a_private_repository_over_http_with_a_token_that_is_never_written_or_shown(
    make_app: MakeApp,
    served: tuple[GitServer, Repo, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _, _ = served
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN"))
    report = app.sync()[0]
    assert report.files_added == 1 and not report.failures
    assert app.search("lib", SearchRequest(query="pager rotates", mode="keyword")).hits[0].source == "docs/rotation.md"
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert f"Basic {basic}" in server.authorizations  # it was sent ...
    shown = [
        json.dumps(app.store.read_state("lib").as_dict()),
        caplog.text,
        report.summary(),
        repr(app.status("lib")),
        json.dumps([v.as_dict() for v in app.versions("lib")]),
    ]
    for secret in (TOKEN, basic):
        assert all(secret not in text for text in shown)  # ... and never kept or shown
        assert secret.encode() not in _everything_written(tmp_path / "index")  # the index and this machine's copy


def test_a_wrong_token_fails_in_one_line_without_the_token(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = served
    monkeypatch.setenv("LIB_TOKEN", "wrong-" + TOKEN)
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN"))
    with pytest.raises(KBError) as failed:
        app.sync()
    assert "did not accept the credentials" in str(failed.value) and TOKEN not in str(failed.value)
    assert TOKEN not in json.dumps(app.store.read_state("lib").as_dict())
    monkeypatch.delenv("LIB_TOKEN")
    with pytest.raises(KBError, match="LIB_TOKEN .* is not set"):
        app.sync()


def test_a_password_in_the_url_is_sent_as_a_header_and_redacted_everywhere(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path]
) -> None:
    server, _, _ = served
    address = server.url.removeprefix("http://")
    app = make_app(_kb(f"http://x-access-token:{TOKEN}@{address}/team/lib.git"))
    assert app.sync()[0].files_added == 1
    assert TOKEN not in json.dumps(app.store.read_state("lib").as_dict())
    wrong = make_app(_kb(f"http://x-access-token:not-{TOKEN}@{address}/team/nothing.git"))
    with pytest.raises(KBError) as failed:
        wrong.sync()
    assert TOKEN not in str(failed.value) and "127.0.0.1" in str(failed.value)
    assert TOKEN not in json.dumps(wrong.store.read_state("lib").as_dict())


def test_a_later_commit_over_http_is_synced_by_diff(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, work, bare = served
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN"))
    app.sync()
    work.write("docs/escalation.md", "# Escalation\n\nPage the duty manager after thirty minutes.\n")
    work.commit()
    git(work.folder, "push", "-q", str(bare), "main")
    report = app.sync()[0]
    assert report.crawl["commits diffed"] == 1 and report.files_added == 1 and report.files_unchanged == 1


def test_a_server_that_drips_is_cut_off_at_the_timeout(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = served
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    server.drip = True
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN", timeout=2))
    began = time.monotonic()
    with pytest.raises(GitError, match="took longer than 2 s"):
        app.sync()
    assert time.monotonic() - began < 30


def test_a_server_that_lies_is_one_clear_error_and_the_index_stays(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = served
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN"))
    app.sync()
    server.lie = True
    with pytest.raises(GitError) as failed:
        app.sync()
    assert "\n" not in str(failed.value) and len(str(failed.value)) < 600
    assert app.status("lib")[0].last_outcome == "failed"
    assert app.search("lib", SearchRequest(query="pager rotates", mode="keyword")).hits


def test_a_fetch_past_max_fetch_mb_is_stopped(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "big")
    repo.write("data.md", "# Data\n\n" + base64.b64encode(Path("/dev/urandom").open("rb").read(3_000_000)).decode())
    repo.commit()
    app = make_app(_kb(str(repo.folder), max_fetch_mb=1))
    with pytest.raises(GitError, match="more than 1 MB"):
        app.sync()


@pytest.mark.parametrize(
    "settings, refused",
    [
        ({"url": "ext::sh -c touch% /tmp/x", "ref": "main"}, "helper"),
        ({"url": "--upload-pack=touch /tmp/x", "ref": "main"}, "option"),
        ({"url": "/srv/repo", "ref": "--upload-pack=touch /tmp/x"}, "branch, tag or commit"),
        ({"url": "/srv/repo", "ref": "main", "url_template": "{path.__class__}"}, "not {path.__class__}"),
    ],
)
def test_urls_refs_and_templates_that_would_run_something_are_refused(settings: dict[str, str], refused: str) -> None:
    with pytest.raises(ValidationError, match=refused):
        RepoConfig.model_validate(settings)


def test_git_itself_refuses_helper_transports(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    copy = Git(tmp_path / "copy.git", Remote(f"ext::sh -c touch% {marker}"), timeout=30, max_bytes=2**20)
    copy.init()
    with pytest.raises(GitError, match="transport 'ext' not allowed"):
        copy.fetch("main", "refs/x")
    assert not marker.exists()


def test_the_repository_config_attributes_and_hooks_never_run(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "evil")
    markers = [tmp_path / f"ran-{n}" for n in range(5)]
    repo.write(".gitattributes", "*.md filter=evil diff=evil\n")
    repo.write("guide.md", "# Guide\n\nthe page\n")
    for n, name in enumerate(("post-checkout", "reference-transaction", "pre-auto-gc")):
        repo.write(f".git/hooks/{name}", f"#!/bin/sh\ntouch {markers[n]}\n")
        (repo.folder / ".git" / "hooks" / name).chmod(0o755)
    repo.commit()
    for key, value in (
        ("filter.evil.smudge", f"touch {markers[3]}; cat"),
        ("filter.evil.clean", "cat"),
        ("core.fsmonitor", f"touch {markers[4]}"),
        ("uploadpack.packObjectsHook", f"touch {markers[4]}"),
    ):
        git(repo.folder, "config", key, value)
    for n in range(5):
        markers[n].unlink(missing_ok=True)  # the repository's own commit ran its hook: that is not mcp-kb
    app = make_app(_kb(str(repo.folder)))
    assert app.sync()[0].files_added == 1
    repo.write("guide.md", "# Guide\n\nthe page, edited\n")
    repo.commit()
    for n in range(5):
        markers[n].unlink(missing_ok=True)
    assert app.sync()[0].files_changed == 1
    assert not any(marker.exists() for marker in markers)


def test_credentials_are_never_sent_to_the_host_a_redirect_names(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = served
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    with serve_git(tmp_path / "served") as elsewhere:
        server.redirect = elsewhere.url.replace("127.0.0.1", "localhost")
        app = make_app(_kb(f"{server.url}/team/lib.git", token_env="LIB_TOKEN"))
        with pytest.raises(GitError):
            app.sync()
    assert not any(elsewhere.authorizations)  # asked nothing with the token, or asked nothing at all


def test_a_percent_encoded_password_is_sent_as_meant(make_app: MakeApp, tmp_path: Path) -> None:
    work = Repo(tmp_path / "work")
    work.write("a.md", "# A\n\nalpha\n")
    work.commit()
    git(tmp_path, "clone", "-q", "--bare", str(work.folder), str(tmp_path / "served" / "lib.git"))
    password = "p@ss/w0rd:x"
    with serve_git(tmp_path / "served", token=password, username="me") as server:
        address = server.url.removeprefix("http://")
        app = make_app(_kb(f"http://me:p%40ss%2Fw0rd%3Ax@{address}/lib.git"))
        assert app.sync()[0].files_added == 1
    assert password not in json.dumps(app.store.read_state("lib").as_dict()) and "p%40ss" not in json.dumps(
        app.store.read_state("lib").as_dict()
    )


def test_an_askpass_program_in_the_environment_is_never_run(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = served
    marker = tmp_path / "asked"
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\ntouch {marker}\necho guess\n")
    askpass.chmod(0o755)
    monkeypatch.setenv("GIT_ASKPASS", str(askpass))
    monkeypatch.setenv("SSH_ASKPASS", str(askpass))
    with pytest.raises(GitError, match="did not accept the credentials"):
        make_app(_kb(f"{server.url}/team/lib.git")).sync()
    assert not marker.exists()


def test_a_secret_the_server_echoes_is_scrubbed_before_the_message_is_cut(tmp_path: Path) -> None:
    remote = Remote("http://127.0.0.1:9/x.git", "Authorization: Basic eA==", (TOKEN,), "lib")
    said = Git(tmp_path / "copy.git", remote, timeout=5, max_bytes=2**20)._said(
        f"remote: ERR {TOKEN}{'x' * 490}".encode(), "fetch"
    )
    assert TOKEN[1:] not in said and TOKEN[-6:] not in said


def test_a_missing_token_fails_its_kbs_sync_not_the_building_of_every_kbs_sources(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path], tmp_path: Path
) -> None:
    from mcp_kb.ingest.sources import sources_of

    server, _, _ = served
    app = make_app(_kb(f"{server.url}/team/lib.git", token_env="UNSET_TOKEN_VARIABLE"))
    assert len(sources_of(app.config.kb[0], tmp_path / "cache")) == 1  # a server's start, the watcher
    with pytest.raises(KBError, match="UNSET_TOKEN_VARIABLE .* is not set"):
        app.sync()


def test_credentials_never_travel_in_clear_to_another_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIB_TOKEN", TOKEN)
    for host in ("git.example.com", "127.0.0.1.example.com", "10.0.0.1"):
        repo = RepoConfig.model_validate({"url": f"http://{host}/team/lib.git", "token_env": "LIB_TOKEN"})
        with pytest.raises(KBError, match="https only"):
            Remote.of(repo)
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "LOCALHOST", "[::1]"):  # the server's own rule for this machine
        repo = RepoConfig.model_validate({"url": f"http://{host}:8080/team/lib.git", "token_env": "LIB_TOKEN"})
        assert Remote.of(repo).header


def _one_line_failure(app: App) -> str:
    with pytest.raises(KBError) as failed:
        app.sync()
    said = str(failed.value)
    assert "\n" not in said and "fatal:" not in said, said
    return said


def test_a_url_where_no_repository_is_one_line_naming_the_setting(make_app: MakeApp, tmp_path: Path) -> None:
    """git said `fatal: '…/userlibb' does not appear to be a git repository fatal: Could not read from remote
    repository. Please make sure …`: the path as written, and what to check."""
    said = _one_line_failure(make_app(_kb(str(tmp_path / "userlibb"))))
    assert said == (
        f"repository userlibb: {tmp_path / 'userlibb'} is not a git repository this machine can read; "
        "check its `url` under [[kb.repos]] in the config"
    )


def test_a_ref_the_repository_has_not_is_one_line_listing_its_branches(
    make_app: MakeApp, served: tuple[GitServer, Repo, Path]
) -> None:
    server, _, _ = served
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LIB_TOKEN", TOKEN)
        app = make_app(
            {
                "name": "lib",
                "description": "d",
                "repos": [{"url": f"{server.url}/team/lib.git", "ref": "mian", "token_env": "LIB_TOKEN"}],
            }
        )
        said = _one_line_failure(app)
    assert said == (
        "repository lib: it has no branch or tag 'mian' (its branches: main); check its `ref` under "
        "[[kb.repos]] in the config"
    )
    assert TOKEN not in said


def test_a_server_that_cannot_be_reached_is_one_line_naming_the_url(make_app: MakeApp) -> None:
    url = f"http://{closed_address()}/team/lib.git"
    said = _one_line_failure(make_app(_kb(url)))
    assert said.startswith(f"repository lib: cannot reach {url} (") and said.endswith(
        "); check its `url` under [[kb.repos]] in the config, and the network"
    ), said
