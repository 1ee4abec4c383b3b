"""The KB's `repos` as Sources (ingest/sources.py): committed files of a ref, synced by commit.

Each scan fetches the ref (shallow: one commit and its tree) into this machine's bare copy. When the index holds
an earlier commit of the same scope (the sync passes it in `revisions`) and the copy still has it, the files that
changed come from `git diff-tree` between the two: the others are listed from what the index knows, with no tree
read and nothing hashed. Otherwise (a first sync, a force-push whose old commit is gone, another machine's copy)
the whole tree is listed and compared with the index by blob id. A file's fingerprint is (size, its blob id as a
number), so an unchanged blob is never read. Only the files a sync needs are written out of git, each to a file
named by a hash (no path from the repository ever names a file on this disk); git never checks out, so no
filter, hook or symbolic link of the repository takes effect.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shutil
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit
from urllib.request import url2pathname

from ...digest import short_key
from ...doc_ids import id_prefix
from ...errors import GitError, KBError
from ...files import write_atomically
from ...records import Progress, seconds_of
from ...settings import KBConfig, RepoConfig, in_megabytes, megabytes
from ..admission import (
    binary_reason,
    left_out_as_hidden,
    matches_globs,
    name_reason,
    shown_name,
    size_reason,
    unsupported_reason,
)
from ..parsers import is_supported, supported_suffixes
from ..sources import Indexed, Recorded, SkippedFile, SourceFile, SourceScan
from .command import Git, Remote

log = logging.getLogger(__name__)

_FETCHED = "refs/mcp-kb/fetched"
_KEPT = "refs/mcp-kb/kept/"  # the commits a later diff needs: the one the index holds, and the newest
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_BLOB_ID_DIGITS = 15  # 60 bits of a blob id: the fingerprint's second number (a signed 64-bit column)
_FILE, _EXECUTABLE, _LINK, _SUBMODULE = "100644", "100755", "120000", "160000"


@dataclass(frozen=True)
class _Entry:
    """A file of a commit: its path as git stores it (undecodable bytes as surrogates), mode, blob id and size."""

    path: str
    mode: str
    blob: str
    size: int = -1

    @property
    def fingerprint(self) -> tuple[int, int]:
        return self.size, int(self.blob[:_BLOB_ID_DIGITS], 16)


class GitSource:
    """One `[[kb.repos]]` entry as a source: document ids are paths in the repository (led by `NAME/` when the KB
    has other sources)."""

    def __init__(self, kb: KBConfig, repo: RepoConfig, cache_folder: Path, prefix: str):
        self.kb, self.repo, self.prefix = kb, repo, prefix
        address = Remote.address(repo)
        self.key = repo.label
        self.scope = _scope(kb, repo, address, prefix)
        # One copy per repository entry (a KB may name one repository twice, at two refs).
        self.folder = cache_folder / "repos" / short_key(f"{repo.label}\0{address}")
        self.files_folder = self.folder / "files"

    @functools.cached_property
    def git(self) -> Git:
        """git on this machine's copy, with the credentials read now: a missing token fails this KB's sync, never
        the building of every KB's sources (a server's start, the watcher)."""
        return Git(self.folder / "copy.git", Remote.of(self.repo), self.repo.timeout, megabytes(self.repo.max_fetch_mb))

    @functools.cached_property
    def _git_folder(self) -> Path | None:
        return _git_folder(self.repo)  # looked for once: the watcher asks at every change below it

    @classmethod
    def of(cls, kb: KBConfig, cache_folder: Path) -> list[GitSource]:
        return [cls(kb, repo, cache_folder, id_prefix(kb, repo)) for repo in kb.repos]

    @staticmethod
    def owns(doc_id: str) -> bool:
        return False  # its ids are paths: the folder kind counts them by suffix

    @staticmethod
    def kind_of(doc_id: str) -> str:
        return posixpath.splitext(doc_id)[1].lower().lstrip(".") or "other"

    def changed(self, recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
        """Each of its files, when its ref has moved past the commit the index holds, as last known since the index
        was confirmed: this machine's last fetch, or in a server `git ls-remote`, asked in the background at most once
        a minute (an answer never waits on a repository; a one-off command leaves nothing running)."""
        mine = [doc_id for doc_id in recorded if doc_id.startswith(self.prefix)]
        commit = indexed.revisions.get(self.key, {}).get("commit", "")
        confirmed = seconds_of(indexed.confirmed_at)
        tip = _TIPS.seen(self, indexed.asks_remotes, confirmed) if mine and commit and confirmed is not None else None
        moved = (
            f"its repository's {self.repo.ref} is at {tip[:12]} now; the index holds {commit[:12]}"
            if tip and tip != commit
            else ""
        )
        return dict.fromkeys(mine, moved)

    def last_fetched(self) -> tuple[float, str] | None:
        """When this machine last fetched the ref, and the commit it brought (None: never, or not to be told)."""
        try:
            fetched_at = (self.folder / "copy.git" / _FETCHED).stat().st_mtime  # a fetch writes the ref loose
            commit = self.git.run("rev-parse", "--verify", "--end-of-options", f"{_FETCHED}^{{commit}}")
        except (OSError, KBError):  # never fetched here; no git, a missing token
            return None
        return fetched_at, commit.decode().strip()

    def remote_commit(self) -> str | None:
        """The commit the repository's ref names now (None: it cannot be told); asks the repository itself."""
        return self.git.remote_commit(self.repo.ref)

    @staticmethod
    def listing(known: dict[str, tuple[int, int]]) -> None:
        return None  # a repository's files are listed from its commit, which a fetch brings: a sync counts them

    def watch_folders(self) -> list[Path]:
        """A repository on this machine: its git folder, where a commit moves a ref; a remote one changes out of
        sight (`[kb.sync] interval` fetches again, a webhook asks)."""
        return [self._git_folder] if self._git_folder else []

    def concerns(self, path: Path) -> bool:
        """A change of a ref that may be the indexed one (a branch or tag file, `packed-refs`, `HEAD`); not git's
        objects, its index or its lock files."""
        folder = self._git_folder
        if folder is None or not path.is_relative_to(folder) or path.name.endswith(".lock"):
            return False
        return _may_name_ref(path.relative_to(folder).as_posix(), self.repo.ref)

    def scan(
        self,
        known: dict[str, tuple[int, int]],
        progress: Progress | None = None,
        revisions: Mapping[str, Mapping[str, str]] | None = None,
    ) -> SourceScan:
        self.git.init()
        shutil.rmtree(self.files_folder, ignore_errors=True)  # what the last sync wrote out of git is parsed
        self.files_folder.mkdir(parents=True)
        if progress:
            progress(0, 0, f"{self.kb.name}: fetching {self.git.remote.scrub(self.git.remote.url)} {self.repo.ref}")
        self.git.fetch(self.repo.ref, _FETCHED)
        commit = self.git.run("rev-parse", "--verify", "--end-of-options", f"{_FETCHED}^{{commit}}").decode().strip()
        _TIPS.fetched(self, commit)
        base = (revisions or {}).get(self.key, {})
        mine = {doc_id: seen for doc_id, seen in known.items() if doc_id.startswith(self.prefix)}
        diffed = base.get("scope") == self.scope and self.git.succeeds(
            "cat-file", "-e", f"{base.get('commit')}^{{commit}}"
        )
        files, skipped, read = self._by_diff(base["commit"], commit, mine) if diffed else self._by_tree(commit, mine)
        self._keep(base.get("commit", ""), commit)
        way = "commits diffed" if diffed else "trees compared"
        return SourceScan(
            files,
            skipped,
            {way: 1, "files read from git": read},
            revisions={self.key: {"commit": commit, "scope": self.scope, "ref": self.repo.ref}},
        )

    # ---- listing ----------------------------------------------------------------------------------------------

    def _by_tree(
        self, commit: str, known: dict[str, tuple[int, int]]
    ) -> tuple[list[SourceFile], list[SkippedFile], int]:
        """Every file of the commit, compared with the index by blob id."""
        raw = self.git.run("ls-tree", "-r", "-z", "--full-tree", "-l", "--end-of-options", commit)
        entries = []
        for record in raw.split(b"\0"):
            if record:
                meta, _, path = record.partition(b"\t")
                mode, _, blob, size = meta.split()
                entries.append(
                    _Entry(os.fsdecode(path), mode.decode(), blob.decode(), int(size) if size != b"-" else -1)
                )
        return self._judge(commit, entries, known)

    def _by_diff(
        self, base: str, commit: str, known: dict[str, tuple[int, int]]
    ) -> tuple[list[SourceFile], list[SkippedFile], int]:
        """The files the index holds, less those the diff deleted, plus those it added or modified (renames are a
        deletion and an addition: the chunks' vectors are reused by content)."""
        changed: list[_Entry] = []
        gone: set[str] = set()
        for status, old, new in _diff(
            self.git.run("diff-tree", "-r", "-z", "--no-commit-id", "-M", "--end-of-options", base, commit)
        ):
            if status in "DR":
                gone.add(old.path)
            if status != "D":
                changed.append(new)
        sizes = self._sizes([entry.blob for entry in changed if entry.mode not in (_SUBMODULE,)])
        changed = [_Entry(e.path, e.mode, e.blob, sizes.get(e.blob, -1)) for e in changed]
        paths = {self._doc_id(entry.path) for entry in changed} | {self._doc_id(path) for path in gone}
        files, skipped, read = self._judge(commit, changed, known)
        files += [
            self._file(commit, doc_id.removeprefix(self.prefix), doc_id, seen)
            for doc_id, seen in known.items()
            if doc_id not in paths
        ]
        return sorted(files, key=lambda f: f.doc_id), skipped, read

    def _judge(
        self, commit: str, entries: list[_Entry], known: dict[str, tuple[int, int]]
    ) -> tuple[list[SourceFile], list[SkippedFile], int]:
        """Which entries are documents: in scope, a plain file, within the size limit, text where text is due."""
        files, skipped, wanted = [], [], []
        for entry in entries:
            doc_id = self._doc_id(entry.path)
            if not self._in_scope(entry.path, entry.mode, doc_id):
                continue
            reason = self._rule_out(entry)
            if reason:
                skipped.append(SkippedFile(doc_id, reason))
            elif known.get(doc_id) == entry.fingerprint:
                files.append(self._file(commit, entry.path, doc_id, entry.fingerprint))
            else:
                wanted.append((entry, doc_id))
        written = self._write_out(commit, [entry for entry, _ in wanted])
        for entry, doc_id in wanted:
            path = written[entry.blob, _suffix(entry.path)]
            reason = _content_reason(path, entry)
            if reason:
                skipped.append(SkippedFile(doc_id, reason))
            else:
                files.append(SourceFile(path, doc_id, *entry.fingerprint))
        return files, skipped, len(wanted)

    def _in_scope(self, path: str, mode: str, doc_id: str) -> bool:
        if any(part in ("", ".", "..") for part in path.split("/")):
            return False  # git refuses such trees (fsck on fetch); never a document either way
        if left_out_as_hidden(path, committed=True):
            return False
        if not (is_supported(_type(path)) or mode == _SUBMODULE or self.kb.include):
            return (
                False  # left out in silence (admission.unsupported_reason); a submodule is reported, whatever its name
            )
        if self.repo.paths and not matches_globs(path, self.repo.paths, []):
            return False
        return matches_globs(path, [], self.repo.exclude) and matches_globs(doc_id, self.kb.include, self.kb.exclude)

    def _rule_out(self, entry: _Entry) -> str:
        if reason := name_reason(entry.path, committed=True):
            return reason
        if entry.mode == _LINK:
            return "symbolic link in the repository: not followed"
        if entry.mode == _SUBMODULE:
            return "submodule: not followed"
        if entry.mode not in (_FILE, _EXECUTABLE):
            return f"not a file (mode {entry.mode})"
        if not is_supported(_type(entry.path)):
            return unsupported_reason(_type(entry.path), self.kb)
        return size_reason(entry.size, self.kb)

    def _doc_id(self, path: str) -> str:
        """The path as an id; a name that is not printable UTF-8 (only ever reported) shows its odd characters
        escaped, so no terminal that prints a report runs an escape sequence."""
        return self.prefix + shown_name(path)

    # ---- reading blobs ---------------------------------------------------------------------------------------

    def _sizes(self, blobs: list[str]) -> dict[str, int]:
        """Each blob's size, asked of git in one go."""
        if not blobs:
            return {}
        out = self.git.run("cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="\n".join(blobs).encode())
        return {
            name: int(size) for name, size in (line.split() for line in out.decode().splitlines()) if size.isdigit()
        }

    def _write_out(self, commit: str, entries: list[_Entry]) -> dict[tuple[str, str], Path]:
        """The blobs' bytes, each in a file named by its blob id and the path's suffix (which picks the parser: one
        blob may be a .md and an .html file), read through one `git cat-file --batch` within the fetch's deadline
        and size ceiling (many small blobs can unpack to far more than their pack)."""
        if not entries:  # a sync with no new commit starts no git at all here
            return {}
        files = {(entry.blob, _suffix(entry.path)): entry.size for entry in entries}
        total = sum(files.values())
        if total > self.git.max_bytes:
            raise GitError(
                f"repository {self.repo.label}: the files to read add up to {in_megabytes(total):.0f} MB, more "
                f"than its `max_fetch_mb` ({in_megabytes(self.git.max_bytes):g} MB)"
            )
        written = {(blob, suffix): self.files_folder / f"{blob}{suffix}" for blob, suffix in files}
        targets: dict[str, list[Path]] = {}
        for (blob, _), target in written.items():
            targets.setdefault(blob, []).append(target)
        blobs = list(targets)
        with subprocess.Popen(
            ["git", "--git-dir", str(self.git.folder), "cat-file", "--batch"],
            env=self.git.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as process:
            assert process.stdin and process.stdout
            # Asked from a thread while this one reads: git stops reading its input once its output pipe is full.
            asking = threading.Thread(target=_ask, args=(process.stdin, blobs), daemon=True)
            asking.start()
            deadline = threading.Timer(self.repo.timeout, process.kill)
            deadline.start()
            try:
                for blob in blobs:
                    header = process.stdout.readline().split()
                    if len(header) != 3:
                        raise GitError(
                            f"repository {self.repo.label}: git could not read blob {blob} of commit {commit[:12]}"
                        )
                    first, *others = targets[blob]
                    _copy(process.stdout, int(header[2]), first)
                    for other in others:
                        shutil.copyfile(first, other)
                    process.stdout.read(1)  # the newline after each object
            finally:
                deadline.cancel()
        return written

    def _file(self, commit: str, path: str, doc_id: str, seen: tuple[int, int]) -> SourceFile:
        """An unchanged document: its bytes stay in git until a sync needs them (a rebuild parses every file)."""
        name = short_key(f"{commit}:{path}", 40)
        target = self.files_folder / f"{name}{_suffix(path)}"
        return SourceFile(target, doc_id, *seen, fetch=self._fetcher(commit, path, target))

    def _fetcher(self, commit: str, path: str, target: Path) -> Callable[[], None]:
        def fetch() -> None:
            if not target.exists():
                write_atomically(target, self.git.run("cat-file", "blob", f"{commit}:{path}"))

        return fetch

    def _keep(self, base: str, commit: str) -> None:
        """Refs on the commits a later diff starts from; the others are let go."""
        keep = {name for name in (base, commit) if name}
        held = self.git.run("for-each-ref", "--format=%(objectname)", _KEPT).decode().split()
        for name in set(held) - keep:
            self.git.run("update-ref", "-d", f"{_KEPT}{name}")
        for name in keep - set(held):
            if self.git.succeeds("cat-file", "-e", f"{name}^{{commit}}"):
                self.git.run("update-ref", f"{_KEPT}{name}", name)


def _scope(kb: KBConfig, repo: RepoConfig, url: str, prefix: str) -> str:
    """What decides which files of a commit are documents, and their ids: a diff against a commit synced under
    another scope would keep files that are no longer in it (or ids no longer theirs), so a changed scope lists the
    whole tree again."""
    settings = [
        url,
        repo.ref,
        repo.paths,
        repo.exclude,
        kb.include,
        kb.exclude,
        kb.max_file_size_mb,
        prefix,
        supported_suffixes(),
    ]  # a parser added (or gone) changes which files are documents
    return short_key(json.dumps(settings))


def _diff(raw: bytes) -> Iterator[tuple[str, _Entry, _Entry]]:
    """`git diff-tree -r -z` records: status letter, the old entry and the new one."""
    fields = raw.split(b"\0")
    index = 0
    while index < len(fields) - 1:
        meta = fields[index].decode()
        if not meta.startswith(":"):
            index += 1
            continue
        old_mode, new_mode, old_blob, new_blob, status = meta[1:].split()
        old_path = os.fsdecode(fields[index + 1])
        two_paths = status[0] in "RC"
        new_path = os.fsdecode(fields[index + 2]) if two_paths else old_path
        index += 3 if two_paths else 2
        yield status[0], _Entry(old_path, old_mode, old_blob), _Entry(new_path, new_mode, new_blob)


def _ask(stdin: IO[bytes], blobs: list[str]) -> None:
    try:
        for blob in blobs:
            stdin.write(f"{blob}\n".encode())
        stdin.close()
    except OSError:  # git ended (killed at the deadline): the reader says why
        pass


def _copy(stream: IO[bytes], size: int, target: Path) -> None:
    """`size` bytes of a stream into a new file, a megabyte at a time."""
    read = stream.read
    with target.open("wb") as out:
        left = size
        while left:
            chunk = read(min(left, 2**20))
            if not chunk:
                raise GitError("git's output ended early")
            out.write(chunk)
            left -= len(chunk)


def _content_reason(path: Path, entry: _Entry) -> str:
    """Why a blob's bytes are no document: a Git LFS pointer (the file itself was never fetched), or binary."""
    if entry.size < 1024:
        with path.open("rb") as handle:
            if handle.read(len(_LFS_POINTER)) == _LFS_POINTER:
                return "Git LFS pointer: the file itself is not fetched (mcp-kb reads what is committed)"
    return binary_reason(str(path), _suffix(entry.path))


def _type(path: str) -> str:
    """The path's suffix, lower case: which parser reads it, if any."""
    return posixpath.splitext(path)[1].lower()


def _suffix(path: str) -> str:
    """The path's suffix, lower case, which picks the parser (only a plain one names a file on this disk)."""
    suffix = _type(path)
    return suffix if suffix.isascii() and suffix.isprintable() and "/" not in suffix else ""


def _git_folder(repo: RepoConfig) -> Path | None:
    """The git folder of a repository on this machine (`url` a local path or `file://`): its `.git` folder, or
    itself when bare; None for a remote one, a path that is not a repository, or a worktree's `.git` file."""
    local = repo.local_path or (Path(url2pathname(urlsplit(repo.url).path)) if repo.url.startswith("file://") else None)
    if local is None:
        return None
    for folder in (local / ".git", local):
        if (folder / "HEAD").is_file() and (folder / "refs").is_dir():
            return folder
    return None


def _may_name_ref(relative: str, ref: str) -> bool:
    """Whether a change at `relative` in a git folder may move `ref` (`HEAD`: any branch, or HEAD itself)."""
    if relative == "packed-refs":
        return True
    if ref == "HEAD":
        return relative == "HEAD" or relative.startswith("refs/heads/")
    if ref.startswith("refs/"):
        return relative == ref
    return relative in (f"refs/heads/{ref}", f"refs/tags/{ref}")


class _Tips:
    """Where each repository's ref was last seen, and when (wall clock): by this process's fetches, and in a server by
    `git ls-remote` asked in the background once the last look is older than _TIP_SECONDS. A look from before the
    index was last confirmed says nothing (the sync since saw more)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[float, str | None]] = {}  # by copy: when it was seen, the commit
        self._asking: set[Path] = set()

    def seen(self, source: GitSource, ask: bool, since: float) -> str | None:
        """The commit the ref was last seen at, at or after `since` (None: not seen since); with `ask`, a look is
        asked for in the background when the last is older than _TIP_SECONDS."""
        key = source.folder
        with self._lock:
            looked = self._seen.get(key)
        # this process has not looked yet: this machine's last fetch (git, outside the lock other repositories share)
        seen_at, commit = looked or source.last_fetched() or (float("-inf"), None)
        with self._lock:
            if ask and time.time() - seen_at >= _TIP_SECONDS and key not in self._asking:
                self._asking.add(key)
                threading.Thread(target=self._ask, args=(key, source), name="mcp-kb-ls-remote", daemon=True).start()
        return commit if seen_at >= since else None

    def fetched(self, source: GitSource, commit: str) -> None:
        """A fetch of this process brought the ref to `commit`."""
        with self._lock:
            self._seen[source.folder] = (time.time(), commit)

    def _ask(self, key: Path, source: GitSource) -> None:
        try:
            commit = source.remote_commit()
        except Exception as exc:  # a missing token, no git: freshness says nothing; the next sync says why
            log.debug("%s: its ref could not be asked for: %s", source.key, exc)
            commit = None
        with self._lock:
            self._seen[key] = (time.time(), commit)
            self._asking.discard(key)


_TIP_SECONDS = 60.0
_TIPS = _Tips()
