"""The client's side of the tasks extension, as a client that declares it speaks it (tests of sync tasks)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp_types import CallToolResult, Request, Result

from mcp_kb.mcp.tasks import TASKS_EXTENSION


class CreatedTask(Result):
    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int
    poll_interval_ms: int


class TaskState(Result):
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskRequest(Request[dict[str, Any], str]):
    name_param: ClassVar[str | None] = "taskId"  # SEP-2663: tasks/* carry the task id in the Mcp-Name header


class Tasks(ClientExtension):
    """A client's side of the extension: declares it; `call_tool` polls a task it gets until it ends."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.seen: list[str] = []  # every status message the polls read

    def claims(self) -> list[ResultClaim[CreatedTask]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        with anyio.fail_after(60):
            while (state := await ask(ctx.session, "tasks/get", created.task_id)).status == "working":
                self.seen.append(state.status_message or "")
                await anyio.sleep(0.05)  # a client's poll interval, shortened for the test
        assert state.status == "completed", state
        return CallToolResult.model_validate(state.result)


class Acknowledged(Result):
    result_type: Literal["complete"]


async def ask(session: ClientSession, method: str, task_id: str) -> Any:
    """tasks/get's TaskState; tasks/cancel's and tasks/update's acknowledgement (an empty result)."""
    answer = TaskState if method == "tasks/get" else Acknowledged
    return await session.send_request(TaskRequest(method=method, params={"taskId": task_id}), answer)


async def until_ended(session: ClientSession, task_id: str) -> TaskState:
    with anyio.fail_after(60):
        while (state := await ask(session, "tasks/get", task_id)).status == "working":
            await anyio.sleep(0.05)
    assert isinstance(state, TaskState)
    return state
