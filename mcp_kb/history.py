"""A KB's versions as its callers ask for them: each sync that changes a KB records one (a rebuild and a rollback
too: kept_versions.py, which syncs and rollbacks share), pairing the chunk table, manifest and reading table as the
sync left them (index/versions.py keeps them, and keeps what they pin past compaction). Here a version is read
`as_of` (search, read, browse), tagged and rolled back to.

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

from .errors import SyncBusyError, VersionError
from .index.contract import Store
from .index.state import check_writable, sync_lock
from .kept_versions import by_number, finish_rollback, free_tag, rewrite, settled_state, versions
from .records import KBVersion, Pinned, recorded_now
from .settings import KBConfig
from .text import is_number

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ].*)?\Z")  # ASCII digits: "\d" takes "٣" and "３"


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


def edition(store: Store, kb: str, as_of: str | None = None) -> Edition:
    """What a read of the KB reads: `as_of` that version (a number, a tag or a time), else now; while a
    rollback is under way, the version current before it (its tables are being restored in place)."""
    if as_of:
        version = resolve(store, kb, as_of)
        return Edition(version.generation, version.pinned, version, earlier=True)
    state = store.read_state(kb)
    if state.rolling_back:
        current = by_number(store, kb, state.version)
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
            return rewrite(store, kb.name, tagged[-1], tuple(t for t in tagged[-1].tags if t != name))
        free_tag(store, kb.name, name)
        version = kept[-1] if number is None else _numbered(kb.name, kept, number)
        return rewrite(store, kb.name, version, (*version.tags, name))


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
