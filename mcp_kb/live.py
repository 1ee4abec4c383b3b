"""Live knowledge bases: every sync trigger (start-up, timer, file change, the sync tool) goes
through one SyncRunner, so they share locking, error handling and status notifications."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread
from watchfiles import Change, awatch

from .app import App
from .settings import WATCH_POLL_SECONDS, KBConfig
from .errors import KBError, SyncCancelled
from .ingest.sources import Source, change_concerns, watch_folders
from .records import Progress, SyncReport
from .requests import SyncRequest
from .vocabulary import SYNC_WORK_KEPT
from .text import name_text

__all__ = ["LiveSync", "SyncRunner", "keep_in_sync"]  # what the core's API (mcp_kb.api) offers from this module

log = logging.getLogger(__name__)

Notify = Callable[[str], Awaitable[None]]  # called with a KB name after each of its syncs


def keep_in_sync(app: App, kb: str | None = None) -> None:
    """`mcp-kb watch`: sync KB (or every KB) now, then on each file change and on its schedule, until
    interrupted, whatever its [kb.sync] says about start-up and watching."""
    kbs = [
        k.model_copy(update={"sync": k.sync.model_copy(update={"on_start": True, "watch": True})})
        for k in app.config.select(kb)
    ]
    anyio.run(LiveSync(SyncRunner(app), kbs).run)


class SyncRunner:
    """Runs syncs in a worker thread (searches go on), then tells subscribers."""

    def __init__(self, app: App, notify: Notify | None = None):
        self.app = app
        self.notify = notify
        self.syncs_started = 0  # how many syncs were asked for (the debounce tests count them)
        # Set when the server stops: a running sync ends at its next progress report, keeping what it committed.
        self.stopping = threading.Event()
        self.syncing = 0  # this runner's syncs in their threads now
        # This process's syncs that wait for a running one queue here, as tasks: each waiting in a worker thread
        # (for the index's writer lock) would take the threads searches need, one per caller that asked.
        self._turn = anyio.Lock()

    async def sync(self, request: SyncRequest, progress: Progress | None = None) -> list[SyncReport]:
        """App.sync in a worker thread; raises KBError (the failure is also recorded in the KB's status). A request
        that waits queues behind this process's running sync without holding a thread; one that does not wait
        goes at once (and hears that a sync is running)."""
        self.syncs_started += 1
        names = [k.name for k in self.app.config.select(request.kb)]
        progress = self._stoppable(progress)
        try:
            if not request.wait:
                return await self._in_thread(request, progress)
            async with self._turn:
                return await self._in_thread(request, progress)
        finally:
            if self.notify:
                for name in names:
                    await self.notify(name)

    async def _in_thread(self, request: SyncRequest, progress: Progress) -> list[SyncReport]:
        self.syncing += 1
        try:
            return await anyio.to_thread.run_sync(lambda: self.app.sync(request, progress))
        finally:
            self.syncing -= 1

    def stop(self) -> None:
        """The server stops (its client closed stdin, a signal): a running sync ends at its next progress report,
        as after Ctrl-C, instead of holding the server until it is done."""
        self.stopping.set()

    def _stoppable(self, progress: Progress | None) -> Progress:
        def report(done: int, total: int, message: str) -> None:
            if self.stopping.is_set():
                raise SyncCancelled(f"sync stopped: the server is stopping; {SYNC_WORK_KEPT}")
            if progress:
                progress(done, total, message)

        return report

    async def sync_in_background(self, kb: str, reason: str) -> None:
        """A trigger's sync (it waits for a running one): failures are logged and shown in status;
        the next trigger tries again."""
        log.info("%s: sync (%s)", kb, reason)
        try:
            reports = await self.sync(SyncRequest(kb=kb))
            log.info("%s", reports[0].summary())
        except KBError as exc:
            self.app.log_problem(f"{kb}: sync ({reason}) failed", exc)
        except Exception:
            log.exception("%s: sync (%s) failed", kb, reason)


_WATCHER_WAKE_MS = 300  # the file watcher's thread wakes this often to see whether the server stops


class LiveSync:
    """Start-up, scheduled and file-change syncs for the KBs that ask for them, and the syncs pushes ask for (a KB
    with a repository that takes webhooks): each KB's requests fold into one more sync while one runs."""

    def __init__(self, runner: SyncRunner, kbs: list[KBConfig]):
        self.runner = runner
        self.kbs = kbs
        self._pending: dict[str, anyio.Event] = {}
        self._reasons: dict[str, set[str]] = {}

    async def run(self, triggers: bool = True) -> None:
        """Run every configured trigger (`triggers` False: none, only the syncs `request` asks for: a server's
        worker process, whose lead runs the triggers) until cancelled."""
        async with anyio.create_task_group() as group:
            for kb in self.kbs:
                if (kb.sync.has_triggers and triggers) or kb.pushed_repos:
                    group.start_soon(self._worker, kb)
                if not triggers:
                    continue
                sources = self.runner.app.sources(kb)
                folders = watch_folders(sources)
                if kb.sync.on_start:
                    self.request(kb.name, "start-up")
                if kb.sync.interval or (kb.sync.watch and any(not source.watch_folders() for source in sources)):
                    group.start_soon(self._every, kb)
                if kb.sync.watch and folders:
                    group.start_soon(self._watch, kb, sources, folders)

    def request(self, kb: str, reason: str) -> None:
        """Ask for a sync of `kb`; requests made while one runs fold into one more sync."""
        self._reasons.setdefault(kb, set()).add(reason)
        self._pending.setdefault(kb, anyio.Event()).set()

    async def _worker(self, kb: KBConfig) -> None:
        while True:
            await self._pending.setdefault(kb.name, anyio.Event()).wait()
            self._pending[kb.name] = anyio.Event()  # requests during this sync set the next round's event
            reasons = ", ".join(sorted(self._reasons.pop(kb.name, {"request"})))
            await self.runner.sync_in_background(kb.name, reasons)

    async def _every(self, kb: KBConfig) -> None:
        while True:
            await anyio.sleep(kb.sync.asks_again_every or WATCH_POLL_SECONDS)
            self.request(kb.name, "schedule")

    async def _watch(self, kb: KBConfig, sources: list[Source], folders: list[Path]) -> None:
        roots = [str(folder) for folder in folders]

        def relevant(_change: Change, path: str) -> bool:
            return change_concerns(sources, Path(path))

        quiet_ms = max(50, math.ceil(kb.sync.debounce * 1000))
        try:
            # watchfiles yields once no event came for `step` ms (our debounce), or after `debounce` ms
            # of continuous events, so a burst of saves becomes one sync.
            # rust_timeout: how long a stopping server waits for the watcher's thread (watchfiles' default: 5 s).
            async for _changes in awatch(
                *roots,
                watch_filter=relevant,
                step=quiet_ms,
                debounce=max(10 * quiet_ms, 5000),
                recursive=True,
                rust_timeout=_WATCHER_WAKE_MS,
            ):
                self.request(kb.name, "file change")
        except FileNotFoundError as exc:
            log.warning("%s: cannot watch %s: %s; file-change syncs are off", kb.name, roots, exc)
        except UnicodeEncodeError:  # watchfiles takes only UTF-8 paths: a folder named in other bytes is not one
            log.warning(
                "%s: cannot watch %s: its path is not UTF-8 text; file-change syncs are off (syncs at start "
                "and by `mcp-kb sync` still run; rename the folder to have them)",
                kb.name,
                [name_text(root) for root in roots],
            )
