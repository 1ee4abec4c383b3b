"""A KB's kept versions as a sync and a rollback both write them: a sync's new
version (or a tag on the current one), the versions forgotten (retention, a damaged generation), a tag name checked
before it is added, and a rollback a crash interrupted finished by the next writer (history.py starts rollbacks,
tags versions and reads the history; index/versions.py stores the records)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .errors import VersionError
from .index.contract import Store
from .records import KBState, KBVersion, SyncReport, recorded_now
from .settings import KBConfig

# A letter first: never a version number or a date. \Z, not $: "$" also matches before a final newline ("a\n").
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}\Z")
MAX_TAGS = 100  # per KB: a sync's caller may tag, and a tag keeps its version (and its storage) until removed
_PRECISION = "milliseconds"  # of when a version was made: two syncs a second apart are two times to ask as of
TAG_HELP = "a letter, then up to 63 letters, digits, '.', '_' or '-'"


def versions(store: Store, kb: str) -> list[KBVersion]:
    """The KB's committed versions, oldest first."""
    current = store.read_state(kb).version
    if current is None:
        return []
    return [version for version in store.read_versions(kb) if version.number <= current]


def by_number(store: Store, kb: str, number: int | None) -> KBVersion | None:
    return next((v for v in store.read_versions(kb) if v.number == number), None)


@dataclass(frozen=True)
class Synced:
    """What a sync wrote, as its version records it: its report, the generation written and the fingerprints it was
    built with, when it started, who asked for it, the tag asked for (checked by check_tag before the sync began),
    and its kind ("sync"; "unfinished" for what a sync that stopped kept)."""

    report: SyncReport
    generation: str
    fingerprints: dict[str, object]
    started: str
    by: str = ""
    tag: str | None = None
    kind: str = "sync"


def record(store: Store, kb: str, synced: Synced) -> int:
    """After a sync wrote its tables: a new version when it changed the KB (or the KB has none yet), with its tag.
    Returns the number the sync's final state write makes current, which commits it."""
    report, generation, started, tag = synced.report, synced.generation, synced.started, synced.tag
    current = store.read_state(kb).version
    changed = report.files_added or report.files_changed or report.files_deleted or report.rebuilt
    if current is not None and not changed:  # nothing new: a tag goes on the current version
        tagged = by_number(store, kb, current)
        if tag is not None and tagged is not None:
            rewrite(store, kb, tagged, (*tagged.tags, tag))
        return current
    number = (current or 0) + 1
    version = KBVersion(
        number,
        generation,
        store.pinned_now(kb, generation),
        started,
        recorded_now(_PRECISION),
        "rebuild" if report.rebuilt else synced.kind,
        report.files_added,
        report.files_changed,
        report.files_deleted,
        (tag,) if tag else (),
        synced.by,
        fingerprints=dict(synced.fingerprints),
        commits=dict(report.commits),
    )
    store.write_version(kb, version)
    return number


def forget_generation(store: Store, kb: str, generation: str) -> None:
    """Forget the versions of a generation whose tables are damaged or gone (a rebuild replaces it): nothing could
    read them, and the rebuild may then drop what is left of its tables."""
    store.forget_versions(
        kb,
        [version.number for version in store.read_versions(kb) if version.generation == generation],
    )


def prune(store: Store, kb: KBConfig) -> None:
    """Forget versions retention no longer keeps ([kb.history]), and records no state committed (a killed
    sync's); what they alone pinned goes at the next compaction (and their generations at the next sync)."""
    state = store.read_state(kb.name)
    records = store.read_versions(kb.name)
    kept = _kept(
        records,
        state.version,
        kb.history.keep,
        kb.history.keep_days,
        pending=state.rolling_back.to if state.rolling_back else None,
    )
    store.forget_versions(kb.name, [version.number for version in records if version.number not in kept])


def _kept(
    records: list[KBVersion],
    current: int | None,
    keep: int,
    keep_days: float,
    pending: int | None = None,
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
    changed = KBVersion(**{**version.__dict__, "tags": tags})
    store.write_version(kb, changed)
    return changed


def finish_rollback(store: Store, kb: KBConfig, row: KBState) -> KBState:
    """Carry out the rollback the state row's marker names (again, after a crash: restoring gives the same
    tables), commit it as a new version and clear the marker; the new state row. The caller holds the lock."""
    marker = row.rolling_back
    target = by_number(store, kb.name, marker.to) if marker else None
    if marker is None or target is None:  # its record is gone (by hand): nothing was restored a sync would not redo
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
        marker.started or recorded_now(),
        recorded_now(_PRECISION),
        "rollback",
        added,
        changed,
        sum(1 for path in before if path not in after),
        by=marker.by,
        rolled_back_to=target.number,
        fingerprints=target.fingerprints,
        commits=target.commits,
    )
    store.write_version(kb.name, version)
    settled = row.rolled_back(target.fingerprints, target.generation, number)
    store.write_state(kb.name, settled)
    prune(store, kb)
    return settled


def settled_state(store: Store, kb: KBConfig) -> KBState:
    """The KB's state row, with a rollback a crash interrupted finished first (a sync's first step; it holds the
    lock)."""
    state = store.read_state(kb.name)
    return finish_rollback(store, kb, state) if state.rolling_back else state
