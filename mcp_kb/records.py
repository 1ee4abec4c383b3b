"""What the core returns to its faces, as frozen records instead of dictionaries: a file it could not
index (Problem), a KB's state row read once (KBState), what a KB holds (KBSummary), the model its index was
built with (IndexedModel), its recent syncs (SyncBrief), its versions (KBVersion, each pinning table versions:
Pinned), its search figures (SearchFigures) and latest health check (HealthCheck), and its status at a glance or in full (Glance, KBStatus). Faces read their attributes,
never keys; `as_dict()` is their JSON form (the status and metrics resources, `--json`, the page's status poll,
the saved files), one shape everywhere, and `from_dict` reads a saved one back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, UTC
from typing import Any, ClassVar, Self

from .vocabulary import files_indexed

__all__ = [
    "Pending",
    "NEVER_SYNCED",
    "HealthCheck",
    "KBStats",
    "KBStatus",
    "KBVersion",
    "Progress",
    "SearchFigures",
    "SyncBrief",
    "SyncProgress",
    "SyncReport",
    "pace",
    "readable_time",
    "recorded_now",
]  # what the core's API (mcp_kb.api) offers from this module

NEVER_SYNCED = "never synced"  # the outcome of a KB no sync has finished for
_SYNCS_KEPT = 20  # recent syncs a KB's state lists (the admin page shows them)
_ERROR_CHARS_KEPT = 500  # of a failed sync's error, in that list


def recorded_now(precision: str = "seconds") -> str:
    """The time a record, a log line or a task carries, one way everywhere: RFC 3339 in UTC ("…T19:14:02Z";
    `precision` "milliseconds" for log lines and tasks), never this machine's local time."""
    return recorded_at(datetime.now(UTC), precision)


def recorded_hour() -> str:
    """The hour now is in, as records carry it ("…T19:00Z"): search figures are kept by the hour."""
    return recorded_at(datetime.now(UTC).replace(minute=0, second=0, microsecond=0), "minutes")


def readable_time(recorded: str, short: bool = False) -> str:
    """A recorded time as a person reads it, to the minute: "2026-12-01 19:14 UTC"; `short`, a chart's label:
    "12-01 19:14" ("" for "": a face says what no time means to it)."""
    if not recorded:
        return ""
    shown = recorded[:16].replace("T", " ")
    return shown[5:] if short else f"{shown} UTC"


def seconds_of(recorded: str) -> float | None:
    """A time as records carry it, in seconds since the epoch (None: "" or not such a time)."""
    try:
        return datetime.fromisoformat(recorded).timestamp()
    except ValueError:
        return None


def recorded_at(when: datetime | int, precision: str = "seconds") -> str:
    """A time (a datetime, or nanoseconds since the epoch: a file's modification time) as records carry it; "" for
    one no calendar holds (a file system can stamp a file in the year 11476)."""
    try:
        moment = when if isinstance(when, datetime) else datetime.fromtimestamp(when / 1e9, UTC)
        return moment.astimezone(UTC).isoformat(timespec=precision).replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return ""


class _Saved:
    """A record kept as JSON (in the state, a note, a file): `as_dict()` is its one JSON form, and `from_dict` reads
    a saved one back with the fields it knows: an older file's missing ones keep their defaults, a newer one's extra
    ones are left out."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # as the dataclasses module declares it

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> Self:
        return cls(**cls._known(saved))

    @classmethod
    def _known(cls, saved: Mapping[str, Any]) -> dict[str, Any]:  # json.loads of a saved record, for cls(**...)
        names = {item.name for item in fields(cls)}
        return {name: value for name, value in saved.items() if name in names}

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# How long work says how far it is: (done, total, what), e.g. files read of files to read, "scanning".
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class SyncProgress(_Saved):
    """How far the running sync of one KB is: written after each batch (index/state.py keeps it), read by
    searches, status and the admin page. All zero before the sync's first batch."""

    done: int = 0  # files indexed, of `total` to index
    total: int = 0
    chunks: int = 0  # chunks embedded so far
    written: int = 0  # new and changed files committed so far
    started: float = 0.0  # when the sync started (epoch seconds)

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> SyncProgress:
        return cls(
            int(saved.get("done", 0)),
            int(saved.get("total", 0)),
            int(saved.get("chunks", 0)),
            int(saved.get("written", 0)),
            float(saved.get("started", 0.0)),
        )

    @property
    def counted(self) -> bool:
        """Whether the sync has said how far it is yet (it has after its first batch)."""
        return self != SyncProgress()

    def text(self, now: float | None = None) -> str:
        """How far, said one way on every face: "3 of 10 files indexed, 120 chunks embedded, 1.5 files/s, about
        5 s left"; rate and time left by the sync's own start, so a first look already says them."""
        text = files_indexed(self.done, self.total)
        if self.chunks:
            text += f", {self.chunks} chunks embedded"
        if self.started:
            text += pace(self.done, self.total, (time.time() if now is None else now) - self.started)
        return text


def pace(done: int, total: int, elapsed: float) -> str:
    """How fast files go and how long the rest will take, as a sync's progress words it: ", 1.5 files/s, about
    5 s left" ("" before the first file)."""
    if not done or elapsed <= 0:
        return ""
    rate = done / elapsed
    left = f", about {math.ceil((total - done) / rate)} s left" if total > done else ""
    return f", {rate:.1f} files/s{left}"


@dataclass(frozen=True)
class Problem:
    """A file (or page) a sync or a check did not index, and why, in words that name the fix."""

    path: str
    reason: str


@dataclass(frozen=True)
class IndexedModel(_Saved):
    """The embedding model an index's vectors were made with, as its state records it (the model's fingerprint)."""

    name: str = ""
    dimension: int = 0
    file_hash: str = ""  # sha256 of the model's weights, "" when unknown


@dataclass(frozen=True)
class SyncBrief(_Saved):
    """One of a KB's recent syncs in brief (the state row keeps the last few): when and how it ended, what it
    changed."""

    started_at: str = ""
    finished_at: str = ""
    outcome: str = ""
    error: str = ""  # its beginning only (the last sync's record has it whole)
    rebuilt: str = ""  # why it rebuilt the KB from scratch ("" when it did not)
    added: int = 0  # files
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    seconds: float | None = None  # how long it took (None: it ended before its time was taken)


def commits_of(revisions: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The commit of each repository among a scan's or the state's revisions, by its name."""
    return {key: read["commit"] for key, read in revisions.items() if "commit" in read}


# The state row's own keys; every other key of it is a fingerprint (what the index was built with).
_STATE_KEYS = frozenset(
    (
        "generation",
        "complete",
        "building",
        "last_sync",
        "recent_syncs",
        "confirmed_at",
        "version",
        "revisions",
        "owner",
        "rolling_back",
    )
)


@dataclass(frozen=True)
class Building:
    """A rebuild in progress beside the active generation: its generation and the fingerprints it is built with."""

    generation: str
    fingerprints: dict[str, object]  # JSON values: the state row's


@dataclass(frozen=True)
class Rollback:
    """A rollback under way: its target version `to`, when it `started` and who asked for it (`by`)."""

    to: int
    started: str
    by: str


@dataclass(frozen=True)
class LastSync:
    """The last sync's record in full: when it ran, how it ended, its error and its report."""

    started_at: str
    finished_at: str
    outcome: str
    error: str
    report: SyncReport

    @staticmethod
    def from_dict(saved: Mapping[str, Any]) -> LastSync:
        return LastSync(
            str(saved.get("started_at", "")),
            str(saved.get("finished_at", "")),
            str(saved.get("outcome", NEVER_SYNCED)),
            str(saved.get("error", "")),
            SyncReport.from_dict(saved.get("report", {})),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "outcome": self.outcome,
            "error": self.error,
            "report": self.report.as_dict(),
        }


@dataclass(frozen=True)
class KBState:
    """A KB's state row (index/state_table.py keeps it as JSON; `from_dict` and `as_dict` are that form): the active
    generation, the fingerprints it was built with (the model, chunking and other settings a change of which
    rebuilds), a rebuild in progress beside it, and the record of the last syncs."""

    fingerprints: dict[str, object] = field(default_factory=dict)  # JSON values: what the index was built with
    # The active generation; "" for an index made before generations existed, None before any sync.
    generation: str | None = None
    filled: bool = False  # a finished sync filled the active generation (saved as "complete")
    building: Building | None = None
    last_sync: LastSync | None = None  # None before any sync ended
    recent_syncs: tuple[SyncBrief, ...] = ()  # oldest first (a sync appends its own)
    # When the last sync that read every source (none unreadable: a site down, a folder that could not be opened)
    # ended well: each document the index holds was as its source had it then ("" before one).
    confirmed_at: str = ""
    version: int | None = None  # the current version (history.py), None before one: the write that sets it commits it
    # What the sources had read for the index as it stands (a repository's commit and scope), by source key; empty
    # once a sync that may change it has begun (a crash then leaves files no commit describes).
    revisions: dict[str, dict[str, str]] = field(default_factory=dict)
    owner: str = ""  # the kb.toml whose sync built this KB in the default index ("" when unknown)
    rolling_back: Rollback | None = None

    @staticmethod
    def from_dict(row: Mapping[str, Any]) -> KBState:
        """The record of a saved row ({} before the KB's first sync)."""
        building, rolling_back = row.get("building") or {}, row.get("rolling_back")
        revisions, version = row.get("revisions"), row.get("version")
        generation = row.get("generation")
        return KBState(
            fingerprints={key: value for key, value in row.items() if key not in _STATE_KEYS},
            generation=str(generation) if "generation" in row else ("" if "model" in row else None),
            filled=bool(row.get("complete")),
            building=(
                Building(str(building["generation"]), dict(building.get("fingerprints") or {}))
                if "generation" in building
                else None
            ),
            last_sync=LastSync.from_dict(row["last_sync"]) if "last_sync" in row else None,
            recent_syncs=tuple(SyncBrief.from_dict(brief) for brief in row.get("recent_syncs", [])),
            confirmed_at=str(row.get("confirmed_at", "")),
            version=version if isinstance(version, int) else None,
            revisions=revisions if isinstance(revisions, dict) else {},
            owner=str(row.get("owner", "")),
            rolling_back=(
                Rollback(int(rolling_back["to"]), str(rolling_back.get("started", "")), str(rolling_back.get("by", "")))
                if isinstance(rolling_back, dict)
                else None
            ),
        )

    def as_dict(self) -> dict[str, object]:
        """The saved row: the fingerprints beside the state's own keys (those it has)."""
        row: dict[str, object] = {**self.fingerprints}
        row.update(
            {
                "generation": self.generation,
                "complete": self.filled or None,
                "building": (
                    {"generation": self.building.generation, "fingerprints": self.building.fingerprints}
                    if self.building
                    else None
                ),
                "last_sync": self.last_sync.as_dict() if self.last_sync else None,
                "recent_syncs": [brief.as_dict() for brief in self.recent_syncs] or None,
                "confirmed_at": self.confirmed_at or None,
                "version": self.version,
                "revisions": self.revisions or None,
                "owner": self.owner or None,
                "rolling_back": asdict(self.rolling_back) if self.rolling_back else None,
            }
        )
        return {key: value for key, value in row.items() if value is not None}

    @staticmethod
    def active(fingerprints: Mapping[str, object], generation: str, complete: bool = False) -> KBState:
        """The row of a generation searches read, built with `fingerprints` (`complete`: a finished sync's)."""
        return KBState(dict(fingerprints), generation, complete)

    def building_beside(self, generation: str, fingerprints: Mapping[str, object]) -> KBState:
        """This row with a rebuild started beside the active generation."""
        return replace(self, building=Building(generation, dict(fingerprints)))

    @property
    def built(self) -> bool:
        """Whether a sync ever recorded what the index is built with (not before the first sync)."""
        return "model" in self.fingerprints

    def fingerprint(self, key: str) -> object:
        """What the index was built with, for one fingerprint (`model`, `chunking`, ...)."""
        return self.fingerprints.get(key)

    def ended(
        self,
        started: str,
        outcome: str,
        report: SyncReport,
        error: str = "",
        confirmed: bool = False,
    ) -> KBState:
        """This row with the record of a sync that ended: the last one in full, the recent ones in brief, and when the
        index was last `confirmed` (this sync, when it read every source: none was unreadable)."""
        finished = recorded_now()
        brief = SyncBrief(
            started,
            finished,
            outcome,
            error[:_ERROR_CHARS_KEPT],
            report.rebuilt,
            report.files_added,
            report.files_changed,
            report.files_deleted,
            report.files_unchanged,
            report.files_failed,
            report.chunks_embedded,
            report.chunks_reused,
            report.seconds.get("total"),
        )
        return replace(
            self,
            last_sync=LastSync(started, finished, outcome, error, report),
            recent_syncs=(*self.recent_syncs, brief)[-_SYNCS_KEPT:],
            confirmed_at=finished if confirmed else self.confirmed_at,
        )

    def synced(  # what a sync's final write commits
        self,
        fingerprints: Mapping[str, object],
        generation: str,
        version: int,
        revisions: Mapping[str, Mapping[str, str]],
        owner: str,
    ) -> KBState:
        """The row a sync's final write makes of this one (which has its end recorded): `generation` active and
        complete, built with `fingerprints`, `version` current, vouched for by the `revisions` its sources read,
        built by the project of kb.toml `owner` ("" for an index named on purpose)."""
        return replace(
            KBState.active(fingerprints, generation, complete=True),
            last_sync=self.last_sync,
            recent_syncs=self.recent_syncs,
            confirmed_at=self.confirmed_at,
            version=version,
            revisions={key: dict(read) for key, read in revisions.items()},
            owner=owner,
        )

    @property
    def model(self) -> dict[str, object] | None:
        """The model's fingerprint as saved: a sync and a search compare it whole with the model's own."""
        model = self.fingerprints.get("model")
        return model if isinstance(model, dict) else None

    @property
    def indexed_model(self) -> IndexedModel | None:
        """The model the index was built with (None before any sync)."""
        return IndexedModel.from_dict(self.model) if self.model is not None else None

    @property
    def last_report(self) -> SyncReport:
        """The last sync's report (an empty one before any sync)."""
        return self.last_sync.report if self.last_sync else SyncReport("")

    @property
    def finished_at(self) -> str | None:
        """When the last sync ended (None before any)."""
        return self.last_sync.finished_at if self.last_sync else None

    @property
    def last_error(self) -> str:
        return self.last_sync.error if self.last_sync else ""

    @property
    def outcome(self) -> str:
        return self.last_sync.outcome if self.last_sync else NEVER_SYNCED

    @property
    def complete(self) -> bool:
        """Whether the active generation holds a finished sync (not a first sync still filling it)."""
        return self.filled or self.outcome == "ok"

    def at_version(self, version: int) -> KBState:
        """This row with `version` current (committed by writing it)."""
        return replace(self, version=version)

    @property
    def commits(self) -> dict[str, str]:
        """The commit each repository's files are indexed at, by its name."""
        return commits_of(self.revisions)

    def owned_by_another(self, owner: str) -> str:
        """The other project's kb.toml, when this KB in the default index was built by it and not by `owner`."""
        return self.owner if owner and self.owner and self.owner != owner else ""

    def owned_by(self, owner: str) -> KBState:
        """This row naming the project that built the KB."""
        return replace(self, owner=owner)

    def without_revisions(self) -> KBState:
        """This row with no commit vouching for the index: the next scan compares whole trees."""
        return replace(self, revisions={})

    def rolling_back_to(self, number: int, started: str, by: str) -> KBState:
        """This row with a rollback to version `number` under way."""
        return replace(self, rolling_back=Rollback(number, started, by))

    def rolled_back(self, fingerprints: Mapping[str, object], generation: str, version: int) -> KBState:
        """This row with a rollback done: that version's generation and settings active (fingerprints it lacks are
        kept), `version` current, and no commit vouching for the index."""
        return replace(
            self,
            fingerprints={**self.fingerprints, **fingerprints},
            generation=generation,
            filled=True,
            version=version,
            revisions={},
            rolling_back=None,
        )

    def without_rollback(self) -> KBState:
        """This row with a rollback that cannot be carried out (its version's record is gone) let go."""
        return replace(self, rolling_back=None)


@dataclass(frozen=True)
class Pinned:
    """The table versions one version of a KB holds (index/versions.py keeps them): its generation's chunk table, manifest
    and reading table (None: the generation has none) as the sync that recorded it left them."""

    chunks: int
    files: int
    reading: int | None

    def as_dict(self) -> dict[str, int | None]:
        return {"chunks": self.chunks, "files": self.files, "reading": self.reading}

    @staticmethod
    def from_dict(saved: Mapping[str, Any]) -> Pinned:
        reading = saved.get("reading")
        return Pinned(int(saved["chunks"]), int(saved["files"]), None if reading is None else int(reading))


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
    fingerprints: dict[str, object] = field(
        default_factory=dict
    )  # what its tables were built with (a rollback restores them)
    commits: dict[str, str] = field(default_factory=dict)  # its repositories' commits, by name (`[[kb.repos]]`)

    def saved(self) -> dict[str, object]:
        """The saved form (index/versions.py keeps it as JSON; `from_dict` reads it back): the JSON form and the
        tables the version was built in."""
        return {
            **self.as_dict(),
            "generation": self.generation,
            "pinned": self.pinned.as_dict(),
            "fingerprints": self.fingerprints,
        }

    def as_dict(self) -> dict[str, object]:
        """The JSON form, as every face shows a version (`mcp-kb versions --json`, the admin page)."""
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
    def from_dict(saved: Mapping[str, Any]) -> KBVersion:
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


@dataclass(frozen=True)
class KBSummary(_Saved):
    """What a KB holds as of its last finished sync, for tool descriptions and the glance (all zero before one)."""

    documents: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # documents by kind ("md", "web page"), most first
    chunks: int = 0
    titles: tuple[str, ...] = ()  # a few of its documents' titles

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> KBSummary:
        return cls(**{**cls._known(saved), "titles": tuple(saved.get("titles", ()))})

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "titles": list(self.titles)}


@dataclass(frozen=True)
class HealthCheck(_Saved):
    """A KB's latest label-free self-check: how often a query made from a chunk found its document in the
    top k, per mode."""

    checked_at: str = ""  # ISO 8601, UTC
    k: int = 0
    queries: int = 0
    hit_rate: dict[str, float] = field(default_factory=dict)  # by mode


@dataclass(frozen=True)
class Pending(_Saved):
    """What a sync of a KB would do now, counted by listing and stat (no file hashed or parsed): files it would
    add, read again (their size or modification time moved; a sync may then find their bytes unchanged) and
    delete, and when that was counted (ISO 8601, UTC)."""

    added: int = 0
    changed: int = 0
    deleted: int = 0
    counted_at: str = ""

    @property
    def behind(self) -> bool:
        return bool(self.added or self.changed or self.deleted)

    def text(self) -> str:
        """`3 added, 1 changed, 0 deleted since the last sync`, or that nothing is."""
        if not self.behind:
            return "no file added, changed or deleted since the last sync"
        return f"{self.added} added, {self.changed} changed, {self.deleted} deleted since the last sync"


@dataclass(frozen=True)
class Glance:
    """A KB's status without reading its file list or counting rows: contents as of the last good sync,
    the last sync's outcome, a running sync's progress, health."""

    name: str
    description: str
    tool: str
    files: int
    chunks: int
    sync_running: bool
    progress: SyncProgress  # a running sync's (all zero when none runs)
    last_sync: str | None  # when the last sync finished (ISO 8601, UTC)
    last_outcome: str
    last_error: str
    seconds: float | None  # the last sync's duration
    failed_files: int
    model: IndexedModel | None
    # Why queries embedded here cannot search the index's vectors ("" when they can, or when this process has
    # loaded no model: a command such as `status` loads none and cannot tell what a server embeds with).
    query_model_differs: str
    index_state: str
    health: HealthCheck | None  # None: never checked
    commits: dict[str, str] = field(default_factory=dict)  # the commit each repository's files are indexed at
    # What a sync would do now (None: not counted: sources a listing cannot count, such as web sites and remote
    # repositories, a folder that is not here, or a KB never synced).
    pending: Pending | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "model": self.model.as_dict() if self.model else None,
            "pending": self.pending.as_dict() if self.pending else None,
            "health": self.health.as_dict() if self.health else {},
            "progress": self.progress.as_dict() if self.progress.counted else {},
        }


@dataclass(frozen=True)
class KBStatus(Glance):
    """The glance with counts read from the index itself, its version and the files that failed."""

    index_version: int | None = None
    generation: str | None = None
    failed: tuple[Problem, ...] = field(default=())


@dataclass(frozen=True)
class KBCheck:
    """What a sync of one KB would index (`mcp-kb check`), or why its sources cannot be read."""

    kb: str
    tool: str
    error: str = ""  # the sources cannot be read: nothing else is known
    files: int = 0
    by_type: dict[str, int] = field(default_factory=dict)  # files by suffix
    chunks: int = 0
    chunks_by_file: dict[str, int] = field(default_factory=dict)
    skipped: tuple[Problem, ...] = ()
    crawl: dict[str, int] = field(default_factory=dict)  # what reading web sources cost
    no_documents: str = ""  # why a sync would find no document, and what to check

    @property
    def crawl_requests(self) -> int:
        """The requests made to crawl its web sources (0: it has none)."""
        return self.crawl.get("requests", 0)

    def as_dict(self) -> dict[str, object]:
        if self.error:
            return {"kb": self.kb, "tool": self.tool, "error": self.error}
        shown = asdict(self)
        del shown["error"]
        if not self.crawl:
            del shown["crawl"]
        return shown


@dataclass(frozen=True)
class LastSyncFigures:
    """What the last sync of a KB cost."""

    finished_at: str | None
    chunks_embedded: int
    tokens_embedded: int
    seconds: dict[str, float]  # by stage, and "total"


@dataclass(frozen=True)
class StageLatency(_Saved):
    """One search stage's latency over the recent searches, in milliseconds."""

    count: int = 0
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0


@dataclass(frozen=True)
class SearchHour(_Saved):
    """One hour's searches of a KB (UTC): how many, how many found nothing or were degraded, their latency."""

    hour: str = ""  # "2024-05-01T14:00Z"
    searches: int = 0
    zero_results: int = 0
    degraded: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0


@dataclass(frozen=True)
class SearchFigures(_Saved):
    """A KB's searches as the process answering them counts them (metrics.py), and saves them for `mcp-kb stats`."""

    since: str = ""  # when the process started counting (ISO 8601, UTC)
    searches: int = 0
    cache_hit_rate: float = 0.0
    degraded_answers: int = 0
    zero_result_queries: int = 0
    query_embedding_tokens: int = 0
    rerank_calls: int = 0
    latency_ms: dict[str, StageLatency] = field(default_factory=dict)  # by stage, and "total"
    hourly: tuple[SearchHour, ...] = ()  # the last hours with searches, oldest first

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> SearchFigures:
        return cls(
            **{
                **cls._known(saved),
                "latency_ms": {
                    stage: StageLatency.from_dict(latency) for stage, latency in saved.get("latency_ms", {}).items()
                },
                "hourly": tuple(SearchHour.from_dict(hour) for hour in saved.get("hourly", ())),
            }
        )

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "hourly": [asdict(hour) for hour in self.hourly]}


@dataclass(frozen=True)
class KBStats:
    """A KB's figures (`mcp-kb stats`, the metrics resource): searches, the last sync, the latest health check."""

    name: str
    search: SearchFigures | None  # the last answering process's (None: none saved any)
    health: HealthCheck | None  # None: never checked
    last_sync: LastSyncFigures

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "search": self.search.as_dict() if self.search else {},
            "health": self.health.as_dict() if self.health else {},
            "last_sync": asdict(self.last_sync),
        }


@dataclass(frozen=True)
class SyncHistory:
    """A KB's recent syncs in brief (oldest first), and the last one's skipped files and source figures."""

    recent: tuple[SyncBrief, ...]
    skipped: list[Problem]
    crawl: dict[str, int]  # a web crawl's requests, 304s, robots skips


@dataclass
class SyncReport(_Saved):
    """The outcome of one KB's sync, shown by the CLI and returned by the sync tool."""

    kb: str
    rebuilt: str = ""  # why the KB was rebuilt from scratch, if it was
    files_added: int = 0
    files_changed: int = 0
    files_deleted: int = 0
    files_unchanged: int = 0
    files_failed: int = 0
    files_written: int = 0  # new and changed files committed so far (all of them once the sync ends)
    chunks_embedded: int = 0
    tokens_embedded: int = 0  # model tokens sent to the embedder
    pages_ocr: int = 0  # pages and images whose text was read by OCR
    worker_peak_mb: int = 0  # the most memory a parsing process held (resident)
    indexer_peak_mb: int = 0  # a Ray sync's: the most memory an indexer (its model, a batch's rows) held
    crawl: dict[str, int] = field(default_factory=dict)  # what reading the sources cost (web: requests, 304s, ...)
    commits: dict[str, str] = field(default_factory=dict)  # the commit each repository was synced at, by its name
    chunks_reused: int = 0
    chunks_deleted: int = 0
    chunks_total: int = 0
    failures: list[Problem] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    index_state: str = ""
    no_documents: str = ""  # why a KB that ends its sync with no document has none, and what to check

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> SyncReport:
        """A report as a sync saved it in the KB's state (fields a newer version added are left out)."""
        problems = {
            kind: [Problem(str(item.get("path", "")), str(item.get("reason", ""))) for item in saved.get(kind, [])]
            for kind in ("failures", "skipped")
        }
        return cls(**{"kb": "", **cls._known(saved), **problems})

    def summary(self) -> str:
        parts = [
            f"{self.kb}: {self.files_added} added, {self.files_changed} changed, "
            f"{self.files_deleted} deleted, {self.files_unchanged} unchanged, {self.files_failed} failed; "
            f"chunks {self.chunks_embedded} embedded, {self.chunks_reused} reused, "
            f"{self.chunks_deleted} deleted, {self.chunks_total} in index; "
            f"{self.seconds.get('total', 0.0):.1f}s"
            + (f"; {self.pages_ocr} pages read by OCR" if self.pages_ocr else "")
        ]
        if self.crawl:  # web sources: "163 requests, 12 downloaded, 151 not modified"
            parts.append(
                "  sources: " + ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in self.crawl.items())
            )
        if self.commits:
            parts.append("  commits: " + ", ".join(f"{name} {commit[:12]}" for name, commit in self.commits.items()))
        if self.rebuilt:
            parts.insert(0, f"{self.kb}: rebuilt from scratch: {self.rebuilt}")
        parts += [f"  failed {f.path}: {f.reason}" for f in self.failures]
        parts += [f"  {self.no_documents}"] if self.no_documents else []
        return "\n".join(parts)
