"""`[[kb.repos]]`: which repository addresses and names are taken, what a repository is called, and a password in
an address that never shows in a configuration error."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_kb.errors import ConfigError
from mcp_kb.settings import RepoConfig, build_config


@pytest.mark.parametrize(
    "url, label",
    [
        ("https://git.example.com/team/payments.git", "payments"),
        ("ssh://git@git.example.com:2222/team/payments", "payments"),
        ("git@github.com:team/payments.git", "payments"),
        ("file:///srv/git/handbook.git/", "handbook"),
        ("/srv/git/handbook", "handbook"),
        ("../handbook", "handbook"),
        ("C:\\repos\\handbook", "handbook"),
        ("http://x-access-token:S3CRET@127.0.0.1/", "repo"),  # never the host, the user or the password
    ],
)
def test_repository_addresses_and_the_names_they_give(url: str, label: str) -> None:
    assert RepoConfig.model_validate({"url": url}).label == label


def test_two_repositories_of_one_name_must_be_told_apart(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="different names"):
        build_config(
            {
                "kb": [
                    {
                        "name": "k",
                        "description": "d",
                        "repos": [{"url": "https://a.example/x/lib.git"}, {"url": "https://b.example/y/lib.git"}],
                    }
                ]
            },
            base_dir=tmp_path,
            source=None,
        )
    build_config(
        {
            "kb": [
                {
                    "name": "k",
                    "description": "d",
                    "repos": [
                        {"url": "https://a.example/x/lib.git"},
                        {"url": "https://b.example/y/lib.git", "name": "lib-b"},
                    ],
                }
            ]
        },
        base_dir=tmp_path,
        source=None,
    )


@pytest.mark.parametrize(
    "repo, error",
    [
        ({"url": "https://user:hunter2-secret@git.example.com/x.git", "ref": "--bad"}, "branch, tag or commit"),
        ({"url": "https://user:hunter2-secret@git.example.com/x y.git"}, "must be an https://"),
        ({"url": "https://user:hunter2-secret@git.example.com/x.git", "timeout": "soon"}, "timeout"),
    ],
)
def test_a_password_in_a_repository_address_never_shows_in_a_config_error(
    tmp_path: Path, repo: dict[str, str], error: str
) -> None:
    with pytest.raises(ConfigError) as failed:
        build_config({"kb": [{"name": "k", "description": "d", "repos": [repo]}]}, base_dir=tmp_path, source=None)
    assert error in str(failed.value) and "hunter2-secret" not in str(failed.value)


@pytest.mark.parametrize(
    "repo",
    [
        {"url": "/tmp/x\x00y"},
        {"url": "https://h/x\n"},
        {"url": "foo\nbar"},
        {"url": "/srv/repo", "ref": "main\n"},
        {"url": "/srv/repo", "ref": ".hidden"},
        {"url": "/srv/repo", "ref": "main.lock"},
        {"url": "/srv/repo", "url_template": "{repo:{commit}}"},
        {"url": "/srv/repo", "url_template": "{path:>100000000}"},
        {"url": "/srv/repo", "url_template": "{repo!r}"},
        {"url": "/srv/repo", "url_template": "x{"},
        {"url": "https://git.example.com/api/repo.git?private_token=S3CRET"},
        {"url": "https://h/r.git#frag"},
    ],
)
def test_control_characters_odd_refs_and_format_specs_are_refused_at_load(repo: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        RepoConfig.model_validate(repo)


def test_a_relative_repository_path_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    config = build_config(
        {"kb": [{"name": "k", "description": "d", "repos": [{"url": "work"}], "versions": []}]},
        base_dir=tmp_path / "cfg",
        source=None,
    )
    assert config.kb[0].repos[0].url == str(tmp_path / "cfg" / "work")


def test_two_repositories_of_one_name_in_a_library_version_must_be_told_apart(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="different names"):
        build_config(
            {
                "kb": [
                    {
                        "name": "k",
                        "description": "d",
                        "versions": [{"name": "1.0", "repos": [{"url": "/srv/a/lib"}, {"url": "/srv/b/lib"}]}],
                    }
                ]
            },
            base_dir=tmp_path,
            source=None,
        )


def test_a_password_holding_an_at_sign_is_redacted_whole() -> None:
    from mcp_kb.settings.values import redact_url

    assert (
        redact_url("fetching https://me:p@ss@git.example.com/x.git failed")
        == "fetching https://me:***@git.example.com/x.git failed"
    )
