"""One set of admission rules for every source (ingest/admission.py): a folder and a repository holding the same
files admit them alike, but for hidden files, which only a commit vouches for."""

from __future__ import annotations
from helpers import MakeConfig
from helpers import MakeApp
from pathlib import Path
from collections.abc import Iterable

import pytest
from git_server import Repo
from helpers import write

from mcp_kb.api import SyncRequest
from mcp_kb.errors import ParseError
from mcp_kb.ingest.admission import left_out_as_hidden, name_reason, shown_name
from mcp_kb.ingest.folders import scan_folders
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.ingest.sources import SkippedFile
from mcp_kb.records import Problem

FILES = {
    "guide.md": "# Guide\n\nthe page\n",
    ".github/CONTRIBUTING.md": "# Contributing\n\nopen a pull request\n",
    "notes/.draft.md": "# Draft\n\nnot yet\n",
    "big.md": "# Big\n\n" + "word " * 300_000,
    "data.xyz": "an unread type",
}


def _reasons(skipped: Iterable[SkippedFile | Problem]) -> dict[str, str]:
    return {(entry.doc_id if isinstance(entry, SkippedFile) else entry.path): entry.reason for entry in skipped}


def test_hidden_entries_are_left_out_on_disk_and_kept_when_committed() -> None:
    for hidden in (".github/CONTRIBUTING.md", "notes/.draft.md", ".venv/lib/x.py"):
        assert left_out_as_hidden(hidden, committed=False)
        assert not left_out_as_hidden(hidden, committed=True)
    assert not left_out_as_hidden("notes/v1.2/guide.md", committed=False)


def test_a_folder_and_a_repository_of_the_same_files_admit_them_by_the_same_rules(
    make_config: MakeConfig, make_app: MakeApp, tmp_path: Path
) -> None:
    settings = {"description": "d", "max_file_size_mb": 1, "include": ["**/*.md", "**/*.xyz"]}
    for path, text in FILES.items():
        write(tmp_path / "docs" / path, text)
    folder = scan_folders(make_config({"name": "docs", "paths": [str(tmp_path / "docs")], **settings}).kb[0])
    repo = Repo(tmp_path / "lib")
    for path, text in FILES.items():
        repo.write(path, text)
    repo.commit()
    report = make_app({"name": "code", "repos": [{"url": str(repo.folder), "ref": "main"}], **settings}).sync(
        request=SyncRequest()
    )[0]
    assert [file.doc_id for file in folder.files] == ["guide.md"]
    assert report.files_added == 3  # guide.md and the two committed hidden files
    too_large = "too large: 1.4 MB > max_file_size_mb = 1"
    assert _reasons(folder.skipped) == {"big.md": too_large, "data.xyz": "unsupported file type .xyz"}
    assert _reasons(report.skipped) == _reasons(folder.skipped)  # a repository left an unread type out in silence


def test_a_name_that_does_not_print_is_a_folders_document_but_not_a_commits() -> None:
    """A folder's id holds any name as text and leads back to the file; a commit's must name its path in git."""
    for name in ("caf\udce9.md", "evil\x1b]0;PWNED\x07.md"):
        assert name_reason(name, committed=False) == ""
        assert name_reason(name, committed=True) == "file name is not printable UTF-8: left out"
    assert shown_name("caf\udce9.md") == "caf\\xe9.md"
    assert shown_name("evil\x1b]0;PWNED\x07.md") == "evil\\x1b]0;PWNED\\x07.md"


def test_a_parse_of_an_unread_type_says_so_as_a_scan_does(tmp_path: Path) -> None:
    """parse_file named the suffix as written (".XYZ") and a scan in lower case, as shown text (".xyz")."""
    write(tmp_path / "data.XYZ", "x")
    with pytest.raises(ParseError, match=r"^unsupported file type \.xyz$"):
        parse_file(tmp_path / "data.XYZ", "data.XYZ")
