"""Folder sources: the files below a KB's paths, by globs, .gitignore, hidden entries, links, binaries, size limits.

One set of rules decides what belongs to a KB: `scan_folders` applies it while walking and
`change_concerns` to one changed path (the watcher), so the watcher follows exactly the files
a scan would list.
Symbolic links are followed only when they point inside the KB's root. A problem with one entry
(a link loop, a name that is not UTF-8, an unreadable file) is reported for that entry and never
stops the walk.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

import pathspec

from ..settings import KBConfig
from ..errors import KBError
from .admission import (
    binary_reason,
    left_out_as_hidden,
    matches_globs,
    size_reason,
    unsupported_reason,
)
from .parsers import is_supported
from ..records import Progress, recorded_at
from ..text import name_text
from .sources import (
    LEFT_OUT_GITIGNORE,
    LEFT_OUT_GLOBS,
    LEFT_OUT_HIDDEN,
    Indexed,
    Recorded,
    Revisions,
    SkippedFile,
    SourceFile,
    SourceScan,
)

log = logging.getLogger(__name__)

# .gitignore specs in force, with the folder they came from (quoted: PathSpec is generic from pathspec 1.1 on)
Ignores = list[tuple[str, "pathspec.PathSpec[pathspec.Pattern]"]]


def scan_folders(kb: KBConfig, known: dict[str, tuple[int, int]] | None = None) -> SourceScan:
    """Walk every path of the KB; each file is either listed or skipped with a reason.

    `known` maps document ids to the (size, mtime_ns) the index saw: those files were judged
    text then and are not sniffed again, so a no-op scan opens no file.
    """
    files: dict[str, SourceFile] = {}
    skipped: list[SkippedFile] = []
    left_out: Counter[str] = Counter()
    for root, prefix in _roots(kb):
        _check_readable(root, kb)
        rules = _Rules(kb, root, prefix, known or {})
        outcomes = [rules.root_file()] if root.is_file() else rules.walk()
        for outcome in outcomes:
            if isinstance(outcome, SourceFile):
                files[outcome.doc_id] = outcome
            elif isinstance(outcome, SkippedFile):
                skipped.append(outcome)
        left_out.update(rules.left_out)
    return SourceScan(sorted(files.values(), key=lambda f: f.doc_id), skipped, left_out=dict(left_out))


def _roots(kb: KBConfig) -> list[tuple[Path, str]]:
    """Each KB path with the prefix its document ids get (its name, when a KB has several paths)."""
    several = len(kb.paths) > 1
    return [(root, f"{root.name}/" if several and not root.is_file() else "") for root in kb.paths]


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
        raise KBError(
            f"knowledge base {kb.name!r}: cannot read {root} ({exc.strerror}); "
            f"the index keeps its last good version until the path is back"
        ) from exc


class _Rules:
    """Membership rules for the entries below one KB root."""

    def __init__(self, kb: KBConfig, root: Path, prefix: str, known: dict[str, tuple[int, int]]):
        self.kb = kb
        self.root = root
        self.prefix = prefix
        self.known = known
        self.real_root = os.path.realpath(root)
        self.written = {(info.st_dev, info.st_ino) for info in map(_stat_or_none, kb.written_folders) if info}
        self.left_out: Counter[str] = Counter()  # entries left out silently, by why (a KB of none says so)

    def root_file(self) -> SourceFile | SkippedFile | None:
        """A KB path that is a single file."""
        try:
            info = os.stat(self.root)
        except OSError as exc:
            return SkippedFile(self.root.name, f"unreadable: {exc.strerror}", unreadable=True)
        return self._file(str(self.root), self.root.name, info)

    def walk(self) -> Iterator[SourceFile | SkippedFile]:
        """Yield a SourceFile or SkippedFile per entry that is not silently left out."""
        seen_dirs: set[tuple[int, int]] = set()
        stack: list[tuple[str, str, Ignores]] = [(str(self.root), "", [])]
        while stack:
            folder, rel_folder, ignores = stack.pop()
            try:
                info = os.stat(folder)
                if (info.st_dev, info.st_ino) in seen_dirs:  # a folder linked twice, or a loop
                    continue
                seen_dirs.add((info.st_dev, info.st_ino))
                ignores = self._with_gitignore(folder, rel_folder, ignores)
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except (OSError, ValueError) as exc:
                yield SkippedFile(self._folder_id(rel_folder), f"unreadable folder: {_why(exc)}", unreadable=True)
                continue
            subfolders = []
            for entry in entries:
                rel = f"{rel_folder}/{entry.name}" if rel_folder else entry.name
                outcome = self._entry(entry.path, rel, _is_link(entry), ignores)
                if outcome == "dir":
                    subfolders.append((entry.path, rel, ignores))
                elif outcome is not None:
                    yield outcome
            stack.extend(reversed(subfolders))

    def judge(self, rel_path: str) -> SourceFile | SkippedFile | Literal["dir"] | None:
        """One entry below the root (its path relative to it), judged folder by folder as the walk would:
        what the walk would yield for it ("dir" for a folder it descends into), or None when the walk
        leaves it out."""
        parts = rel_path.split("/")
        if any(part in ("", ".", "..") for part in parts):
            return None
        folder, rel_folder = str(self.root), ""
        ignores: Ignores = []
        for index, part in enumerate(parts):
            try:
                ignores = self._with_gitignore(folder, rel_folder, ignores)
            except (OSError, ValueError):
                return None
            path = os.path.join(folder, part)
            rel = f"{rel_folder}/{part}" if rel_folder else part
            outcome = self._entry(path, rel, os.path.islink(path), ignores)
            if index == len(parts) - 1:
                return outcome
            if outcome != "dir":
                return None
            folder, rel_folder = path, rel
        return None

    def may_have_held(self, rel_id: str) -> bool:
        """Whether an entry that is gone could have been a document, or a folder holding some, judged by
        its name: not hidden, and not a document file the KB's globs leave out. Any other name may have
        been a folder ("v1.2" included), so its removal is followed."""
        if left_out_as_hidden(rel_id, committed=False):
            return False
        suffix = os.path.splitext(rel_id)[1].lower()
        return not is_supported(suffix) or matches_globs(self._doc_id(rel_id), self.kb.include, self.kb.exclude)

    def _entry(
        self, path: str, rel: str, is_link: bool, ignores: Ignores
    ) -> SourceFile | SkippedFile | Literal["dir"] | None:
        """ "dir" to descend into, a file, a reported skip, or None for entries left out silently."""
        if left_out_as_hidden(rel, committed=False):
            self.left_out[LEFT_OUT_HIDDEN] += 1
            return None
        doc_id = self._doc_id(rel)
        if is_link:
            reason = self._link_reason(path)
            if reason:
                return SkippedFile(doc_id, reason)
        try:
            info = os.stat(path)
        except OSError as exc:
            return SkippedFile(doc_id, f"unreadable: {exc.strerror}", unreadable=True)
        is_dir = stat.S_ISDIR(info.st_mode)
        if _ignored(rel, is_dir, ignores):
            self.left_out[LEFT_OUT_GITIGNORE] += 1
            return None
        if is_dir and (info.st_dev, info.st_ino) in self.written:
            return SkippedFile(doc_id + "/", "mcp-kb's own index or cache folder: never indexed")
        if is_dir:
            return "dir"
        if not stat.S_ISREG(info.st_mode):
            return None  # pipes, sockets, devices: opening one could block or never end
        return self._file(path, doc_id, info)

    def _file(self, path: str, doc_id: str, info: os.stat_result) -> SourceFile | SkippedFile | None:
        if not matches_globs(doc_id, self.kb.include, self.kb.exclude):
            self.left_out[LEFT_OUT_GLOBS] += 1
            return None
        suffix = os.path.splitext(path)[1].lower()
        if not is_supported(suffix):
            reason = unsupported_reason(suffix, self.kb)
            if reason:
                return SkippedFile(doc_id, reason)
            self.left_out[name_text(suffix) or "no suffix"] += 1
            return None
        reason = size_reason(info.st_size, self.kb)
        if reason:
            return SkippedFile(doc_id, reason)
        if self.known.get(doc_id) != (info.st_size, info.st_mtime_ns):
            reason = binary_reason(path, suffix)
            if reason:
                return SkippedFile(doc_id, reason, unreadable=reason.startswith("unreadable"))
        return SourceFile(Path(path), doc_id, info.st_size, info.st_mtime_ns)

    def _link_reason(self, path: str) -> str | None:
        """Why a symbolic link is not followed: it leads outside the root, nowhere, or in a circle."""
        try:
            target = os.path.realpath(path, strict=True)
        except OSError as exc:
            return f"broken symbolic link ({exc.strerror})"
        if target != self.real_root and not target.startswith(self.real_root.rstrip(os.sep) + os.sep):
            return "symbolic link to a place outside the knowledge base: not followed"
        return None

    def _with_gitignore(self, folder: str, rel_folder: str, ignores: Ignores) -> Ignores:
        """The specs in force below `folder`; an unreadable .gitignore raises (its folder is then skipped,
        since indexing what it may hide would be worse than waiting)."""
        path = os.path.join(folder, ".gitignore")
        if not self.kb.respect_gitignore or not os.path.isfile(path):
            return ignores
        with open(path, encoding="utf-8", errors="replace") as handle:
            spec = pathspec.PathSpec.from_lines("gitignore", handle.read().splitlines())
        return [*ignores, (rel_folder, spec)]

    def _doc_id(self, rel: str) -> str:
        return self.prefix + name_text(rel)

    def _folder_id(self, rel_folder: str) -> str:
        """A folder's id ends in "/"; the root's is its prefix, or "/" for a KB's only root."""
        return self._doc_id(rel_folder) + "/" if rel_folder else self.prefix or "/"


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:  # not created yet: nothing to keep out
        return None


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return True  # judged (and reported) by the link rules


def _why(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else f".gitignore: {exc}"


def _ignored(rel: str, is_dir: bool, ignores: Ignores) -> bool:
    for base, spec in ignores:
        local = rel[len(base) + 1 :] if base else rel
        if spec.match_file(local + ("/" if is_dir else "")):
            return True
    return False


def change_concerns(kb: KBConfig, path: Path) -> bool:
    """Whether a change at `path` (which may no longer exist) can matter to the KB's index: a path
    that exists is judged by the scan's own rules (`_Rules.judge`); a path that is gone, by its name
    under the same rules (it may have been a document or a folder holding some)."""
    if any(path.is_relative_to(folder) for folder in kb.written_folders):
        return False  # the index's own writes, when it lives among the documents
    for root, prefix in _roots(kb):
        if path == root:
            return True
        if root.is_dir() and path.is_relative_to(root):
            rules = _Rules(kb, root, prefix, {})
            rel = path.relative_to(root).as_posix()
            if path.name == ".gitignore":  # it changes which files belong
                return kb.respect_gitignore
            if os.path.lexists(path):
                return rules.judge(rel) is not None
            return rules.may_have_held(rel)
    return False


def local_file(kb: KBConfig, doc_id: str) -> Path | None:
    """The file on this machine a document id of the KB's folders names; None when no KB path here holds it (a
    server without the folder) or the id cannot name one exactly (a name in other bytes than UTF-8, shown escaped)."""
    if "\\x" in doc_id:
        return None
    for root, prefix in _roots(kb):
        if root.is_dir():
            if doc_id.startswith(prefix):
                return root / doc_id.removeprefix(prefix)
        elif doc_id == root.name and (root.is_file() or root.parent.is_dir()):  # a KB path naming one file
            return root
    return None


def files_changed(kb: KBConfig, recorded: Mapping[str, Recorded]) -> dict[str, str]:
    """Each document of the KB's folders mapped to how its file differs from what was recorded ("": it does not),
    asked of the file system within _STAT_SECONDS, on a thread of its own (when it does not answer in time, nothing
    is said of any: a hung network mount never holds an answer, nor the process's exit)."""
    if not recorded:
        return {}
    started = time.monotonic()
    if not _STAT_THREADS.acquire(timeout=_STAT_SECONDS):  # that many checks hang already: the mount is in trouble
        return dict.fromkeys(recorded, "")
    told: dict[str, str] = {}
    done = threading.Event()

    def check() -> None:
        try:
            told.update(_files_changed(kb, recorded))
        finally:
            _STAT_THREADS.release()
            done.set()

    threading.Thread(target=check, name="mcp-kb-stat", daemon=True).start()
    if not done.wait(max(0.0, _STAT_SECONDS - (time.monotonic() - started))):
        log.info("%s: the file system did not answer in %g s: freshness not checked", kb.name, _STAT_SECONDS)
        return dict.fromkeys(recorded, "")
    return told


def _files_changed(kb: KBConfig, recorded: Mapping[str, Recorded]) -> dict[str, str]:
    why = {}
    for doc_id, seen in recorded.items():
        path = local_file(kb, doc_id)
        if path is None:  # no KB path here holds it (a server without the folder): nothing to say
            continue
        now = _fingerprint(path)
        if now == _GONE:
            why[doc_id] = "deleted since it was indexed"
        elif now in (_UNKNOWN, (seen.size, seen.mtime_ns)):
            why[doc_id] = ""
        else:
            when = recorded_at(now[1])
            why[doc_id] = f"modified since it was indexed{f' (at {when})' if when else ''}"
    return why


_STAT_SECONDS = 0.25  # the most an answer waits for its files' stats
_STAT_THREADS = threading.BoundedSemaphore(8)  # checks at once (answers in parallel); all hung: a mount in trouble
_GONE, _UNKNOWN = (-1, -1), (-2, -2)


def _fingerprint(path: Path) -> tuple[int, int]:
    """A file's (size, mtime_ns); _GONE when it is not there, _UNKNOWN when that cannot be told (permissions, a mount
    in trouble: no change to vouch for)."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return _GONE
    except (OSError, ValueError):
        return _UNKNOWN
    return info.st_size, info.st_mtime_ns


class FolderSource:
    """The KB's `paths` as one source: document ids are paths relative to a root."""

    def __init__(self, kb: KBConfig):
        self.kb = kb

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[FolderSource]:
        return [cls(kb)] if kb.paths else []

    @staticmethod
    def owns(doc_id: str) -> bool:
        return True  # asked last: every id no other kind claims is a path

    @staticmethod
    def kind_of(doc_id: str) -> str:
        return os.path.splitext(doc_id)[1].lower().lstrip(".") or "other"

    def scan(
        self, known: dict[str, tuple[int, int]], progress: Progress | None = None, revisions: Revisions | None = None
    ) -> SourceScan:
        return scan_folders(self.kb, known)

    def changed(self, recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
        """Each file whose KB path is here, by a stat (a server without the folder says nothing of them)."""
        return files_changed(self.kb, recorded)

    def listing(self, known: dict[str, tuple[int, int]]) -> SourceScan:
        return scan_folders(self.kb, known)

    def watch_folders(self) -> list[Path]:
        return [path if path.is_dir() else path.parent for path in self.kb.paths]

    def concerns(self, path: Path) -> bool:
        return change_concerns(self.kb, path)
