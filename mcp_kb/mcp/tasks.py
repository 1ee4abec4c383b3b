"""Sync as a task: the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for 2026-era clients that
declare it.

Such a client's call of the sync tool returns a task at once; the sync runs in the server's task group, the
client polls `tasks/get` (status, how far the sync is, and at the end the tool's own result) and may
`tasks/cancel` it: the sync stops at its next progress report with what it committed kept, as after Ctrl-C.
Clients without the extension (and every 2025-era session: a task result cannot travel on that wire) get the
tool's answer as before.

A task is its caller's: another caller's task id reads exactly as an unknown one. Each caller holds at most
MAX_TASKS_PER_CALLER tasks (its oldest finished one goes to make room), the server runs at most MAX_WORKING, and
one caller at most MAX_WORKING_PER_CALLER syncs, tasks and tool calls alike (SyncShares), so one caller never
takes every place; a finished task is kept for TTL_MS.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolResult,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .guard import result_text
from ..api import (
    SYNC_TOOL,
    SYNC_WORK_KEPT,
    CallerView,
    Identity,
    KBError,
    Progress,
    SyncCancelled,
    SyncRequest,
    recorded_now,
)

log = logging.getLogger(__name__)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TTL_MS = 15 * 60 * 1000  # how long a finished task's result stays readable
POLL_INTERVAL_MS = 1000  # how often a client should ask (a sync reports after each batch of files)
MAX_TASKS_PER_CALLER = 64  # working and finished tasks a caller holds at once
MAX_WORKING = 16  # sync tasks working at once on this server (syncs of one storage run one at a time anyway)
MAX_WORKING_PER_CALLER = MAX_WORKING // 4  # a caller's share: three more callers at their share leave room

_running: ContextVar[SyncTask | None] = ContextVar("mcp_kb_sync_task", default=None)


def task_progress() -> Progress | None:
    """The progress report of the task this sync tool call runs as (None: an ordinary call)."""
    task = _running.get()
    return task.progress if task else None


@dataclass(eq=False)
class SyncTask:
    id: str
    owner: Identity
    created: str = field(default_factory=lambda: recorded_now("milliseconds"))
    updated: str = field(default_factory=lambda: recorded_now("milliseconds"))
    status: str = "working"  # working -> completed | failed | cancelled
    message: str = "starting"
    result: dict[str, object] | None = None  # the tool's result (completed)
    error: dict[str, object] | None = None  # a JSON-RPC error (failed)
    ended_at: float | None = None  # monotonic seconds, for the ttl
    cancel_asked: threading.Event = field(default_factory=threading.Event)
    scope: anyio.CancelScope | None = None  # its sync's, once started: a cancel ends a queued sync's wait

    def progress(self, done: int, total: int, message: str) -> None:
        """A sync's progress report (from its worker thread): a cancelled task's sync stops here."""
        if self.cancel_asked.is_set():
            raise SyncCancelled(f"sync cancelled by the client ({self.message}); {SYNC_WORK_KEPT}")
        self.message, self.updated = message, recorded_now("milliseconds")

    def end(
        self,
        status: str,
        result: dict[str, object] | None = None,
        error: dict[str, object] | None = None,
        message: str | None = None,
    ) -> None:
        self.status, self.result, self.error = status, result, error
        self.message = message or self.message
        self.updated, self.ended_at = recorded_now("milliseconds"), time.monotonic()

    def wire(self) -> dict[str, object]:
        """The task as tasks/get and the creating call return it."""
        shown: dict[str, object] = {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.message,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.result is not None:
            shown["result"] = self.result
        if self.error is not None:
            shown["error"] = self.error
        return shown


class TaskRefused(KBError):
    """No room for another task or sync; the message says why and what to do."""


def _yours_running(count: int) -> str:
    return (
        f"you have {count} syncs running or waiting, the most one caller may have at once; wait for one to "
        "end, or cancel one"
    )


class SyncShares:
    """The syncs each caller has asked for that have not ended, tool calls and tasks alike (a task's sync is a
    call of the tool): every sync waits in one queue, so one caller holds at most MAX_WORKING_PER_CALLER places
    in it and never keeps the others' syncs waiting behind its own."""

    def __init__(self) -> None:
        self._running: Counter[Identity] = Counter()

    @contextmanager
    def held(self, who: Identity) -> Iterator[None]:
        """A place for one sync of `who`; TaskRefused when the caller holds its share already."""
        if self._running[who] >= MAX_WORKING_PER_CALLER:
            raise TaskRefused(_yours_running(self._running[who]))
        self._running[who] += 1
        try:
            yield
        finally:
            self._running[who] -= 1
            if not self._running[who]:
                del self._running[who]


class TaskTable:
    """The tasks of every caller, bounded; a finished task goes when its ttl has passed."""

    def __init__(self) -> None:
        self._tasks: dict[str, SyncTask] = {}

    def open(self, owner: Identity) -> SyncTask:
        self._expire()
        working = [task for task in self._tasks.values() if task.status == "working"]
        if len(working) >= MAX_WORKING:
            raise TaskRefused(
                f"{len(working)} sync tasks are running on this server, the most it runs at once; "
                "wait for one to end (tasks/get) or cancel one (tasks/cancel)"
            )
        yours = sum(task.owner == owner for task in working)
        if yours >= MAX_WORKING_PER_CALLER:
            raise TaskRefused(_yours_running(yours))
        self._make_room(owner)
        task = SyncTask(secrets.token_urlsafe(16), owner)
        self._tasks[task.id] = task
        return task

    def _make_room(self, owner: Identity) -> None:
        """A caller at MAX_TASKS_PER_CALLER lets go of its oldest finished task (one that syncs after each edit
        would otherwise be refused for TTL_MS); at most MAX_WORKING_PER_CALLER of its tasks work, so one has ended."""
        held = [task for task in self._tasks.values() if task.owner == owner]
        if len(held) >= MAX_TASKS_PER_CALLER:
            ended = [task for task in held if task.ended_at is not None]
            del self._tasks[min(ended, key=lambda task: task.ended_at or 0.0).id]

    def find(self, owner: Identity, task_id: str) -> SyncTask:
        """The caller's task `task_id`; an unknown, expired or another caller's id is the same error."""
        self._expire()
        task = self._tasks.get(task_id)
        if task is None or task.owner != owner:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown task {task_id!r} (finished tasks are kept {TTL_MS // 60_000} minutes)",
            )
        return task

    def _expire(self) -> None:
        now = time.monotonic()
        for task_id, task in list(self._tasks.items()):
            if task.ended_at is not None and now - task.ended_at > TTL_MS / 1000:
                del self._tasks[task_id]


class TaskParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    task_id: str = Field(alias="taskId")


class SyncTasks(Extension):
    """The tasks extension, for the sync tool. `view` is the view of the caller whose request is handled;
    `group` (set by the server's lifespan) runs the tasks' syncs past the requests that started them."""

    identifier = TASKS_EXTENSION

    def __init__(self, view: Callable[[], CallerView]):
        self.view = view
        self.table = TaskTable()
        self.group: Any = None

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self._get),
            MethodBinding("tasks/update", TaskParams, self._update),
            MethodBinding("tasks/cancel", TaskParams, self._cancel),
        ]

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        if params.name != SYNC_TOOL or self.group is None or not _declares_tasks(ctx):
            return await call_next(ctx)
        if not self.view().sees_tool(SYNC_TOOL) or not _valid_sync(params.arguments):
            return await call_next(ctx)  # answered at once, word for word as without the extension
        try:
            task = self.table.open(self.view().who)
        except TaskRefused as refused:
            return CallToolResult(content=[TextContent(type="text", text=str(refused))], is_error=True)
        self.group.start_soon(self._run, task, ctx, call_next)  # in a copy of this request's context: its caller
        return {"resultType": "task", **task.wire()}

    async def _run(self, task: SyncTask, ctx: Any, call_next: Any) -> None:
        _running.set(task)
        try:
            # cancelled while its sync waits for the one running (or before it began): it ends without starting
            with anyio.CancelScope() as task.scope:
                if task.cancel_asked.is_set():
                    task.scope.cancel()
                result = await call_next(ctx)
            if task.scope.cancelled_caught:
                task.end("cancelled", message=f"sync cancelled by the client; {SYNC_WORK_KEPT}")
                return
        except MCPError as exc:
            task.end("failed", error=exc.error.model_dump(by_alias=True, mode="json", exclude_none=True))
            return
        except Exception as exc:  # the tool answers its own errors: this is a fault of the server
            log.exception("sync task %s failed", task.id)
            task.end("failed", error={"code": INTERNAL_ERROR, "message": f"internal error ({type(exc).__name__})"})
            return
        shown = (
            result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(result, BaseModel)
            else dict(result)
        )
        if task.cancel_asked.is_set() and shown.get("isError"):
            task.end("cancelled", message=result_text(shown))
        else:
            task.end(
                "completed", result=shown, message="sync finished" if not shown.get("isError") else result_text(shown)
            )

    async def _get(self, ctx: Any, params: TaskParams) -> dict[str, object]:
        return self._owned(ctx, params).wire()

    async def _update(self, ctx: Any, params: TaskParams) -> dict[str, object]:
        self._owned(ctx, params)  # a sync asks its client nothing: there is nothing to update
        return {}

    async def _cancel(self, ctx: Any, params: TaskParams) -> dict[str, object]:
        task = self._owned(ctx, params)
        if task.status == "working":  # a finished task stays as it ended
            task.cancel_asked.set()  # a running sync stops at its next progress report
            if task.scope:
                task.scope.cancel()  # a waiting one at once (a sync in its thread ends first, at that report)
        return {}

    def _owned(self, ctx: Any, params: TaskParams) -> SyncTask:
        if not _declares_tasks(ctx):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"tasks/* needs the {TASKS_EXTENSION} extension in the request's client capabilities",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        headers = getattr(ctx.request, "headers", None)  # HTTP only: stdio has no routing headers
        if headers is not None and decode_header_value(headers.get(MCP_NAME_HEADER)) != params.task_id:
            raise MCPError(code=HEADER_MISMATCH, message="the Mcp-Name header must carry the request's taskId")
        return self.table.find(self.view().who, params.task_id)


def _declares_tasks(ctx: Any) -> bool:
    """Whether this 2026-era request's client declared the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


def _valid_sync(arguments: dict[str, Any] | None) -> bool:  # the MCP SDK's tool call arguments
    try:
        SyncRequest.model_validate(arguments or {}, strict=True)
    except ValidationError:
        return False
    return True
