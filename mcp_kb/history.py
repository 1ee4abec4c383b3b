"""A KB's versions: each sync that changes a KB records one (a rebuild and a rollback too), pairing the chunk
table, manifest and reading table as the sync left them (index/versions.py keeps them, and keeps what they pin
past compaction). A version can be tagged, read `as_of` (search, read, browse) and rolled back to.

Which versions are committed is the KB's state row's business: its `version` is the current one, written in the
same commit as everything else a sync ends with, so a record a killed sync wrote before it is never listed and
its number is written over. A rollback restores the tables in place under a marker in the state row: while it
is there, readers read the version current before it (whole), and the next writer finishes it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import SyncBusyError, VersionError
from .index.contract import Store
from .index.state import check_writable, sync_lock
from .records import KBState, KBVersion, Pinned, SyncReport, recorded_now
from .settings import KBConfig
from .text import is_number

# A letter first: never a version number or a date. \Z, not $: "$" also matches before a final newline ("a\n").
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}\Z")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].*)?\Z")  # ASCII digits: "\d" takes "٣" and "３"
MAX_TAGS = 100  # per KB: a sync's caller may tag, and a tag keeps its version (and its storage) until removed
_PRECISION = "milliseconds"  # of when a version was made: two syncs a second apart are two times to ask as of
TAG_HELP = "a letter, then up to 63 letters, digits, '.', '_' or '-'"


@dataclass(frozen=True)
class Edition:
    """What a read reads of a KB: a generation, at pinned table versions (None: as they are now), and which version
    that is (None: before the KB recorded one). `earlier`: the caller asked for it (`as_of`)."""

    generation: str | None
    at: Pinned | None = None
    version: KBVersion | None = None
    earlier: bool = False

    @property
    def asked_for(self) -> KBVersion | None:
        """The version the caller asked for (`as_of`); None when the current one is read."""
        return self.version if self.earlier else None

    @property
    def synced(self) -> str:
        """The generation read, asked by a caller that made sure there is one (a KB no sync finished has none)."""
        if self.generation is None:
            raise ValueError("a KB no sync finished has no generation to read")
        return self.generation


# ---- reading the history ----------------------------------------------------------------------


def versions(store: Store, kb: str) -> list[KBVersion]:
    """The KB's committed versions, oldest first."""
    current = store.read_state(kb).version
    if current is None:
        return []
    return [version for version in store.read_versions(kb) if version.number <= current]


def edition(store: Store, kb: str, as_of: str | None = None) -> Edition:
    """What a read of the KB reads: `as_of` that version (a number, a tag or a time), else now; while a
    rollback is under way, the version current before it (its tables are being restored in place)."""
    if as_of:
        version = resolve(store, kb, as_of)
        return Edition(version.generation, version.pinned, version, earlier=True)
    state = store.read_state(kb)
    if state.rolling_back:
        current = _by_number(store, kb, state.version)
        if current is not None:
            return Edition(current.generation, current.pinned, current)
    return Edition(state.generation)


def resolve(store: Store, kb: str, as_of: str) -> KBVersion:
    """The version `as_of` names: a number, a tag, or a time (the version current then). One clear line when there is
    none, naming what there is."""
    kept = versions(store, kb)
    if not kept:
        raise VersionError(
            f"knowledge base {kb!r} has no recorded versions yet (each sync that changes it records one)"
        )
    text = as_of.strip()
    if is_number(text):
        return _numbered(kb, kept, int(text))
    if _DATE.match(text):
        return _current_at(kb, kept, _moment(text), text)
    tagged = [version for version in kept if text in version.tags]
    if not tagged:
        tags = sorted({tag for version in kept for tag in version.tags})
        known = f"its tags: {', '.join(tags)}" if tags else "it has no tags"
        raise VersionError(
            f"knowledge base {kb!r} has no tag {text[:64]!r} ({known}); as_of takes a version number, a tag or a time"
        )
    return tagged[-1]


def _numbered(kb: str, kept: list[KBVersion], number: int) -> KBVersion:
    for version in kept:
        if version.number == number:
            return version
    newest = kept[-1].number
    if number > newest:
        raise VersionError(f"knowledge base {kb!r} has no version {number} yet (the newest is {newest})")
    raise VersionError(f"version {number} of knowledge base {kb!r} is no longer kept; {_oldest(kept)}")


def _current_at(kb: str, kept: list[KBVersion], moment: datetime, asked: str) -> KBVersion:
    before = [version for version in kept if version.finished_at <= moment]
    if not before:
        raise VersionError(f"knowledge base {kb!r} kept no version as old as {asked}; {_oldest(kept)}")
    return before[-1]


def _oldest(kept: list[KBVersion]) -> str:
    return f"the oldest kept is version {kept[0].number} of {kept[0].finished}"


def _moment(text: str) -> datetime:
    """A date (its end: the version current that day) or a time; without a zone, UTC."""
    try:
        moment = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        raise VersionError(f"{text[:64]!r} is not a time as_of understands (2026-11-30 or 2026-11-30T14:00Z)") from None
    if "T" not in text and " " not in text:
        moment += timedelta(days=1, microseconds=-1)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _by_number(store: Store, kb: str, number: int | None) -> KBVersion | None:
    return next((v for v in store.read_versions(kb) if v.number == number), None)


# ---- recording versions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Synced:
    """What a sync wrote, as its version records it: its report, the generation written and the fingerprints it was
    built with, when it started, who asked for it, the tag asked for (checked by check_tag before the sync began),
    and its kind ("sync"; "unfinished" for what a sync that stopped kept)."""

    report: SyncReport
    generation: str
    fingerprints: dict[str, Any]
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
        tagged = _by_number(store, kb, current)
        if tag is not None and tagged is not None:
            _rewrite(store, kb, tagged, (*tagged.tags, tag))
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


# ---- tags ------------------------------------------------------------------------------------


def tag(store: Store, kb: KBConfig, name: str, number: int | None = None, remove: bool = False) -> KBVersion:
    """Tag a version (the current one by default) or remove a tag; a tag keeps its version past retention."""
    with _alone(store, kb.name, "tag"):
        kept = versions(store, kb.name)
        if not kept:
            raise VersionError(f"knowledge base {kb.name!r} has no versions to tag yet; sync it first")
        if remove:
            tagged = [version for version in kept if name in version.tags]
            if not tagged:
                raise VersionError(f"knowledge base {kb.name!r} has no tag {name[:64]!r}; nothing was changed")
            return _rewrite(store, kb.name, tagged[-1], tuple(t for t in tagged[-1].tags if t != name))
        _free_tag(store, kb.name, name)
        version = kept[-1] if number is None else _numbered(kb.name, kept, number)
        return _rewrite(store, kb.name, version, (*version.tags, name))


def check_tag(store: Store, kb: str, name: str | None) -> None:
    """A sync's `tag`, refused before the sync does any work (None: no tag asked)."""
    if name is not None:
        _free_tag(store, kb, name)


def _free_tag(store: Store, kb: str, name: str) -> None:
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


def _rewrite(store: Store, kb: str, version: KBVersion, tags: tuple[str, ...]) -> KBVersion:
    changed = KBVersion(**{**version.__dict__, "tags": tags})
    store.write_version(kb, changed)
    return changed


# ---- rollback --------------------------------------------------------------------------------


def rollback(store: Store, kb: KBConfig, to: str, by: str = "") -> KBVersion:
    """Make version `to` (a number, a tag or a time) current again, as a new version: the history stays. Refused
    at once while a sync runs. Killed at any point, readers keep reading the version current before it, and the
    next sync or rollback finishes it first."""
    with _alone(store, kb.name, "roll back"):
        state = settled_state(store, kb)
        target = resolve(store, kb.name, to)
        if target.number == state.version:
            raise VersionError(
                f"version {target.number} of knowledge base {kb.name!r} is already the current one; nothing was changed"
            )
        state = state.rolling_back_to(target.number, recorded_now(), by)
        store.write_state(kb.name, state)
        finish_rollback(store, kb, state)
        return versions(store, kb.name)[-1]


@contextlib.contextmanager
def _alone(store: Store, kb: str, what: str) -> Iterator[None]:
    """The index's writer lock for a change to the KB's history, refused at once while a sync holds it."""
    check_writable(store)
    try:
        with sync_lock(store, [kb], wait=False):
            yield
    except SyncBusyError as busy:
        raise SyncBusyError(busy.running, f"{what} when it has ended; nothing was changed") from None


def finish_rollback(store: Store, kb: KBConfig, row: KBState) -> KBState:
    """Carry out the rollback the state row's marker names (again, after a crash: restoring gives the same
    tables), commit it as a new version and clear the marker; the new state row. The caller holds the lock."""
    marker = row.rolling_back
    target = _by_number(store, kb.name, marker.to) if marker else None
    if marker is None or target is None:  # its record is gone (by hand): nothing was restored a sync would not redo
        store.write_state(kb.name, row.without_rollback())
        return row.without_rollback()
    current = _by_number(store, kb.name, row.version)
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
