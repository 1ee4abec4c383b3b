"""The one atomic write (files.py): writers racing on one file, and a write that fails."""

import json
from pathlib import Path

import pytest
from helpers import in_threads

from mcp_kb.files import write_atomically


def test_writers_racing_on_one_file_leave_one_whole_version_and_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "state" / "progress.json"
    readings: list[str] = []

    def write_and_read(number: int) -> None:
        for round_ in range(30):
            write_atomically(target, json.dumps({"writer": number, "round": round_, "pad": "x" * 5000}).encode())
            readings.append(target.read_text())  # a reader never sees half of one

    assert in_threads(write_and_read, 8) == []
    assert all(json.loads(text)["pad"] == "x" * 5000 for text in readings)
    assert [path.name for path in target.parent.iterdir()] == ["progress.json"]


def test_a_write_that_fails_keeps_the_old_file_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "pages.json"
    write_atomically(target, b"old")

    def full_disk(self: Path, data: bytes) -> None:
        self.open("wb").write(data[:1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(target), "write_bytes", full_disk)
    with pytest.raises(OSError):
        write_atomically(target, b"new contents")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and [path.name for path in tmp_path.iterdir()] == ["pages.json"]
