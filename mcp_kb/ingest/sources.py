"""Sources: where a KB's documents come from, as one small protocol with one implementation per kind.

A source lists its documents (each with an id and the size/mtime fingerprint a sync hashes
behind) and says whether a change on this machine's file system concerns it (the watcher). Folders
(`folders.py`) and web sites (`web/`) are built in; another kind is one module with a class
like theirs plus one line: `SOURCE_KINDS.register(kind, Settings, SourceClass)` (mcp_kb.settings), after
which `[[kb.sources]] kind = "…"` tables configure it. The sync, the check and the watcher talk
to this module only; only the kinds know what a file or a URL is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import KBError
from ..settings import SOURCE_KINDS, KBConfig
from ..records import Progress

# Built-in kinds, asked in this order whether they own an id; folders last: every id no other kind
# claims is a path. Registered kinds are asked first.
_BUILTIN_KINDS = (
    "mcp_kb.ingest.web.source:WebSource",
    "mcp_kb.ingest.git.source:GitSource",
    "mcp_kb.ingest.folders:FolderSource",
)
# What a source read, by its key: a repository's {"commit", "scope", "ref"}; the sync keeps it in the KB's state
# with the index it matches and hands it back to the next scan.
Revisions = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class SourceFile:
    """A document to index: `doc_id` names it within its KB (a path relative to its root, a URL, ...);
    `path` is the local file holding its bytes (the file itself, or a cached download)."""

    path: Path
    doc_id: str
    size: int
    mtime_ns: int
    # Writes the bytes to `path` when a sync needs them and they are not there yet (a repository's unchanged file
    # stays in git until a rebuild parses it); None: `path` holds them already.
    fetch: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    def ready(self) -> Path:
        """`path`, holding the document's bytes."""
        if self.fetch is not None:
            self.fetch()
        return self.path

    def __getstate__(self) -> dict[str, object]:
        # Pickled (to a Ray node) without its fetch, which holds the source and its credentials: ready() first.
        return {**self.__dict__, "fetch": None}


@dataclass(frozen=True)
class SkippedFile:
    """A document (or folder, id ending in "/") left out, with the reason shown to the user.

    `unreadable` marks a read error rather than a rule: what the index holds for it is kept.
    """

    doc_id: str
    reason: str
    unreadable: bool = False

    def covers(self, doc_id: str) -> bool:
        """Whether this entry is `doc_id` or a folder holding it ("/" is a whole KB root)."""
        if self.doc_id == "/":
            return True
        return doc_id == self.doc_id or (self.doc_id.endswith("/") and doc_id.startswith(self.doc_id))


@dataclass(frozen=True)
class SourceScan:
    files: list[SourceFile]
    skipped: list[SkippedFile]
    figures: dict[str, int] = field(default_factory=dict)  # what reading the sources cost (web: requests, 304s)
    revisions: dict[str, dict[str, str]] = field(default_factory=dict)  # what each source read (a commit), by key
    # Entries left out by rule and in silence, by why: a LEFT_OUT_* key, or a suffix no parser reads (".xyz").
    left_out: dict[str, int] = field(default_factory=dict)


LEFT_OUT_HIDDEN, LEFT_OUT_GITIGNORE, LEFT_OUT_GLOBS = "hidden", "gitignore", "globs"
_LEFT_OUT_WHY = {
    LEFT_OUT_HIDDEN: "hidden (names starting with a dot)",
    LEFT_OUT_GITIGNORE: "ignored by .gitignore",
    LEFT_OUT_GLOBS: "outside its include/exclude globs",
}
_TYPES_SHOWN = 5


def why_no_documents(kb: KBConfig, scan: SourceScan) -> str:
    """What to tell a user whose KB's sources gave no document: what was there and left out, and what to check."""
    types = sorted(key for key in scan.left_out if key not in _LEFT_OUT_WHY)
    found = [f"{scan.left_out[key]} {_LEFT_OUT_WHY[key]}" for key in _LEFT_OUT_WHY if scan.left_out.get(key)]
    if types:
        shown = ", ".join(types[:_TYPES_SHOWN]) + (", …" if len(types) > _TYPES_SHOWN else "")
        found.append(f"{sum(scan.left_out[key] for key in types)} of types mcp-kb does not read ({shown})")
    if scan.skipped:
        found.append(f"{len(scan.skipped)} skipped, each for a reason `mcp-kb check` shows")
    there = f"of what its sources hold, {'; '.join(found)}" if found else "its sources gave no document to index"
    return (
        f"knowledge base {kb.name!r} holds no documents: {there}; check its paths, include and exclude in the "
        f"config (`mcp-kb check` shows what each knowledge base would index)"
    )


@dataclass(frozen=True)
class Recorded:
    """The fingerprint the index holds of a document: its source's at the last sync that read it (size and
    modification time; a repository's file: size and blob id)."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Indexed:
    """What a KB's index knows of its sources as a whole, to tell what changed since."""

    revisions: Revisions  # what the sources had read for it (a repository's commit)
    confirmed_at: str  # when its last sync that read every source ended (KBState.confirmed_at; "" before one)
    # A process that lives on (a server) may ask a remote source in the background (a repository where its ref is);
    # a one-off command asks nothing it would have to wait for or leave behind.
    asks_remotes: bool = False


class Source(Protocol):
    """One configured source of a KB. Its class also provides `of(kb, cache_folder) -> list[Source]`
    (the KB's sources of this kind, none when unconfigured), `owns(doc_id)` and `kind_of(doc_id)`."""

    def scan(
        self, known: dict[str, tuple[int, int]], progress: Progress | None = None, revisions: Revisions | None = None
    ) -> SourceScan:
        """Every document, or a reason per one left out; `known` maps the ids the index holds to the
        (size, mtime_ns) it saw (a web source asks for each again; a folder trusts unchanged files), `revisions`
        what the sources had read for the index (a repository diffs from its commit)."""

    def changed(self, recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
        """Of the documents `recorded` names, this source's, each mapped to one line saying how it changed since it
        was recorded ("": it has not, or that cannot be told cheaply). Ids it leaves out are another source's. Cheap,
        as every answer asks: a stat, a clock, a ref asked in the background; never a download."""

    def listing(self, known: dict[str, tuple[int, int]]) -> SourceScan | None:
        """Its documents as a scan would list them now, by listing and stat (`known`: the fingerprints the index
        holds, whose files are not opened again; nothing downloaded, hashed or parsed); None when that cannot be had
        so (a web site, a repository)."""

    def watch_folders(self) -> list[Path]:
        """Local folders whose changes may change the documents; none: the source is polled (a web site)."""

    def concerns(self, path: Path) -> bool:
        """Whether a change at this local path (which may be gone) below a watched folder may change
        the documents."""


class SourceKind(Protocol):
    """A source's class: the KB's sources of its kind, and which ids are its documents."""

    def of(self, kb: KBConfig, cache_folder: Path) -> list[Source]:
        """The KB's sources of this kind (none when it configures none)."""

    def owns(self, doc_id: str) -> bool:
        """Whether a document id is of this kind."""

    def kind_of(self, doc_id: str) -> str:
        """What a summary counts the document as: a suffix, "web page", ..."""


def _kinds() -> list[SourceKind]:
    return _registered_kinds() + list(_builtin_kinds())


def _registered_kinds() -> list[SourceKind]:
    return [SOURCE_KINDS.implementation(name) for name in SOURCE_KINDS.names()]


@functools.cache
def _builtin_kinds() -> tuple[SourceKind, ...]:
    """Imported once: a summary asks the kinds about every document of a KB."""
    return tuple(SOURCE_KINDS.load(target) for target in _BUILTIN_KINDS)


def sources_of(kb: KBConfig, cache_folder: Path) -> list[Source]:
    """The KB's sources; `cache_folder` is where they may keep what they download (this machine's). A KB of library
    versions (`[[kb.versions]]`) has each version's sources, their documents' ids led by `VERSION/`."""
    if kb.versions:
        return [
            VersionSource(version.name, source)
            for version in kb.versions
            for source in sources_of(kb.of_version(version), cache_folder / version.name)
        ]
    return [source for kind in _kinds() for source in kind.of(kb, cache_folder)]


class VersionSource:
    """A source of one library version: its documents' ids are the source's own led by `VERSION/`, so the same
    page in two versions is two documents (with the same chunks, whose vectors the second reuses)."""

    def __init__(self, version: str, source: Source):
        self.prefix, self.source = f"{version}/", source

    def scan(
        self, known: dict[str, tuple[int, int]], progress: Progress | None = None, revisions: Revisions | None = None
    ) -> SourceScan:
        own = {
            doc_id.removeprefix(self.prefix): seen for doc_id, seen in known.items() if doc_id.startswith(self.prefix)
        }
        own_revisions = {
            key.removeprefix(self.prefix): read
            for key, read in (revisions or {}).items()
            if key.startswith(self.prefix)
        }
        scan = self.source.scan(own, progress, own_revisions)
        return SourceScan(
            [dataclasses.replace(item, doc_id=self.prefix + item.doc_id) for item in scan.files],
            [dataclasses.replace(item, doc_id=self.prefix + item.doc_id.removeprefix("/")) for item in scan.skipped],
            scan.figures,
            {self.prefix + key: read for key, read in scan.revisions.items()},
            scan.left_out,
        )

    def changed(self, recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
        own = {
            doc_id.removeprefix(self.prefix): seen
            for doc_id, seen in recorded.items()
            if doc_id.startswith(self.prefix)
        }
        own_revisions = {
            key.removeprefix(self.prefix): read
            for key, read in indexed.revisions.items()
            if key.startswith(self.prefix)
        }
        told = self.source.changed(own, dataclasses.replace(indexed, revisions=own_revisions))
        return {self.prefix + doc_id: line for doc_id, line in told.items()}

    def listing(self, known: dict[str, tuple[int, int]]) -> SourceScan | None:
        own = {
            doc_id.removeprefix(self.prefix): seen for doc_id, seen in known.items() if doc_id.startswith(self.prefix)
        }
        listed = self.source.listing(own) if hasattr(self.source, "listing") else None
        if listed is None:
            return None
        return SourceScan(
            [dataclasses.replace(item, doc_id=self.prefix + item.doc_id) for item in listed.files],
            [dataclasses.replace(item, doc_id=self.prefix + item.doc_id.removeprefix("/")) for item in listed.skipped],
        )

    def watch_folders(self) -> list[Path]:
        return self.source.watch_folders()

    def concerns(self, path: Path) -> bool:
        return self.source.concerns(path)


def changed_documents(sources: Iterable[Source], recorded: Mapping[str, Recorded], indexed: Indexed) -> dict[str, str]:
    """Of the documents `recorded` names, those whose source changed since, each with one line saying how: each
    source in turn claims its own (folders last: they claim every id left). A kind without `changed` (a plugin's
    from before it) says nothing of its documents."""
    silent = [kind for kind in _registered_kinds() if not hasattr(kind, "changed")]
    left = {doc_id: seen for doc_id, seen in recorded.items() if not any(kind.owns(doc_id) for kind in silent)}
    why: dict[str, str] = {}
    for source in sources:
        if not left or not hasattr(source, "changed"):
            continue
        told = source.changed(left, indexed)
        why.update({doc_id: line for doc_id, line in told.items() if line})
        left = {doc_id: seen for doc_id, seen in left.items() if doc_id not in told}
    return why


def list_all(sources: Iterable[Source], known: dict[str, tuple[int, int]]) -> SourceScan | None:
    """All sources' documents as they would be listed now, by listing and stat (`known`: as Source.listing); None
    when a source cannot be listed so (a kind without `listing` cannot)."""
    listed = [source.listing(known) if hasattr(source, "listing") else None for source in sources]
    if any(scan is None for scan in listed):
        return None
    return SourceScan(
        [item for scan in listed if scan for item in scan.files],
        [item for scan in listed if scan for item in scan.skipped],
    )


def scan_all(
    sources: Iterable[Source],
    known: dict[str, tuple[int, int]] | None = None,
    progress: Progress | None = None,
    revisions: Revisions | None = None,
) -> SourceScan:
    """All sources' documents as one scan (an id two sources list is an error)."""
    files: dict[str, SourceFile] = {}
    skipped: list[SkippedFile] = []
    figures: dict[str, int] = {}
    read: dict[str, dict[str, str]] = {}
    left_out: Counter[str] = Counter()
    for source in sources:
        scan = source.scan(known or {}, progress, revisions or {})
        for item in scan.files:
            if item.doc_id in files:  # a repository named like a folder inside a KB path: neither may win in silence
                raise KBError(
                    f"the document {item.doc_id!r} comes from two of the knowledge base's sources; give "
                    "the repository another `name` (its files' paths lead with it)"
                )
            files[item.doc_id] = item
        skipped += scan.skipped
        for name, value in scan.figures.items():
            figures[name] = figures.get(name, 0) + value
        read.update(scan.revisions)
        left_out.update(scan.left_out)
    return SourceScan(sorted(files.values(), key=lambda f: f.doc_id), skipped, figures, read, dict(left_out))


def change_concerns(sources: Iterable[Source], path: Path) -> bool:
    """Whether a file-system change at `path` may change any of the sources' documents."""
    return any(source.concerns(path) for source in sources)


def watch_folders(sources: Iterable[Source]) -> list[Path]:
    """Every local folder a watcher of these sources must follow."""
    return list(dict.fromkeys(folder for source in sources for folder in source.watch_folders()))


def count_kinds(doc_ids: Iterable[str]) -> Counter[str]:
    """How many documents of each kind, for summaries: a file's suffix, "web page", ... (the owning
    kind says; one plain loop, since a summary asks about every document of a KB)."""
    kinds, counts = _kinds(), Counter[str]()
    for doc_id in doc_ids:
        for kind in kinds:
            if kind.owns(doc_id):
                counts[kind.kind_of(doc_id)] += 1
                break
    return counts
