"""The writer lease on shared storage: one row in its own table, naming the sync that may write and its heartbeat.

A sync takes it by an update whose condition is that nobody holds it (or the holder's heartbeat is older than the
lease). LanceDB commits are atomic (conditional writes on object storage), so of two writers racing for it exactly
one update lands.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from ..records import SyncProgress
from .contract import SyncHolder
from .failures import store_failures
from .filters import sql_equals, sql_lapsed_lease
from .upkeep import compact_when_worth_it

if TYPE_CHECKING:
    from lancedb.table import LanceTable

    from .connection import Tables

log = logging.getLogger(__name__)
_LEASE_TABLE = "_lease"


@store_failures("be written (the writer lease)")
def take(tables: Tables, holder: SyncHolder, seconds: float) -> SyncHolder | None:
    """Take the lease (lapsing `seconds` after a crash) for `holder`, whose "id" must be unique; None when taken,
    else the live holder."""
    table = _table(tables)
    current = holder_of(tables, seconds)
    if current:  # waiting writers only read: every update is a commit, even one that changes nothing
        return current
    now = time.time()
    values = {"holder": holder.id, "info": json.dumps(holder.as_dict()), "heartbeat": now, "progress": "{}"}
    try:
        table.update(where=sql_lapsed_lease(now - seconds), values=values)
    except Exception as exc:  # a commit conflict with the winner: it holds the lease now
        log.debug("lease update lost a race: %s", exc)
    current = holder_of(tables, seconds)
    return None if current and current.id == holder.id else (current or SyncHolder("?"))


@store_failures("be written (the writer lease)")
def renew(tables: Tables, holder_id: str, progress: Mapping[str, SyncProgress]) -> bool:
    """Prove the holder is alive and say how far it is with each KB; False when it no longer holds the lease."""
    values = {"heartbeat": time.time(), "progress": json.dumps({kb: done.as_dict() for kb, done in progress.items()})}
    return _table(tables).update(where=sql_equals("holder", holder_id), values=values).rows_updated > 0


@store_failures("be written (releasing the writer lease)")
def release(tables: Tables, holder_id: str) -> None:
    table = _table(tables)
    table.update(where=sql_equals("holder", holder_id), values={"holder": "", "info": "{}", "progress": "{}"})
    compact_when_worth_it(table, unindexed=0)  # each heartbeat rewrote the row


@store_failures("be read (the writer lease)")
def holder_of(tables: Tables, seconds: float) -> SyncHolder | None:
    """The live holder's description (with its progress), or None when nobody holds the lease."""
    table = tables.table(_LEASE_TABLE)
    if table is None:
        return None
    # A lease is only worth reading fresh (lancedb leaves checkout_latest unannotated: --strict flags the call).
    table.checkout_latest()  # type: ignore[no-untyped-call, unused-ignore]
    rows = table.to_arrow().to_pylist()
    live = [r for r in rows if r["holder"] and r["heartbeat"] >= time.time() - seconds]
    if not live:
        return None
    return SyncHolder.from_dict({**json.loads(live[0]["info"]), "progress": json.loads(live[0]["progress"] or "{}")})


def _table(tables: Tables) -> LanceTable:
    """The lease table, created once with its one row (a creation is atomic too)."""
    return tables.created(
        _LEASE_TABLE,
        data=pa.table({"name": ["writer"], "holder": [""], "info": ["{}"], "heartbeat": [0.0], "progress": ["{}"]}),
    )
