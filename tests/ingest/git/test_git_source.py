"""Repository KBs (`[[kb.repos]]`): the first sync fetches a commit, later ones index what the diff says changed,
without reading or hashing the rest; renames keep their vectors; a force-push and a lost local copy fall back to
comparing trees; status, the report, versions and citations name the commit."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from git_server import Repo, git

import mcp_kb.sync
from mcp_kb.api import BrowseRequest, SearchRequest, SyncRequest
from mcp_kb.app import App
from mcp_kb.digest import file_sha256
from mcp_kb.index.store import LanceStore
from mcp_kb.records import SyncReport
from mcp_kb.errors import KBError
from mcp_kb.index.state import source_cache_dir
from mcp_kb.requests import RollbackRequest
from helpers import MakeApp, MakeConfig

pytestmark = pytest.mark.anyio


def _kb(repo: Repo, **settings: object) -> dict[str, Any]:
    return {
        "name": "code",
        "description": "a repository",
        "repos": [{"url": str(repo.folder), "ref": "main", **settings}],
    }


def _sync(app: App, **request: Any) -> SyncReport:
    return app.sync(request=SyncRequest(**request))[0] if request else app.sync()[0]


def _synced(make_app: MakeApp, tmp_path: Path, files: dict[str, str]) -> tuple[Repo, App]:
    """A repository `lib` of these files, committed, and a KB of it synced once."""
    repo = Repo(tmp_path / "lib")
    for path, text in files.items():
        repo.write(path, text)
    repo.commit()
    app = make_app(_kb(repo))
    _sync(app)
    return repo, app


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "upstream")
    for i in range(1000):
        repo.write(f"notes/n{i:04d}.md", f"# Note {i}\n\nRunbook entry number {i} for service s{i % 17}.\n")
    repo.commit("a thousand notes")
    return repo


def _count_hashing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    hashed: list[str] = []
    real = file_sha256  # what mcp_kb.sync hashes with

    def counted(path: Path) -> str:
        hashed.append(str(path))
        return real(path)

    monkeypatch.setattr(mcp_kb.sync, "file_sha256", counted)
    return hashed


def test_a_commit_changing_3_of_1000_files_reads_and_embeds_only_those_3(
    make_app: MakeApp, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(repo))
    first = _sync(app)
    assert first.files_added == 1000 and first.crawl["trees compared"] == 1
    for i in (3, 500, 999):
        repo.write(f"notes/n{i:04d}.md", f"# Note {i}\n\nRunbook entry {i}: now restarted by the pager rota.\n")
    commit = repo.commit("three edits")
    hashed = _count_hashing(monkeypatch)
    second = _sync(app)
    assert second.crawl["commits diffed"] == 1 and "trees compared" not in second.crawl
    assert second.crawl["files read from git"] == 3
    assert (second.files_changed, second.files_unchanged, second.files_added, second.files_deleted) == (3, 997, 0, 0)
    assert len(hashed) == 3 and second.chunks_embedded == 3
    assert app.status("code")[0].commits == {"upstream": commit} and second.commits == {"upstream": commit}
    hit = app.search("code", SearchRequest(query="restarted by the pager rota", mode="keyword", top_k=3)).hits[0]
    assert hit.commit == commit and hit.citation.endswith(f"(lines 3-3 @ {commit[:12]})")


def test_a_sync_without_a_new_commit_reads_nothing(
    make_app: MakeApp, repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(_kb(repo))
    _sync(app)
    hashed = _count_hashing(monkeypatch)
    again = _sync(app)
    assert again.files_unchanged == 1000 and again.crawl["files read from git"] == 0 and not hashed


def test_a_rename_keeps_the_vectors_and_deletions_leave(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    repo.write("docs/old-name.md", "# Deploys\n\nBlue-green deploys switch the router after health checks pass.\n")
    repo.write("docs/gone.md", "# Gone\n\nThis page will be deleted.\n")
    repo.commit()
    app = make_app(_kb(repo))
    _sync(app)
    git(repo.folder, "mv", "docs/old-name.md", "docs/new-name.md")
    git(repo.folder, "rm", "-q", "docs/gone.md")
    repo.commit("rename and delete")
    report = _sync(app)
    assert (report.files_added, report.files_deleted, report.chunks_embedded) == (1, 2, 0)
    assert report.chunks_reused == 1
    assert app.document_ids("code") == ["docs/new-name.md"]


def test_a_force_push_and_a_lost_local_copy_fall_back_to_comparing_trees(make_app: MakeApp, tmp_path: Path) -> None:
    repo, app = _synced(make_app, tmp_path, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbravo\n"})
    # History rewritten: an orphan branch takes main's name, the old commit is gone from the repository.
    git(repo.folder, "checkout", "-q", "--orphan", "rewritten")
    git(repo.folder, "rm", "-q", "-rf", ".")
    repo.write("b.md", "# B\n\nbravo\n")
    repo.write("c.md", "# C\n\ncharlie after the force-push\n")
    forced = repo.commit("rewritten history")
    git(repo.folder, "branch", "-q", "-f", "main", "rewritten")
    git(repo.folder, "checkout", "-q", "main")
    git(repo.folder, "branch", "-q", "-D", "rewritten")
    git(repo.folder, "reflog", "expire", "--expire=now", "--all")
    git(repo.folder, "gc", "-q", "--prune=now")
    report = _sync(app)  # this machine's copy still has the old commit: the diff spans the two histories
    assert (report.files_added, report.files_deleted, report.files_unchanged) == (1, 1, 1)
    assert app.document_ids("code") == ["b.md", "c.md"]
    repo.write("d.md", "# D\n\ndelta\n")
    newest = repo.commit()
    shutil.rmtree(source_cache_dir(str(tmp_path / "index"), "code"))  # another machine, or a wiped cache
    report = _sync(app)
    assert report.crawl["trees compared"] == 1 and report.crawl["files read from git"] == 1
    assert (report.files_added, report.files_unchanged) == (1, 2)
    assert app.document_ids("code") == ["b.md", "c.md", "d.md"]
    assert app.status("code")[0].commits == {"lib": newest} != {"lib": forced}


def test_a_rebuild_reads_every_file_out_of_git(make_app: MakeApp, repo: Repo) -> None:
    app = make_app(_kb(repo))
    _sync(app)
    repo.write("notes/extra.md", "# Extra\n\none more\n")
    repo.commit()
    report = _sync(app, full=True)
    assert report.rebuilt and report.files_added == 1001 and not report.failures
    assert len(app.document_ids("code")) == 1001


def test_scope_settings_changed_since_the_last_sync_list_the_whole_tree(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    repo.write("docs/a.md", "# A\n\nalpha\n")
    repo.write("notes/b.md", "# B\n\nbravo\n")
    repo.commit()
    _sync(make_app(_kb(repo)))
    narrowed = make_app(_kb(repo, paths=["docs/"]))
    report = _sync(narrowed)
    assert report.crawl["trees compared"] == 1 and narrowed.document_ids("code") == ["docs/a.md"]


def test_skipped_files_say_why(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    repo.write("guide.md", "# Guide\n\nthe real page\n")
    repo.write("vendor/dep/readme.md", "# Vendored\n\nnot ours\n")
    repo.write("big.md", "# Big\n\n" + "word " * 300_000)
    repo.write("model.md", "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 123\n")
    repo.write("blob.md", b"\x00\x01binary\x00" * 100)
    (repo.folder / "link.md").symlink_to("/etc/hostname")
    git(repo.folder, "add", "-A")
    git(repo.folder, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")  # a submodule
    git(repo.folder, "commit", "-q", "-m", "odd entries")
    report = _sync(make_app({**_kb(repo), "max_file_size_mb": 1}))
    reasons = {problem.path: problem.reason for problem in report.skipped}
    assert "Git LFS pointer" in reasons["model.md"]
    assert "too large" in reasons["big.md"]
    assert "binary" in reasons["blob.md"]
    assert "symbolic link" in reasons["link.md"]
    assert "submodule" in reasons["sub"]
    assert "vendor/dep/readme.md" not in reasons  # vendored: left out by the default `exclude`
    assert report.files_added == 1


def _edited_after(tmp_path: Path, path: str, first: str, second: str, *mark: str) -> Repo:
    """A repository whose `path` says `first` at the commit `mark` names (a tag or a branch), then `second` on main."""
    repo = Repo(tmp_path / "lib")
    repo.write(path, first)
    repo.commit()
    git(repo.folder, *mark)
    repo.write(path, second)
    repo.commit()
    return repo


def test_library_versions_name_git_refs(make_app: MakeApp, tmp_path: Path) -> None:
    repo = _edited_after(
        tmp_path,
        "docs/api.md",
        "# API\n\nconnect() takes a timeout.\n",
        "# API\n\nconnect() takes a timeout and a retry policy.\n",
        "tag",
        "v1",
    )
    app = make_app(
        {
            "name": "code",
            "description": "d",
            "versions": [
                {"name": "1.0", "repos": [{"url": str(repo.folder), "ref": "v1"}]},
                {"name": "2.0", "repos": [{"url": str(repo.folder), "ref": "main"}], "current": True},
            ],
        }
    )
    report = _sync(app)
    assert report.files_added == 2 and set(report.commits) == {"1.0/lib", "2.0/lib"}
    old = app.search("code", SearchRequest(query="connect timeout", mode="keyword", version="1.0")).hits[0]
    assert "retry" not in old.text and old.commit == git(repo.folder, "rev-parse", "v1").strip()


def test_beside_folders_a_repositorys_files_lead_with_its_name_and_hits_link_to_their_lines(
    make_app: MakeApp, tmp_path: Path
) -> None:
    repo = Repo(tmp_path / "payments")
    repo.write(
        "src/refunds.md", "# Refunds\n\nIntro.\n\n## Limits\n\nRefunds above 500 euros need a second approver.\n"
    )
    commit = repo.commit()
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "leave.md").write_text("# Leave\n\nAnnual leave is 25 days.\n", encoding="utf-8")
    template = "https://git.example.com/{repo}/blob/{commit}/{path}#L{start}-L{end}"
    app = make_app(
        {
            "name": "code",
            "description": "d",
            "paths": [str(folder)],
            "repos": [{"url": f"file://{repo.folder}", "ref": "main", "url_template": template}],
        }
    )
    app.sync()
    assert app.document_ids("code") == ["leave.md", "payments/src/refunds.md"]
    hit = app.search("code", SearchRequest(query="second approver", mode="keyword")).hits[0]
    assert hit.source == "payments/src/refunds.md" and hit.commit == commit
    path = str(repo.folder).strip("/")
    assert hit.link == f"https://git.example.com/{path}/blob/{commit}/src/refunds.md#L{hit.line_start}-L{hit.line_end}"
    leave = app.search("code", SearchRequest(query="annual leave", mode="keyword")).hits[0]
    assert (leave.source, leave.commit, leave.link) == ("leave.md", "", "")
    assert app.versions("code")[-1].commits == {"payments": commit}


def test_code_in_a_repository_is_cited_by_file_symbol_lines_and_commit(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "service")
    repo.write(
        "pkg/models.py",
        '"""Models."""\n\nimport json\n\n\nclass User:\n    """A user."""\n\n'
        "    def get_by_id(self, user_id):\n"
        '        """Look a user up by id in the accounts table."""\n'
        "        return json.loads(self.table[user_id])\n\n"
        "    def rename(self, name):\n        self.name = name\n",
    )
    repo.write("notes.txt", "Plain notes about the deploy window.\n")
    commit = repo.commit()
    app = make_app(_kb(repo))
    app.sync()
    hit = app.search("code", SearchRequest(query="look a user up by id", mode="keyword")).hits[0]
    chunk = app.search("code", SearchRequest(query="x", mode="filter", filters={"heading": "User › get_by_id"})).hits
    assert [(c.source, c.title, c.line_start, c.line_end) for c in chunk] == [("pkg/models.py", "models.py", 9, 11)]
    assert hit.line_start is not None and hit.line_end is not None
    assert hit.line_start <= 9 and hit.line_end >= 11 and "return json.loads" in hit.text  # maybe with the class's head
    assert hit.citation == f"pkg/models.py › {hit.heading} (lines {hit.line_start}-{hit.line_end} @ {commit[:12]})"
    notes = app.search("code", SearchRequest(query="deploy window", mode="keyword")).hits[0]
    assert notes.title == "notes"  # the file's own name, not the blob id it was read from


def test_after_a_rollback_the_next_sync_compares_trees_and_brings_the_newest_commit_back(
    make_app: MakeApp, tmp_path: Path
) -> None:
    repo, app = _synced(make_app, tmp_path, {"a.md": "# A\n\nfirst words\n"})
    repo.write("a.md", "# A\n\nsecond words\n")
    repo.write("b.md", "# B\n\nanother page\n")
    newest = repo.commit()
    _sync(app)
    app.rollback(RollbackRequest(kb="code", to="1"))
    assert app.status("code")[0].commits == {} and app.document_ids("code") == ["a.md"]
    report = _sync(app)
    assert report.crawl["trees compared"] == 1 and (report.files_added, report.files_changed) == (1, 1)
    assert app.status("code")[0].commits == {"lib": newest}
    assert app.search("code", SearchRequest(query="second words", mode="keyword")).hits[0].source == "a.md"


def test_thousands_of_distinct_files_are_read_out_of_git_without_a_hang(tmp_path: Path) -> None:
    from mcp_kb.ingest.sources import scan_all, sources_of
    from mcp_kb.settings import build_config

    repo = Repo(tmp_path / "many")
    for i in range(3000):
        repo.write(f"d{i % 30}/f{i:04d}.md", f"# File {i}\n\n" + f"distinct text {i} " * 200)
    repo.commit()
    kb = build_config({"kb": [_kb(repo)]}, base_dir=tmp_path, source=None).kb[0]
    scan = scan_all(sources_of(kb, tmp_path / "cache"))  # git's output pipe fills long before its input is read
    assert len(scan.files) == 3000 and all(file.path.stat().st_size > 3000 for file in scan.files[:50])


def test_adding_and_removing_a_source_beside_a_repository_renames_its_files_and_keeps_them(
    make_app: MakeApp, tmp_path: Path
) -> None:
    repo = Repo(tmp_path / "svc")
    repo.write("docs/a.md", "# A\n\nalpha\n")
    repo.write("docs/b.md", "# B\n\nbravo\n")
    repo.commit()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "n.md").write_text("# N\n\nnote\n", encoding="utf-8")
    _sync(make_app(_kb(repo)))
    beside = make_app({**_kb(repo), "paths": [str(folder)]})
    assert _sync(beside).crawl["trees compared"] == 1
    assert beside.document_ids("code") == ["n.md", "svc/docs/a.md", "svc/docs/b.md"]
    alone = make_app(_kb(repo))
    _sync(alone)
    assert alone.document_ids("code") == ["docs/a.md", "docs/b.md"]
    assert not _sync(alone, full=True).failures and alone.document_ids("code") == ["docs/a.md", "docs/b.md"]


def test_one_repository_at_two_refs_in_one_kb(make_app: MakeApp, tmp_path: Path) -> None:
    repo = _edited_after(
        tmp_path, "docs/a.md", "# A\n\nalpha on main\n", "# A\n\nalpha, edited on main\n", "branch", "stable"
    )
    app = make_app(
        {
            "name": "code",
            "description": "d",
            "repos": [
                {"url": str(repo.folder), "ref": "main", "name": "main"},
                {"url": str(repo.folder), "ref": "stable", "name": "stable"},
            ],
        }
    )
    report = _sync(app)
    assert not report.failures and app.document_ids("code") == ["main/docs/a.md", "stable/docs/a.md"]
    repo.write("docs/b.md", "# B\n\nbravo\n")
    repo.commit()
    assert not _sync(app).failures and len(app.document_ids("code")) == 3


def test_one_blob_at_two_paths_is_read_by_each_paths_parser(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    same = "<h1>Same</h1>\n\n<p>bytes in two files</p>\n"
    repo.write("notes.md", same)
    repo.write("page.html", same)
    repo.commit()
    app = make_app(_kb(repo))
    _sync(app)
    kinds = {entry.path: entry.kind for entry in app.browse("code", BrowseRequest(kb="code")).documents}
    assert kinds == {"notes.md": "markdown", "page.html": "html"}
    assert all(entry.changed == "" for entry in app.browse("code", BrowseRequest(kb="code")).documents)


def test_a_file_name_with_terminal_escapes_is_reported_escaped(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    repo.write("ok.md", "# OK\n\nfine\n")
    repo.write("evil\x1b]0;PWNED\x07.md", "# Evil\n\nname\n")
    repo.commit()
    report = _sync(make_app(_kb(repo)))
    assert [problem.path for problem in report.skipped] == ["evil\\x1b]0;PWNED\\x07.md"]


def test_files_that_unpack_past_max_fetch_mb_are_not_read_out(make_app: MakeApp, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "lib")
    for i in range(3):  # a tiny pack: each file is one line repeated
        repo.write(f"big{i}.md", f"# Big {i}\n\n" + f"the same line of file {i}\n" * 30_000)
    repo.commit()
    with pytest.raises(KBError, match="add up to 2 MB, more than its `max_fetch_mb` \\(1 MB\\)"):
        _sync(make_app(_kb(repo, max_fetch_mb=1)))


def test_a_rebuild_after_the_tables_are_lost_brings_every_file_back(make_app: MakeApp, tmp_path: Path) -> None:
    repo, app = _synced(make_app, tmp_path, {f"{name}.md": f"# {name}\n\npage {name}\n" for name in "abc"})
    repo.write("d.md", "# d\n\npage d\n")
    repo.commit()
    store = app.store
    assert isinstance(store, LanceStore)
    for table in store.db.list_tables().tables:
        if table.startswith("code__"):
            store.db.drop_table(table)
    _sync(app, full=True)  # what a sync that cannot read the index says to run
    assert app.document_ids("code") == ["a.md", "b.md", "c.md", "d.md"]


def test_a_failed_sync_that_deleted_files_leaves_no_commit_vouching_for_the_index(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, app = _synced(
        make_app, tmp_path, {"keep.md": "# Keep\n\nkept page\n", "x.md": "# X\n\nthe page that comes back\n"}
    )
    git(repo.folder, "rm", "-q", "x.md")
    repo.commit("delete x")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk gone")

    with monkeypatch.context() as patched:
        patched.setattr(app.store, "refresh_indexes", broken)  # after the deletion, before the final write
        with pytest.raises(OSError):
            _sync(app)
    assert app.status("code")[0].commits == {}
    repo.write("x.md", "# X\n\nthe page that comes back\n")  # upstream back to the first commit's tree
    repo.commit("x again")
    _sync(app)
    assert app.document_ids("code") == ["keep.md", "x.md"]


def test_a_repository_named_like_a_folder_inside_the_kbs_path_is_refused_not_mixed(
    make_app: MakeApp, tmp_path: Path
) -> None:
    repo = Repo(tmp_path / "payments")
    repo.write("intro.md", "# Intro\n\nfrom the repository\n")
    repo.commit()
    folder = tmp_path / "docs"
    (folder / "payments").mkdir(parents=True)
    (folder / "payments" / "intro.md").write_text("# Intro\n\nfrom the folder\n", encoding="utf-8")
    app = make_app(
        {
            "name": "code",
            "description": "d",
            "paths": [str(folder)],
            "repos": [{"url": str(repo.folder), "ref": "main"}],
        }
    )
    with pytest.raises(KBError, match="'payments/intro.md' comes from two .* another `name`"):
        _sync(app)


def test_a_file_of_a_repository_never_leaves_this_process_with_its_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    from mcp_kb.ingest.sources import SourceFile

    monkeypatch.setenv("A_TOKEN", "tok-never-pickled")
    file = SourceFile(tmp_path / "x.md", "x.md", 1, 2, fetch=lambda: None)
    copied = pickle.loads(pickle.dumps(file))
    assert copied == file and copied.fetch is None


def test_a_parser_added_since_the_last_sync_lists_the_whole_tree(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.ingest import parsers

    _, app = _synced(make_app, tmp_path, {"a.md": "# A\n\nalpha\n", "notes.unusual": "notes a plugin reads\n"})
    monkeypatch.setattr(parsers, "_PARSERS", dict(parsers._PARSERS))
    text_parser = parsers._parser_for(".txt")
    assert text_parser is not None
    parsers.register([".unusual"], text_parser)
    report = _sync(app)
    assert report.crawl["trees compared"] == 1 and app.document_ids("code") == ["a.md", "notes.unusual"]


def test_an_unchanged_file_fetched_out_of_git_is_written_in_one_step_and_a_failed_write_leaves_nothing(
    make_config: MakeConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetch wrote a fixed `<name>.part` (two fetches of one file at once shared it) and left it behind when the
    write failed; it writes as every file mcp-kb replaces does (files.write_atomically)."""
    import os

    from mcp_kb.ingest.git.source import GitSource

    repo = Repo(tmp_path / "lib")
    repo.write("guide.md", "# Guide\n\nthe page\n")
    repo.commit()
    kb = make_config(_kb(repo)).kb[0]
    source = GitSource(kb, kb.repos[0], tmp_path / "cache", "")
    first = source.scan({})
    unchanged = source.scan({file.doc_id: (file.size, file.mtime_ns) for file in first.files}).files[0]
    assert unchanged.fetch is not None and not unchanged.path.exists()
    monkeypatch.setattr(os, "replace", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        unchanged.fetch()
    assert list(source.files_folder.iterdir()) == []
    monkeypatch.undo()
    unchanged.fetch()
    assert unchanged.path.read_text() == "# Guide\n\nthe page\n"
