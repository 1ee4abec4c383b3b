"""Serving over HTTP from several worker processes on one port (`serve --workers N`), as clients see it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import process_running, until, write, text_of
from mcp import Client
from served import serve_http

from mcp_kb.api import ConfigError
from mcp_kb.settings import build_config
from helpers import MakeApp

_GUIDE = "# Guide\n\n" + "\n\n".join(f"## Part {n}\n\nAnnual leave rule {n}: ask two weeks ahead." for n in range(60))


@pytest.fixture
def served_config(make_app: MakeApp, tmp_path: Path) -> Path:
    """A synced KB and the kb.toml a server reads it with."""
    write(tmp_path / "docs" / "guide.md", _GUIDE)
    write(tmp_path / "docs" / "travel.md", "# Travel\n\nBook trains through the portal.\n")
    make_app({"name": "docs", "description": "Guides", "paths": [str(tmp_path / "docs")]}).sync()
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Guides"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    return config


def _serving(config: Path) -> list[int]:
    """The processes serving `config` (the lead and its workers), by their command lines."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in arguments and str(config).encode() in arguments:
            found.append(int(cmdline.parent.name))
    return found


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client(port: int) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=httpx2.AsyncClient(timeout=120)))


@pytest.mark.anyio
async def test_two_workers_answer_one_port_any_request_cursors_and_syncs_included(served_config: Path) -> None:
    """Each connection lands on one of the processes: searches from many clients are answered by both, a cursor
    one gives is taken by the other (they share the cursors' key), and a sync run through one is what every
    connection's status says next. No sync tasks: a task would live in one process."""
    with serve_http(served_config, "--transport", "http", "--stateless", "--workers", "2") as (port, log):
        processes = _serving(served_config)
        assert len(processes) == 2, log()
        assert "from 2 processes (no sync tasks: a task lives in one)" in log()
        before = {pid: _cpu_seconds(pid) for pid in processes}
        answers = []

        async def searches() -> None:
            async with _client(port) as client:
                for n in range(4):
                    answers.append(await client.call_tool("search_docs", {"query": f"annual leave rule {n}"}))

        async with anyio.create_task_group() as group:
            for _ in range(16):
                group.start_soon(searches)
        assert len(answers) == 64 and not any(answer.is_error for answer in answers)
        assert all(_cpu_seconds(pid) - before[pid] > 0.05 for pid in processes), "one process answered all"
        async with _client(port) as client:
            first = await client.call_tool("read_document", {"kb": "docs", "path": "guide.md", "max_tokens": 200})
        parts, cursor = [first.structured_content["text"]], first.structured_content["cursor"]
        while cursor:  # each part over a new connection: to either process
            async with _client(port) as client:
                answer = await client.call_tool("read_document", {"kb": "docs", "cursor": cursor, "max_tokens": 200})
            assert not answer.is_error, text_of(answer.content[0])
            parts.append(answer.structured_content["text"])
            cursor = answer.structured_content["cursor"]
        assert "".join(parts) == _GUIDE
        write(served_config.parent / "docs" / "new.md", "# New\n\nA new page.\n")
        async with _client(port) as client:
            synced = await client.call_tool("sync_knowledge_base", {"kb": "docs"})
        assert not synced.is_error and "1 added" in text_of(synced.content[0])
        for _ in range(6):
            async with _client(port) as client:
                status = json.loads(text_of((await client.read_resource("kb://docs/status")).contents[0]))
            assert status["files"] == 3


def test_stopping_the_lead_stops_its_workers_and_a_killed_lead_leaves_none_behind(served_config: Path) -> None:
    for ending in (signal.SIGTERM, signal.SIGKILL):
        with serve_http(served_config, "--transport", "http", "--stateless", "--workers", "3") as (_, log):
            processes = _serving(served_config)
            assert len(processes) == 3, log()
            lead = min(
                processes, key=lambda pid: int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
            )  # the one started first
            os.kill(lead, ending)
            for pid in processes:
                until(lambda: not process_running(pid), seconds=30, what=f"process {pid} ending")


@pytest.mark.parametrize("options", [{"transport": "http"}, {"transport": "sse"}, {"transport": "stdio"}])
def test_several_workers_need_stateless_http_said_in_one_line(tmp_path: Path, options: dict[str, Any]) -> None:
    config = build_config({"kb": [{"name": "docs", "description": "d", "paths": [str(tmp_path)]}]}, tmp_path, None)
    with pytest.raises(
        ConfigError,
        match="a session, an SSE stream or a sync task lives in one: serve stateless "
        r"streamable HTTP \(--transport http --stateless\)",
    ):
        config.serving(**options, workers=2)
    served = config.serving(transport="http", stateless=True, workers=2)
    assert served.server.cursor_secret  # drawn once, handed to every worker
