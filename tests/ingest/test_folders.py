import os
from pathlib import Path

from helpers import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_kb.ingest.folders import scan_folders
from mcp_kb.api import SearchRequest, SyncRequest
from mcp_kb.settings import KBConfig
from helpers import MakeConfig
import pytest
from helpers import MakeApp


def _kb(make_config: MakeConfig, tmp_path: Path, **options: object) -> KBConfig:
    return make_config({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")], **options}).kb[0]


def test_walk_lists_supported_files_with_posix_ids(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "docs/sub/b.txt", "b")
    write(tmp_path / "docs/program.exe", "not indexed")
    scan = scan_folders(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md", "sub/b.txt"]


def test_include_and_exclude_globs(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "docs/drafts/b.md", "# B")
    write(tmp_path / "docs/c.txt", "c")
    scan = scan_folders(_kb(make_config, tmp_path, include=["**/*.md"], exclude=["drafts/"]))
    assert [f.doc_id for f in scan.files] == ["a.md"]


def test_nested_gitignore_is_respected(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/.gitignore", "*.log\n")
    write(tmp_path / "docs/sub/.gitignore", "secret.md\n")
    write(tmp_path / "docs/sub/secret.md", "x")
    write(tmp_path / "docs/sub/public.md", "x")
    write(tmp_path / "docs/run.log", "x")
    ids = [f.doc_id for f in scan_folders(_kb(make_config, tmp_path)).files]
    assert ids == ["sub/public.md"]
    ids = [f.doc_id for f in scan_folders(_kb(make_config, tmp_path, respect_gitignore=False)).files]
    assert ids == ["run.log", "sub/public.md", "sub/secret.md"]


def test_hidden_folders_are_skipped(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/.git/notes.md", "x")
    write(tmp_path / "docs/visible.md", "x")
    assert [f.doc_id for f in scan_folders(_kb(make_config, tmp_path)).files] == ["visible.md"]


def test_binary_file_with_text_extension_is_skipped_with_reason(make_config: MakeConfig, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/fake.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    scan = scan_folders(_kb(make_config, tmp_path))
    assert scan.files == []
    assert scan.skipped[0].doc_id == "fake.md" and "binary" in scan.skipped[0].reason


def test_utf16_file_is_not_mistaken_for_binary(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/u16.txt", "\ufeffhello world", encoding="utf-16-le")
    assert [f.doc_id for f in scan_folders(_kb(make_config, tmp_path)).files] == ["u16.txt"]


def test_files_over_the_size_limit_are_skipped_with_reason(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/big.txt", "x" * 3_000_000)
    scan = scan_folders(_kb(make_config, tmp_path, max_file_size_mb=1))
    assert scan.files == [] and scan.skipped[0].reason == "too large: 2.9 MB > max_file_size_mb = 1"  # MB of 2**20


def test_symlink_loop_terminates(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    os.symlink(tmp_path / "docs", tmp_path / "docs/loop")
    scan = scan_folders(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md"]


def test_several_paths_prefix_ids_with_their_folder(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "more/a.md", "# A")
    kb = make_config(
        {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs"), str(tmp_path / "more")]}
    ).kb[0]
    assert [f.doc_id for f in scan_folders(kb).files] == ["docs/a.md", "more/a.md"]


# ---- links, odd names and membership (one set of rules for the scan and the document resource) ----


def test_symlink_to_itself_is_reported_and_the_walk_goes_on(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    os.symlink("self.md", tmp_path / "docs/self.md")
    scan = scan_folders(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md"]
    assert [(s.doc_id, "broken symbolic link" in s.reason) for s in scan.skipped] == [("self.md", True)]


def test_symlinks_leading_outside_the_kb_are_not_followed(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "secret/passwords.txt", "root:hunter2")
    write(tmp_path / "docs/inside.md", "# Inside")
    os.symlink(tmp_path / "secret/passwords.txt", tmp_path / "docs/passwd.txt")
    os.symlink(tmp_path / "secret", tmp_path / "docs/secret-folder")
    os.symlink("inside.md", tmp_path / "docs/alias.md")  # inside the root: followed
    scan = scan_folders(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["alias.md", "inside.md"]
    reasons = {s.doc_id: s.reason for s in scan.skipped}
    assert set(reasons) == {"passwd.txt", "secret-folder"}
    assert all("outside the knowledge base" in reason for reason in reasons.values())


def test_file_names_that_are_not_utf8_get_escaped_ids(make_config: MakeConfig, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/caf\xe9.md", "wb") as handle:
        handle.write(b"# Cafe\n\nA Latin-1 file name.")
    kb = _kb(make_config, tmp_path)
    [source] = scan_folders(kb).files
    assert source.doc_id == "caf\\xe9.md"
    source.doc_id.encode("utf-8")  # valid text everywhere an id is written


def test_fifo_is_never_opened(make_config: MakeConfig, tmp_path: Path) -> None:
    write(tmp_path / "docs/a.md", "# A")
    os.mkfifo(tmp_path / "docs/pipe.md")  # reading it would block the sync for ever
    assert [f.doc_id for f in scan_folders(_kb(make_config, tmp_path)).files] == ["a.md"]


def test_a_gitignore_that_cannot_be_read_skips_its_folder_instead_of_indexing_what_it_hides(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "docs/sub/secret.md", "# secret")
    write(tmp_path / "docs/sub/.gitignore", "secret.md\n!\n")  # "!" alone is not a valid pattern
    scan = scan_folders(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md"]
    [skipped] = scan.skipped
    assert skipped.doc_id == "sub/" and skipped.unreadable and ".gitignore" in skipped.reason


def test_a_scan_leaves_out_excluded_hidden_ignored_large_and_outside_files(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    write(tmp_path / "docs/ok.md", "# OK")
    write(tmp_path / "docs/drafts/plan.md", "# Plan")
    write(tmp_path / "docs/.private/notes.md", "# Notes")
    write(tmp_path / "docs/.env.md", "TOKEN=1")
    write(tmp_path / "docs/.gitignore", "build/\n")
    write(tmp_path / "docs/build/out.md", "# Out")
    write(tmp_path / "docs/big.txt", "x" * 2_000_000)
    os.symlink("/etc/passwd", tmp_path / "docs/passwd.txt")
    kb = _kb(make_config, tmp_path, exclude=["drafts/"], max_file_size_mb=1)
    assert [f.doc_id for f in scan_folders(kb).files] == ["ok.md"]


name_bytes = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(name_bytes, min_size=1, max_size=6, unique=True))
def test_any_file_name_is_scanned_with_an_id_that_is_valid_text(
    make_config: MakeConfig, tmp_path_factory: pytest.TempPathFactory, names: list[bytes]
) -> None:
    root = tmp_path_factory.mktemp("names")
    folder = root / "docs"
    folder.mkdir()
    for name in names:
        with open(os.fsencode(folder) + b"/" + name + b".md", "wb") as handle:
            handle.write(b"# Title\n\nSome text.")
    kb = make_config({"name": "docs", "description": "d", "paths": [str(folder)]}).kb[0]
    scan = scan_folders(kb)
    visible = [n for n in names if not n.startswith(b".")]
    assert len(scan.files) == len(visible)
    for source in scan.files:
        source.doc_id.encode("utf-8")


def test_an_index_kept_inside_a_kb_folder_is_never_indexed_nor_watched(
    make_app: MakeApp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its query log holds what users asked: it must never come back as a search hit."""
    from mcp_kb.ingest.folders import change_concerns

    write(tmp_path / "docs/guide.md", "# Guide\n\nInstall the package with pip inside a virtual environment.\n")
    kb = {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")], "search": {"query_log": True}}
    app = make_app(kb, storage=str(tmp_path / "docs" / "kb-index"))
    assert "inside knowledge base 'docs'" in caplog.text
    app.sync(SyncRequest(kb="docs"))
    app.search(
        "docs", SearchRequest(query="what is the salary of the chief executive")
    )  # goes to the query log, in the index folder
    report = app.sync(SyncRequest(kb="docs"))[0]
    assert app.document_ids("docs") == ["guide.md"] and report.files_added == 0
    assert any(s.path == "kb-index/" and "never indexed" in s.reason for s in report.skipped)
    assert not app.search("docs", SearchRequest(query="salary chief executive", mode="keyword")).hits
    written = list((tmp_path / "docs" / "kb-index").rglob("*.json*"))
    assert written and not any(change_concerns(app.config.kb[0], path) for path in written)
    assert change_concerns(app.config.kb[0], tmp_path / "docs" / "new.md")


# Trees of two KB roots with nested, hidden and ignored folders; globs naming a root, a folder, a type.
_TREE_FILES = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from(["", "sub/", "sub/deep/", ".hidden/", "drafts/", "sub/drafts/"]),
        st.sampled_from(["x.md", "y.txt", "z.md", "tool.exe", "notes.TXT"]),
    ),
    min_size=1,
    max_size=12,
    unique=True,
)
_GLOBS = st.lists(
    st.sampled_from(["a/**/*.md", "**/*.txt", "b/*", "sub/", "*.md", "drafts/", "a/sub/**", "**/deep/*.md"]),
    max_size=2,
    unique=True,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=_TREE_FILES, include=_GLOBS, exclude=_GLOBS, gitignore=st.booleans())
def test_the_watcher_follows_exactly_the_files_the_scan_lists(
    make_config: MakeConfig,
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[str, str, str]],
    include: list[str],
    exclude: list[str],
    gitignore: bool,
) -> None:
    """With several paths the ids carry the root's name ("a/sub/x.md"), and globs match ids: the watcher
    once matched paths relative to their root, and stopped following files the scan indexed."""
    from mcp_kb.ingest.folders import change_concerns

    base = tmp_path_factory.mktemp("tree")
    for root, folder, name in files:
        write(base / root / folder / name, "# Note\n\nSome text.\n")
    for root in ("a", "b"):
        (base / root).mkdir(exist_ok=True)
    if gitignore:
        write(base / "a" / ".gitignore", "deep/\n")
    kb = make_config(
        {
            "name": "docs",
            "description": "d",
            "paths": [str(base / "a"), str(base / "b")],
            "include": include,
            "exclude": exclude,
        }
    ).kb[0]
    scan = scan_folders(kb)
    listed = {source.path for source in scan.files} | {base / s.doc_id for s in scan.skipped}
    for root, folder, name in files:
        path = base / root / folder / name
        assert change_concerns(kb, path) == (path in listed), (path, sorted(map(str, listed)))
    for source in scan.files:  # and once a listed file is deleted, its deletion is still followed
        source.path.unlink()
        assert change_concerns(kb, source.path), source.doc_id
    moved = base / "a" / "v1.2"  # a folder with a dot, moved away whole: its documents went with it
    write(moved / "x.md", "# Note\n\nSome text.\n")
    moved.rename(base / "elsewhere")
    assert change_concerns(kb, moved)
