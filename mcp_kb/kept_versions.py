"""A KB's kept versions as a sync and a rollback both write them: the record of each (KBVersion), a sync's new
version (or a tag on the current one), the versions forgotten (retention, a damaged generation), a tag name checked
before it is added, and a rollback a crash interrupted finished by the next writer (history.py starts rollbacks,
tags versions and reads the history; index/versions.py stores the records)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import VersionError
from .index.contract import Pinned, Store
from .records import KBState, SyncReport, recorded_now
from .settings import KBConfig

# A letter first: never a version number or a date. \Z, not $: "$" also matches before a final newline ("a\n").
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}\Z")
MAX_TAGS = 100  # per KB: a sync's caller may tag, and a tag keeps its version (and its storage) until removed
_PRECISION = "milliseconds"  # of when a version was made: two syncs a second apart are two times to ask as of
TAG_HELP = "a letter, then up to 63 letters, digits, '.', '_' or '-'"


@dataclass(frozen=True)
class KBVersion:
    """One version of a KB: what its sync changed, and the tables as it left them."""

    number: int
    generation: str
    pinned: Pinned
    started: str  # when the sync (or rollback) that made it began, RFC 3339 UTC
    finished: str
    kind: str  # sync | rebuild | rollback | unfinished (a sync that stopped: the files it wrote, which searches read)
    added: int = 0  # documents
    changed: int = 0
    removed: int = 0
    tags: tuple[str, ...] = ()
    by: str = ""  # who asked for the sync through the server ("" from the command line)
    rolled_back_to: int | None = None  # a rollback's: the version it made current again
    fingerprints: dict[str, Any] = field(
        default_factory=dict
    )  # what its tables were built with (a rollback restores them)
    commits: dict[str, str] = field(default_factory=dict)  # its repositories' commits, by name (`[[kb.repos]]`)

    def as_dict(self) -> dict[str, Any]:
        """The saved form (index/versions.py keeps it as JSON)."""
        return {
            **self.listed(),
            "generation": self.generation,
            "pinned": self.pinned.as_dict(),
            "fingerprints": self.fingerprints,
        }

    def listed(self) -> dict[str, Any]:
        """What `mcp-kb versions --json` and the admin page show."""
        return {
            "number": self.number,
            "started": self.started,
            "finished": self.finished,
            "kind": self.kind,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "tags": list(self.tags),
            "by": self.by,
            "rolled_back_to": self.rolled_back_to,
            **({"commits": self.commits} if self.commits else {}),
        }

    @staticmethod
    def from_dict(saved: dict[str, Any]) -> KBVersion:
        return KBVersion(
            int(saved["number"]),
            str(saved["generation"]),
            Pinned.from_dict(saved["pinned"]),
            str(saved["started"]),
            str(saved["finished"]),
            str(saved.get("kind", "sync")),
            int(saved.get("added", 0)),
            int(saved.get("changed", 0)),
            int(saved.get("removed", 0)),
            tuple(saved.get("tags", ())),
            str(saved.get("by", "")),
            saved.get("rolled_back_to"),
            dict(saved.get("fingerprints") or {}),
            dict(saved.get("commits") or {}),
        )

    @property
    def finished_at(self) -> datetime:
        return datetime.fromisoformat(self.finished)

    def describe(self) -> str:
        """One line naming the version, for an answer read as of it."""
        tags = f" ({', '.join(self.tags)})" if self.tags else ""
        return f"version {self.number}{tags} of {self.finished}"


def versions(store: Store, kb: str) -> list[KBVersion]:
    """The KB's committed versions, oldest first."""
    current = KBState(store.read_state(kb)).version
    if current is None:
        return []
    return [version for version in map(KBVersion.from_dict, store.read_versions(kb)) if version.number <= current]


def by_number(store: Store, kb: str, number: int | None) -> KBVersion | None:
    """The record numbered `number`, committed or not; None when none is kept."""
    return next((v for v in map(KBVersion.from_dict, store.read_versions(kb)) if v.number == number), None)


def record(  # noqa: PLR0913  # a sync's outcome
    store: Store,
    kb: str,
    report: SyncReport,
    generation: str,
    fingerprints: dict[str, Any],
    started: str,
    by: str = "",
    tag: str | None = None,
    kind: str = "sync",
) -> dict[str, Any]:
    """After a sync wrote its tables: a new version when it changed the KB (or the KB has none yet), with `tag`
    (checked by check_tag before the sync began). Returns what the sync's final state write must add: the current
    version's number, which commits it."""
    current = KBState(store.read_state(kb)).version
    changed = report.files_added or report.files_changed or report.files_deleted or report.rebuilt
    if current is not None and not changed:  # nothing new: a tag goes on the current version
        tagged = by_number(store, kb, current)
        if tag is not None and tagged is not None:
            rewrite(store, kb, tagged, (*tagged.tags, tag))
        return {"version": current}
    number = (current or 0) + 1
    version = KBVersion(
        number,
        generation,
        store.pinned_now(kb, generation),
        started,
        recorded_now(_PRECISION),
        "rebuild" if report.rebuilt else kind,
        report.files_added,
        report.files_changed,
        report.files_deleted,
        (tag,) if tag else (),
        by,
        fingerprints=dict(fingerprints),
        commits=dict(report.commits),
    )
    store.write_version(kb, number, started, generation, version.as_dict())
    return {"version": number}


def forget_generation(store: Store, kb: str, generation: str) -> None:
    """Forget the versions of a generation whose tables are damaged or gone (a rebuild replaces it): nothing could
    read them, and the rebuild may then drop what is left of its tables."""
    store.forget_versions(
        kb,
        [
            version.number
            for version in map(KBVersion.from_dict, store.read_versions(kb))
            if version.generation == generation
        ],
    )


def prune(store: Store, kb: KBConfig) -> None:
    """Forget versions retention no longer keeps ([kb.history]), and records no state committed (a killed
    sync's); what they alone pinned goes at the next compaction (and their generations at the next sync)."""
    state = KBState(store.read_state(kb.name))
    records = [KBVersion.from_dict(saved) for saved in store.read_versions(kb.name)]
    kept = _kept(
        records, state.version, kb.history.keep, kb.history.keep_days, pending=(state.rolling_back or {}).get("to")
    )
    store.forget_versions(kb.name, [version.number for version in records if version.number not in kept])


def _kept(
    records: list[KBVersion],
    current: int | None,
    keep: int,
    keep_days: float,  # noqa: PLR0913
    pending: Any = None,
) -> set[int]:
    """The newest `keep` committed versions, those younger than `keep_days`, the tagged ones, the current one and a
    pending rollback's target."""
    committed = [version for version in records if current is not None and version.number <= current]
    since = datetime.now(UTC) - timedelta(days=keep_days)
    kept = {version.number for version in committed[-keep:]}
    kept |= {version.number for version in committed if version.tags or version.finished_at >= since}
    return kept | {number for number in (current, pending) if isinstance(number, int)}


def check_tag(store: Store, kb: str, name: str | None) -> None:
    """A sync's `tag`, refused before the sync does any work (None: no tag asked)."""
    if name is not None:
        free_tag(store, kb, name)


def free_tag(store: Store, kb: str, name: str) -> None:
    """A tag name that may be added: well formed, not in use, and within the KB's bound on tags (each keeps its
    version, and what compaction must keep, until removed)."""
    if not _TAG.match(name):
        raise VersionError(f"{name[:64]!r} is not a tag name: {TAG_HELP}; nothing was changed")
    kept = versions(store, kb)
    if sum(len(version.tags) for version in kept) >= MAX_TAGS:
        raise VersionError(
            f"knowledge base {kb!r} has {MAX_TAGS} tags, the most it keeps: remove one first "
            "(mcp-kb tag --remove); nothing was changed"
        )
    for version in kept:
        if name in version.tags:
            raise VersionError(
                f"knowledge base {kb!r} already has the tag {name!r} (on version {version.number}); "
                "remove it first (mcp-kb tag --remove); nothing was changed"
            )


def rewrite(store: Store, kb: str, version: KBVersion, tags: tuple[str, ...]) -> KBVersion:
    """The version saved again with `tags` for its own."""
    changed = KBVersion(**{**version.__dict__, "tags": tags})
    store.write_version(kb, version.number, version.started, version.generation, changed.as_dict())
    return changed


def finish_rollback(store: Store, kb: KBConfig, state: dict[str, Any]) -> dict[str, Any]:
    """Carry out the rollback the state row's marker names (again, after a crash: restoring gives the same
    tables), commit it as a new version and clear the marker; the new state row. The caller holds the lock."""
    row = KBState(state)
    marker = row.rolling_back or {}
    target = by_number(store, kb.name, marker.get("to"))
    if target is None:  # its record is gone (by hand): nothing was restored that a sync would not redo
        store.write_state(kb.name, row.without_rollback())
        return row.without_rollback()
    current = by_number(store, kb.name, row.version)
    before = store.read_files(kb.name, current.generation, current.pinned) if current else {}
    after = store.read_files(kb.name, target.generation, target.pinned)
    pinned = store.restore(kb.name, target.generation, target.pinned)
    number = (row.version or 0) + 1
    added = sum(1 for path in after if path not in before)
    changed = sum(1 for path, record in after.items() if path in before and before[path].file_hash != record.file_hash)
    version = KBVersion(
        number,
        target.generation,
        pinned,
        str(marker.get("started") or recorded_now()),
        recorded_now(_PRECISION),
        "rollback",
        added,
        changed,
        sum(1 for path in before if path not in after),
        by=str(marker.get("by", "")),
        rolled_back_to=target.number,
        fingerprints=target.fingerprints,
        commits=target.commits,
    )
    store.write_version(kb.name, number, version.started, target.generation, version.as_dict())
    settled = row.rolled_back(target.fingerprints, target.generation, number)
    store.write_state(kb.name, settled)
    prune(store, kb)
    return settled


def settled_state(store: Store, kb: KBConfig) -> dict[str, Any]:
    """The KB's state row, with a rollback a crash interrupted finished first (a sync's first step; it holds the
    lock)."""
    state = store.read_state(kb.name)
    return finish_rollback(store, kb, state) if KBState(state).rolling_back else state
