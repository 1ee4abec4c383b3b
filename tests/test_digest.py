"""Model-file hashes are computed once per process, and never outlive a change to the file."""

import os
from pathlib import Path

from mcp_kb import digest
import pytest


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    reads: list[Path] = []
    real = digest.file_sha256

    def counted(path: Path) -> str:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(digest, "file_sha256", counted)
    return reads


def test_a_model_file_is_hashed_once_while_it_stays_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights" * 1000)
    reads = _counting(monkeypatch)
    assert digest.model_file_sha256(model) == digest.model_file_sha256(model) == digest.file_sha256(model)
    assert len(reads) == 2  # the first call, and the direct one above


def test_a_rewrite_in_place_or_a_swapped_file_is_hashed_again_even_with_size_and_mtime_kept(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"a" * 4096)
    before = digest.model_file_sha256(model)
    times = (model.stat().st_atime_ns, model.stat().st_mtime_ns)
    with open(model, "r+b") as handle:  # bit rot: same size, and the modification time put back
        handle.write(b"b")
    os.utime(model, ns=times)
    damaged = digest.model_file_sha256(model)
    assert damaged != before
    other = tmp_path / "other.onnx"
    other.write_bytes(b"c" * 4096)
    os.utime(other, ns=times)
    other.replace(model)  # another file moved into place
    assert digest.model_file_sha256(model) not in (before, damaged)


def test_a_short_key_is_the_leading_hex_digits_of_the_sha256_of_text_or_bytes() -> None:
    assert digest.short_key("abc") == "ba7816bf8f01cfea"  # SHA-256("abc") = ba7816bf8f01cfea4141...
    assert digest.short_key(b"abc", 4) == "ba78"
    assert digest.short_key("caf\xe9", 40) == digest.short_key("caf\xe9".encode(), 40)
