"""Find the files of a knowledge base: globs, .gitignore, hidden folders, binaries, size limits."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

from .config import KBConfig
from .document import Document
from .errors import KBError
from .parsers import is_supported, parse_file

# Bytes that occur in text encodings only as NUL-free sequences; a NUL or a high share of
# control characters in the first block means binary, whatever the extension says.
_SNIFF_BYTES = 8192
_TEXT_CONTROL = {7, 8, 9, 10, 12, 13, 27}


@dataclass(frozen=True)
class SourceFile:
    """A file to index: `doc_id` is its POSIX path relative to its KB root."""

    path: Path
    doc_id: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SkippedFile:
    """A file left out, with the reason shown to the user."""

    doc_id: str
    reason: str


@dataclass(frozen=True)
class SourceScan:
    files: list[SourceFile]
    skipped: list[SkippedFile]


def scan_sources(kb: KBConfig, known: dict[str, tuple[int, int]] | None = None) -> SourceScan:
    """Walk every path of the KB; each file is either listed or skipped with a reason.

    `known` maps document ids to the (size, mtime_ns) the index saw: those files were judged
    text then and are not sniffed again, so a no-op scan opens no file.
    """
    files: dict[str, SourceFile] = {}
    skipped: list[SkippedFile] = []
    known = known or {}
    for root in kb.paths:
        _check_readable(root, kb)
        if root.is_file():
            _consider(root, root.name, kb, files, skipped, known)
            continue
        prefix = f"{root.name}/" if len(kb.paths) > 1 else ""
        for path, rel in _walk(root, kb.respect_gitignore, skipped):
            _consider(path, prefix + rel, kb, files, skipped, known)
    return SourceScan(sorted(files.values(), key=lambda f: f.doc_id), skipped)


def _check_readable(root: Path, kb: KBConfig) -> None:
    """A missing or unreadable root is an error, never an empty KB: that would delete its index."""
    try:
        if root.is_dir():
            with os.scandir(root):
                pass
        elif root.is_file():
            root.open("rb").close()
        else:
            raise FileNotFoundError(2, "not found")
    except OSError as exc:
        raise KBError(f"knowledge base {kb.name!r}: cannot read {root} ({exc.strerror}); "
                      f"the index keeps its last good version until the path is back") from exc


def _consider(path: Path, doc_id: str, kb: KBConfig, files: dict[str, SourceFile],
              skipped: list[SkippedFile], known: dict[str, tuple[int, int]]) -> None:
    if not _matches_globs(doc_id, kb.include, kb.exclude):
        return
    if not is_supported(path.suffix.lower()):
        if kb.include:  # the user asked for it explicitly, so say why it is left out
            skipped.append(SkippedFile(doc_id, f"unsupported file type {path.suffix or '(none)'}"))
        return
    try:
        stat = path.stat()
    except OSError as exc:
        skipped.append(SkippedFile(doc_id, f"unreadable: {exc.strerror}"))
        return
    if stat.st_size > kb.max_file_bytes:
        skipped.append(SkippedFile(doc_id, f"too large: {stat.st_size / 1e6:.1f} MB > max_file_size_mb"))
        return
    reason = None if known.get(doc_id) == (stat.st_size, stat.st_mtime_ns) else _binary_reason(path)
    if reason:
        skipped.append(SkippedFile(doc_id, reason))
        return
    files[doc_id] = SourceFile(path, doc_id, stat.st_size, stat.st_mtime_ns)


def _matches_globs(doc_id: str, include: list[str], exclude: list[str]) -> bool:
    if include and not _glob_spec(tuple(include)).match_file(doc_id):
        return False
    return not (exclude and _glob_spec(tuple(exclude)).match_file(doc_id))


_SPEC_CACHE: dict[tuple[str, ...], pathspec.PathSpec] = {}


def _glob_spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    if patterns not in _SPEC_CACHE:
        _SPEC_CACHE[patterns] = pathspec.PathSpec.from_lines("gitignore", patterns)
    return _SPEC_CACHE[patterns]


def _walk(root: Path, respect_gitignore: bool, skipped: list[SkippedFile]):
    """Yield (path, relative posix path); hidden entries skipped, each real folder visited once."""
    seen_dirs: set[tuple[int, int]] = set()
    # Each level carries the .gitignore specs that apply to it, with the folder they came from.
    stack: list[tuple[Path, list[tuple[str, pathspec.PathSpec]]]] = [(root, [])]
    while stack:
        folder, ignores = stack.pop()
        try:
            stat = folder.stat()
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in seen_dirs:  # symlink loop or a folder linked twice
            continue
        seen_dirs.add((stat.st_dev, stat.st_ino))
        rel_folder = folder.relative_to(root).as_posix() if folder != root else ""
        if respect_gitignore and (folder / ".gitignore").is_file():
            spec = pathspec.PathSpec.from_lines("gitignore", (folder / ".gitignore").read_text(errors="replace").splitlines())
            ignores = [*ignores, (rel_folder, spec)]
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedFile(rel_folder + "/", f"unreadable folder: {exc.strerror}"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
            is_dir = entry.is_dir()  # follows symlinks; loops are cut by seen_dirs
            if _ignored(rel, is_dir, ignores):
                continue
            if is_dir:
                stack.append((Path(entry.path), ignores))
            elif entry.is_file():
                yield Path(entry.path), rel


def _ignored(rel: str, is_dir: bool, ignores: list[tuple[str, pathspec.PathSpec]]) -> bool:
    for base, spec in ignores:
        local = rel[len(base) + 1:] if base else rel
        if spec.match_file(local + ("/" if is_dir else "")):
            return True
    return False


def _binary_reason(path: Path) -> str | None:
    """A reason to skip the file as binary, judged by its first bytes, or None."""
    if path.suffix.lower() == ".pdf":
        return None  # PDFs are binary by nature; the PDF parser judges them
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with BOM has NULs by design
    if b"\x00" in head:
        return "binary content (NUL bytes) despite a text extension"
    controls = sum(1 for byte in head if byte < 32 and byte not in _TEXT_CONTROL)
    if head and controls / len(head) > 0.05:
        return "binary content (control characters) despite a text extension"
    return None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_candidate_path(kb: KBConfig, path: Path) -> bool:
    """Whether a change at `path` (which may no longer exist) can matter to the KB's index."""
    for root in kb.paths:
        if path == root:
            return True
        if root.is_dir() and path.is_relative_to(root):
            rel = path.relative_to(root).as_posix()
            if any(part.startswith(".") for part in rel.split("/")):
                return False
            if not path.suffix:  # a folder (renamed or deleted ones included) may hold documents
                return True
            return is_supported(path.suffix.lower()) and _matches_globs(rel, kb.include, kb.exclude)
    return False


def document_path(kb: KBConfig, doc_id: str) -> Path:
    """The file behind a document id; ids that point outside the KB's paths are refused."""
    for root in kb.paths:
        if root.is_file():
            if doc_id == root.name:
                return root
            continue
        prefix = f"{root.name}/" if len(kb.paths) > 1 else ""
        if not doc_id.startswith(prefix):
            continue
        candidate = (root / doc_id[len(prefix):]).resolve()
        if candidate.is_relative_to(root.resolve()) and candidate.is_file():
            return candidate
    raise KBError(f"{doc_id!r} is not a document of knowledge base {kb.name!r}; "
                  f"read kb://{kb.name}/status or search it to find document paths")


def resolve_document(kb: KBConfig, doc_id: str) -> Document:
    """Parse one document of the KB by its id."""
    return parse_file(document_path(kb, doc_id), doc_id)
