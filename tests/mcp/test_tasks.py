"""Sync as a task (the tasks extension) through real streamable HTTP client sessions: a client that declares the
extension gets a task at once, reads progress and the sync's report with tasks/get, can cancel it (the index keeps
whole batches and the next sync completes it); other clients keep the tool's plain answer; ids of unknown, expired
or other callers' tasks read alike; a flood of tasks is refused with a clear error."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from asgi_server import serve_asgi
from helpers import write, text_of
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, HEADER_MISMATCH, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from task_client import CreatedTask, TaskRequest, Tasks, TaskState, ask, until_ended

from mcp_kb.app import App
from mcp_kb.mcp.server import build_server
from mcp_kb.access import Identity
from mcp_kb.mcp.tasks import (
    MAX_TASKS_PER_CALLER,
    MAX_WORKING,
    MAX_WORKING_PER_CALLER,
    TASKS_EXTENSION,
    TaskRefused,
    TaskTable,
)
from mcp_kb.vocabulary import SYNC_TOOL
from mcp_kb.api import SyncRequest
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder

pytestmark = pytest.mark.anyio

FILES = 40  # two batches of a sync (32 files a commit)
LAST = f"note-{FILES - 1:02d}"  # a file of the second batch: embedding it is where a test can hold the sync


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    for number in range(FILES):
        write(
            tmp_path / "notes" / f"note-{number:02d}.md",
            f"# Note {number}\n\nMeeting note {number}: the budget review moved to room {100 + number}.\n",
        )
    return tmp_path / "notes"


@pytest.fixture
def held(embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Holds the sync when it embeds the second batch, until released: the moment a test acts mid-sync."""
    reached, release = threading.Event(), threading.Event()
    embed_batch = embedder.embed_batch

    def gated(texts: list[str]) -> np.ndarray:
        if any(LAST in text or f"Note {FILES - 1}" in text for text in texts):
            reached.set()
            assert release.wait(60), "the test never released the sync"
        return embed_batch(texts)

    monkeypatch.setattr(embedder, "embed_batch", gated)
    yield reached, release
    release.set()  # a test that failed before releasing must not leave the sync held


@pytest.fixture
def served(make_app: MakeApp, notes: Path) -> Iterator[tuple[App, str]]:
    """`mcp-kb serve`'s streamable HTTP app for one KB, in this process (so a test can hold its sync)."""
    app = make_app({"name": "notes", "description": "Meeting notes", "paths": [str(notes)]})
    server = build_server(app)
    with serve_asgi(server.streamable_http_app(host="127.0.0.1"), lifespan="on") as base:
        yield app, f"{base}/mcp"


@asynccontextmanager
async def session(url: str, *extensions: ClientExtension) -> AsyncIterator[Client]:
    from mcp.client.streamable_http import streamable_http_client

    async with Client(streamable_http_client(url), extensions=list(extensions)) as client:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        yield client


async def start(client: Client) -> CreatedTask:
    created = await client.session.call_tool(SYNC_TOOL, {"kb": "notes"}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def test_a_declaring_client_gets_a_task_reads_its_progress_and_gets_the_sync_report(
    served: tuple[App, str],
) -> None:
    app, url = served
    tasks = Tasks()
    async with session(url, tasks) as client:
        result = await client.call_tool(SYNC_TOOL, {"kb": "notes"})
        found = await client.call_tool("search_notes", {"query": "budget review room 139"})
    assert not result.is_error and result.structured_content["reports"][0]["files_added"] == FILES
    assert any("files" in message for message in tasks.seen)  # how far it was, read while it worked
    assert found.structured_content["results"][0]["source"] == "note-39.md"


async def test_a_task_answers_at_once_and_its_state_is_there_as_soon_as_it_is_returned(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    _, url = served
    reached, release = held
    async with session(url, Tasks()) as client:
        created = await start(client)  # answered while the sync is still to run: nothing released yet
        state = await ask(client.session, "tasks/get", created.task_id)
        assert created.status == "working" and state.status == "working" and created.ttl_ms > 0
        assert created.created_at.endswith("Z") and created.poll_interval_ms > 0
        await anyio.to_thread.run_sync(reached.wait, 60)
        release.set()
        ended = await until_ended(client.session, created.task_id)
    assert (
        ended.status == "completed"
        and ended.result is not None
        and ended.result["structuredContent"]["reports"][0]["files_added"] == FILES
    )


async def test_cancel_stops_the_sync_keeps_whole_batches_and_the_next_sync_completes_it(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    app, url = served
    reached, release = held
    async with session(url, Tasks()) as client:
        created = await start(client)
        await anyio.to_thread.run_sync(reached.wait, 60)  # the first batch is committed, the second embeds
        first = await ask(client.session, "tasks/cancel", created.task_id)
        second = await ask(client.session, "tasks/cancel", created.task_id)  # twice: the same empty answer
        assert first.model_dump(exclude={"meta"}) == second.model_dump(exclude={"meta"}) == {"result_type": "complete"}
        release.set()
        ended = await until_ended(client.session, created.task_id)
        await ask(client.session, "tasks/cancel", created.task_id)  # a cancelled task stays cancelled
        again = await ask(client.session, "tasks/get", created.task_id)
    assert ended.status == again.status == "cancelled" and "cancelled by the client" in (ended.status_message or "")
    assert ended.result is None
    [status] = app.status("notes")
    assert status.files == 32  # the committed batch, whole; the cancelled one not at all
    assert "cancelled by the client" in status.last_error
    [report] = app.sync(SyncRequest(kb="notes"))
    assert report.files_added == FILES - 32 and report.files_unchanged == 32


async def test_a_client_that_leaves_mid_task_finds_the_sync_finished(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    app, url = served
    reached, release = held
    async with session(url, Tasks()) as client:
        created = await start(client)
        await anyio.to_thread.run_sync(reached.wait, 60)
    release.set()  # the client is gone; the sync goes on
    async with session(url, Tasks()) as client:
        ended = await until_ended(client.session, created.task_id)
    assert ended.status == "completed" and app.status("notes")[0].files == FILES


async def test_clients_without_the_extension_get_the_plain_answer_and_no_task_surface(served: tuple[App, str]) -> None:
    _, url = served
    async with session(url) as client:
        result = await client.call_tool(SYNC_TOOL, {"kb": "notes"})
        with pytest.raises(MCPError) as refused:
            await ask(client.session, "tasks/get", "anything")
    assert not result.is_error and result.structured_content["reports"][0]["files_added"] == FILES
    assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


async def test_unknown_task_ids_are_invalid_params_whatever_they_hold(served: tuple[App, str]) -> None:
    _, url = served
    async with session(url, Tasks()) as client:
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            for task_id in ("nosuch", "", "../../etc/passwd", "x" * 10_000, "\u202e\x00"):
                with pytest.raises(MCPError) as unknown:
                    await ask(client.session, method, task_id)
                assert unknown.value.error.code == INVALID_PARAMS and "unknown task" in unknown.value.error.message


async def test_a_flood_of_tasks_is_refused_with_a_clear_error_and_the_server_keeps_serving(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    _, url = served
    reached, release = held  # the first sync holds, so every task opened meanwhile is still held by the caller
    async with session(url, Tasks()) as client:
        opened: list[Any] = []
        refused: list[Any] = []
        for _ in range(MAX_WORKING + 10):
            answer = await client.session.call_tool(SYNC_TOOL, {"kb": "notes"}, allow_claimed=True)
            (opened if isinstance(answer, CreatedTask) else refused).append(answer)
        release.set()
        found = await client.call_tool("search_notes", {"query": "budget review"})
    assert len(opened) == MAX_WORKING_PER_CALLER and len(refused) == MAX_WORKING + 10 - MAX_WORKING_PER_CALLER
    assert all(
        answer.is_error and "the most one caller may have at once" in text_of(answer.content[0]) for answer in refused
    )
    assert not found.is_error


def test_one_caller_running_its_share_of_tasks_leaves_room_for_every_other_caller() -> None:
    """A caller's working tasks are bounded by a share of the server's, so one token cannot starve the rest."""
    table, callers = TaskTable(), [Identity("token", f"caller-{number}") for number in range(5)]
    greedy = [table.open(callers[0]) for _ in range(MAX_WORKING_PER_CALLER)]
    with pytest.raises(TaskRefused, match="you have 4 syncs running or waiting, the most one caller may have at once"):
        table.open(callers[0])
    others = [table.open(caller) for caller in callers[1:4] for _ in range(MAX_WORKING_PER_CALLER)]
    assert len(greedy) + len(others) == MAX_WORKING
    with pytest.raises(TaskRefused, match="16 sync tasks are running on this server"):
        table.open(callers[4])  # the server's own bound still holds
    greedy[0].end("completed")
    assert table.open(callers[0]).status == "working"  # an ended task frees its caller's slot


class _NoName(TaskRequest):
    name_param = None  # sends no Mcp-Name header


class _OtherName(TaskRequest):
    name_param = "decoy"  # sends the decoy parameter's value as Mcp-Name


async def test_tasks_requests_must_name_their_task_in_the_mcp_name_header(served: tuple[App, str]) -> None:
    _, url = served
    async with session(url, Tasks()) as client:
        created = await start(client)
        for request in (
            _NoName(method="tasks/get", params={"taskId": created.task_id}),
            _OtherName(method="tasks/get", params={"taskId": created.task_id, "decoy": "another-task"}),
        ):
            with pytest.raises(MCPError) as mismatch:
                await client.session.send_request(request, TaskState)
            assert mismatch.value.error.code == HEADER_MISMATCH
        assert (await until_ended(client.session, created.task_id)).status == "completed"


async def test_a_call_with_arguments_the_tool_refuses_is_answered_at_once_not_as_a_task(
    served: tuple[App, str],
) -> None:
    _, url = served
    async with session(url, Tasks()) as with_tasks, session(url) as without:
        answers = [
            await client.session.call_tool(SYNC_TOOL, {"kb": "notes", "full": "yes"}, allow_claimed=True)
            for client in (with_tasks, without)
        ]
    first, second = answers
    assert isinstance(first, CallToolResult) and isinstance(second, CallToolResult)
    assert first.is_error and second.is_error and "full" in text_of(first.content[0])
    assert first.content == second.content


async def test_a_finished_task_is_kept_for_its_ttl_and_then_reads_as_unknown(
    served: tuple[App, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.mcp import tasks

    _, url = served
    async with session(url, Tasks()) as client:
        created = await start(client)
        ended = await until_ended(client.session, created.task_id)
        kept = await ask(client.session, "tasks/get", created.task_id)  # read again: still there
        monkeypatch.setattr(tasks, "TTL_MS", 0)  # its time is up
        with pytest.raises(MCPError) as expired:
            await ask(client.session, "tasks/get", created.task_id)
        with pytest.raises(MCPError) as unknown:
            await ask(client.session, "tasks/get", "never-made")
    assert ended.status == kept.status == "completed" and kept.result == ended.result
    assert expired.value.error.code == unknown.value.error.code == INVALID_PARAMS
    assert expired.value.error.message.replace(created.task_id, "X") == unknown.value.error.message.replace(
        "never-made", "X"
    )


async def test_a_task_cancelled_while_its_sync_waits_ends_at_once_and_frees_its_place(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    """It waited for the running sync (hours, for a big rebuild) before it heard the cancel, holding its place."""
    _, url = served
    reached, release = held
    async with session(url, Tasks()) as client:
        running = await start(client)
        await anyio.to_thread.run_sync(reached.wait, 60)  # the first sync holds; the next one waits behind it
        waiting = await start(client)
        await ask(client.session, "tasks/cancel", waiting.task_id)
        with anyio.fail_after(20):
            ended = await until_ended(client.session, waiting.task_id)
        still = await ask(client.session, "tasks/get", running.task_id)
        release.set()
        finished = await until_ended(client.session, running.task_id)
    assert ended.status == "cancelled" and "cancelled by the client" in (ended.status_message or "")
    assert still.status == "working" and finished.status == "completed"


async def test_plain_sync_calls_of_one_caller_take_no_more_places_in_the_queue_than_its_share(
    served: tuple[App, str], held: tuple[threading.Event, threading.Event]
) -> None:
    """Calls without the tasks extension wait in the same queue: five from one caller kept another's sync waiting
    behind all of them."""
    _, url = served
    reached, release = held
    answers = []
    async with session(url) as client:

        async def call() -> None:
            answers.append(await client.call_tool(SYNC_TOOL, {"kb": "notes"}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await anyio.to_thread.run_sync(reached.wait, 60)  # one runs, held
            for _ in range(MAX_WORKING_PER_CALLER + 2):
                group.start_soon(call)
            with anyio.fail_after(30):  # the ones past the share are answered at once, while the first still holds
                while len(answers) < 3:
                    await anyio.sleep(0.05)
            release.set()
    refused = [answer for answer in answers if answer.is_error]
    assert len(refused) == 3 and all("the most one caller may have at once" in text_of(a.content[0]) for a in refused)
    assert sum(not answer.is_error for answer in answers) == MAX_WORKING_PER_CALLER


def test_a_caller_that_syncs_after_each_edit_is_never_locked_out_by_its_finished_tasks() -> None:
    """Finished tasks are kept 15 minutes: 64 short ones locked their caller out for that long."""
    table, caller = TaskTable(), Identity("token", "editor")
    first = table.open(caller)
    first.end("completed")
    for _ in range(MAX_TASKS_PER_CALLER * 2):
        table.open(caller).end("completed")
    with pytest.raises(MCPError):
        table.find(caller, first.id)  # the oldest finished ones made room
    assert table.open(caller).status == "working"
