import os

from conftest import write

from mcp_kb.sources import scan_sources


def _kb(make_config, tmp_path, **options):
    return make_config({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")], **options}).kb[0]


def test_walk_lists_supported_files_with_posix_ids(make_config, tmp_path):
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "docs/sub/b.txt", "b")
    write(tmp_path / "docs/image.png", "not indexed")
    scan = scan_sources(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md", "sub/b.txt"]


def test_include_and_exclude_globs(make_config, tmp_path):
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "docs/drafts/b.md", "# B")
    write(tmp_path / "docs/c.txt", "c")
    scan = scan_sources(_kb(make_config, tmp_path, include=["**/*.md"], exclude=["drafts/"]))
    assert [f.doc_id for f in scan.files] == ["a.md"]


def test_nested_gitignore_is_respected(make_config, tmp_path):
    write(tmp_path / "docs/.gitignore", "*.log\n")
    write(tmp_path / "docs/sub/.gitignore", "secret.md\n")
    write(tmp_path / "docs/sub/secret.md", "x")
    write(tmp_path / "docs/sub/public.md", "x")
    write(tmp_path / "docs/run.log", "x")
    ids = [f.doc_id for f in scan_sources(_kb(make_config, tmp_path)).files]
    assert ids == ["sub/public.md"]
    ids = [f.doc_id for f in scan_sources(_kb(make_config, tmp_path, respect_gitignore=False)).files]
    assert ids == ["run.log", "sub/public.md", "sub/secret.md"]


def test_hidden_folders_are_skipped(make_config, tmp_path):
    write(tmp_path / "docs/.git/notes.md", "x")
    write(tmp_path / "docs/visible.md", "x")
    assert [f.doc_id for f in scan_sources(_kb(make_config, tmp_path)).files] == ["visible.md"]


def test_binary_file_with_text_extension_is_skipped_with_reason(make_config, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/fake.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    scan = scan_sources(_kb(make_config, tmp_path))
    assert scan.files == []
    assert scan.skipped[0].doc_id == "fake.md" and "binary" in scan.skipped[0].reason


def test_utf16_file_is_not_mistaken_for_binary(make_config, tmp_path):
    write(tmp_path / "docs/u16.txt", "\ufeffhello world", encoding="utf-16-le")
    assert [f.doc_id for f in scan_sources(_kb(make_config, tmp_path)).files] == ["u16.txt"]


def test_files_over_the_size_limit_are_skipped_with_reason(make_config, tmp_path):
    write(tmp_path / "docs/big.txt", "x" * 3_000_000)
    scan = scan_sources(_kb(make_config, tmp_path, max_file_size_mb=1))
    assert scan.files == [] and "too large" in scan.skipped[0].reason


def test_symlink_loop_terminates(make_config, tmp_path):
    write(tmp_path / "docs/a.md", "# A")
    os.symlink(tmp_path / "docs", tmp_path / "docs/loop")
    scan = scan_sources(_kb(make_config, tmp_path))
    assert [f.doc_id for f in scan.files] == ["a.md"]


def test_several_paths_prefix_ids_with_their_folder(make_config, tmp_path):
    write(tmp_path / "docs/a.md", "# A")
    write(tmp_path / "more/a.md", "# A")
    kb = make_config({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs"), str(tmp_path / "more")]}).kb[0]
    assert [f.doc_id for f in scan_sources(kb).files] == ["docs/a.md", "more/a.md"]
