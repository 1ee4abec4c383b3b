"""One index on object storage shared by machines: a real S3-compatible server (moto) on 127.0.0.1,
writers and readers in separate processes with separate local cache folders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from helpers import named_holder
from mcp import Client, StdioServerParameters

from helpers import eventually, until, write, text_of
from s3_server import CREDENTIALS, S3Server, serve_s3
from mcp_kb.api import SearchRequest, SyncProgress
from mcp_kb.index.contract import SyncHolder
from mcp_kb.index.store import LanceStore
from mcp_kb.records import KBState
from mcp_kb.app import App

pytestmark = pytest.mark.anyio
SECRET_VARIABLE = "KB_TEST_S3_SECRET"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with serve_s3() as server:
        yield server


@pytest.fixture
def shared(s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Shared:
    """A folder of documents and a kb.toml whose index is a fresh bucket."""
    docs = tmp_path / "docs"
    for i in range(6):
        write(
            docs / f"note{i}.md",
            f"# Note {i}\n\nRunbook {i}: restart the ingest worker number {i} when "
            f"its queue backs up past {i * 100} messages.\n",
        )
    write(docs / "errors.md", "# Errors\n\nE5021 means the access token expired; sign in again.\n")
    monkeypatch.setenv(SECRET_VARIABLE, CREDENTIALS["aws_secret_access_key"])  # for the in-process reader
    return _Shared(s3, s3.new_bucket(), docs, tmp_path)


class _Shared:
    def __init__(self, s3: S3Server, bucket: str, docs: Path, base: Path) -> None:
        self.s3, self.bucket, self.docs, self.base = s3, bucket, docs, base
        self.config = base / "kb.toml"
        storage = s3.storage(bucket)
        options = {**storage["options"], "aws_secret_access_key": "${" + SECRET_VARIABLE + "}"}
        self.config.write_text(
            f'[storage]\nuri = "{storage["uri"]}"\nread_consistency = 0.5\nlease_seconds = 10\n'
            f"[storage.options]\n"
            + "".join(f'{k} = "{v}"\n' for k, v in options.items())
            + f'[[kb]]\nname = "docs"\ndescription = "Runbooks"\npaths = ["{docs}"]\n',
            encoding="utf-8",
        )

    def env(self, machine: str, access_key: str = CREDENTIALS["aws_access_key_id"], extra: str = "") -> dict[str, str]:
        """A process on another machine: its own cache folder (local state), the secret from the environment;
        its own access key (moto records it: it tells who asked) and settings appended to its kb.toml."""
        cache = self.base / f"cache-{machine}"
        config = self.config
        if access_key != CREDENTIALS["aws_access_key_id"] or extra:
            config = self.base / f"kb-{machine}.toml"
            config.write_text(self.config.read_text().replace(CREDENTIALS["aws_access_key_id"], access_key) + extra)
        return {
            **os.environ,
            "XDG_CACHE_HOME": str(cache),
            SECRET_VARIABLE: CREDENTIALS["aws_secret_access_key"],
            "MCP_KB_CONFIG": str(config),
        }

    def cli(self, machine: str, *args: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "mcp_kb", *args],
            env=self.env(machine, **kw),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def reader(self) -> App:
        """An in-process reader (quick to poll); its local state goes to this process's cache folder."""
        from mcp_kb.app import App
        from mcp_kb.settings import load_config

        config = load_config(self.config)
        storage = config.storage.model_copy(update={"read_cache_dir": str(self.base / "read-cache")})
        return App(config.model_copy(update={"storage": storage}))

    def status(self, machine: str) -> dict[str, Any]:
        status: dict[str, Any] = json.loads(self.cli(machine, "status", "--json").stdout)[0]
        return status

    def search(self, machine: str, query: str) -> list[str]:
        hits = json.loads(self.cli(machine, "search", "docs", query, "--json", "--top-k", "3").stdout)["results"]
        return [hit["source"] for hit in hits]


def _comparable(status: dict[str, Any]) -> dict[str, Any]:
    keys = ("files", "chunks", "generation", "last_sync", "last_outcome", "model", "index_state", "failed", "health")
    return {key: status[key] for key in keys}


def test_a_second_machine_searches_the_same_rows_and_sees_the_same_status(shared: _Shared) -> None:
    shared.cli("writer", "sync")
    assert shared.search("reader", "E5021 token expired")[0] == "errors.md"
    reader, writer = shared.status("reader"), shared.status("writer")
    assert _comparable(reader) == _comparable(writer) and reader["files"] == 7 and reader["last_outcome"] == "ok"
    assert not (shared.base / "cache-reader").exists() or not any((shared.base / "cache-reader").rglob("*.lance"))
    # the secret came from the environment and is shown nowhere
    assert CREDENTIALS["aws_secret_access_key"] not in json.dumps(reader)


async def test_a_reader_picks_up_a_writers_sync_within_read_consistency(shared: _Shared) -> None:
    shared.cli("writer", "sync")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "--read-only"], env=shared.env("reader")
    )
    async with Client(params) as client:
        first = await client.call_tool("search_docs", {"query": "blue-green deployment checklist", "mode": "keyword"})
        assert not first.structured_content["results"]
        write(shared.docs / "deploy.md", "# Deploy\n\nThe blue-green deployment checklist lives here.\n")
        shared.cli("writer", "sync")
        answers = []

        async def found() -> bool:  # the same query: a cached empty answer must not stick
            answers.append(
                await client.call_tool("search_docs", {"query": "blue-green deployment checklist", "mode": "keyword"})
            )
            return bool(answers[-1].structured_content["results"])

        await eventually(found, 20, 0.2, what="the new document in a reader's answer")
        assert answers[-1].structured_content["results"][0]["source"] == "deploy.md"
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "sync_knowledge_base" not in tools


async def test_a_read_only_server_never_writes_to_the_store(shared: _Shared) -> None:
    shared.cli("writer", "sync")
    shared.s3.start_recording()
    write(shared.docs / "new.md", "# New\n\nA file the writer has not synced yet.\n")
    # sync triggers in its config are not for a read-only server: the writer syncs
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_kb", "serve", "--read-only"],
        env=shared.env("reader", access_key="reader-key", extra="[kb.sync]\non_start = true\nwatch = true\n"),
    )
    async with Client(params) as client:
        for query in ("E5021", "restart the ingest worker", "queue backs up"):
            assert not (await client.call_tool("search_docs", {"query": query})).is_error
        status = json.loads(text_of((await client.read_resource("kb://docs/status")).contents[0]))
        await client.read_resource("kb://docs/metrics")
    # The server has exited: every request it made is recorded (a start-up sync would begin at once).
    requests = [r for r in shared.s3.recorded() if "Credential=reader-key/" in r["headers"].get("Authorization", "")]
    assert status["files"] == 7 and not status["sync_running"] and requests  # it did read the bucket...
    assert {r["method"] for r in requests} == {"GET"} or {r["method"] for r in requests} <= {"GET", "HEAD"}


def test_two_writers_on_one_bucket_take_turns_and_build_what_one_would(shared: _Shared) -> None:
    # Both start while another holds the lease (left to chance, the first could finish before the second
    # looked); once both say they wait, it is released and they take turns.
    logs = [shared.base / f"writer{i}.log" for i in range(2)]
    with _holding_the_lease(shared):
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "mcp_kb", "sync"],
                env=shared.env(f"writer{i}"),
                stdout=subprocess.DEVNULL,
                stderr=log.open("w"),
            )
            for i, log in enumerate(logs)
        ]
        until(
            lambda: all("waiting: a sync of docs is already running" in log.read_text() for log in logs),
            seconds=120,
            what="both writers waiting for the lease",
        )
    assert [process.wait(timeout=300) for process in processes] == [0, 0], [log.read_text() for log in logs]
    status = shared.status("reader")
    assert status["files"] == 7 and status["chunks"] == 7  # no file twice
    busy = None
    with _holding_the_lease(shared):
        busy = shared.cli("writer2", "sync", "--no-wait", check=False)
    assert busy.returncode == 1 and "is already running" in busy.stderr and "on " in busy.stderr


@pytest.mark.slow  # a SIGKILL test: it waits out a dead writer's lease (CI runs it with the harness)
def test_a_writer_killed_mid_sync_is_repaired_and_readers_never_error(shared: _Shared) -> None:
    # The repair must start while the dead writer's lease still holds: a lease longer than a loaded
    # machine takes to start a process (3 s was not: the repair found it lapsed and never waited).
    shared.config.write_text(shared.config.read_text().replace("lease_seconds = 10", "lease_seconds = 15"))
    for i in range(60):
        write(shared.docs / f"bulk{i:02d}.md", f"# Bulk {i}\n\n" + f"Paragraph {i} about shard rebalancing. " * 40)
    shared.cli("writer", "sync")
    for i in range(60):  # every file changes: a long incremental sync
        write(shared.docs / f"bulk{i:02d}.md", f"# Bulk {i}\n\n" + f"Revised text {i} on replica placement. " * 40)
    writer = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync"],
        env=shared.env("writer"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    reader = shared.reader()
    until(lambda: reader.status("docs")[0].progress.done > 0, seconds=120)
    searches = _SearchLoop(reader)
    with searches:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        # The dead writer's lease holds until it lapses (lease_seconds = 15); then the sync finishes its work.
        repair = shared.cli("writer", "sync")
    assert "waiting: a sync of docs is already running" in repair.stderr
    assert searches.done > 0 and searches.failures == []  # readers answered throughout, never empty
    status = shared.status("reader")
    assert status["files"] == 67 and status["chunks"] == _clean_build_chunks(shared)
    assert shared.search("reader", "replica placement")[0].startswith("bulk")


class _SearchLoop:
    """Searches in a thread until the block ends; each one must answer with hits."""

    def __init__(self, app: App) -> None:
        self.app, self.done = app, 0
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if not self.app.search(
                    "docs", SearchRequest(query="E5021 token expired", mode="keyword"), record=False
                ).hits:
                    self.failures.append("empty answer")
            except Exception as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}")
            self.done += 1
            time.sleep(0.05)

    def __enter__(self) -> None:
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _holding_the_lease(shared: _Shared) -> AbstractContextManager[None]:
    """The writer lease, held in this process (its heartbeat renews it) until the block ends: another writer
    meets a sync in progress for as long as the test needs."""
    from mcp_kb.index.state import sync_lock

    return sync_lock(shared.reader().store, ["docs"])


def _clean_build_chunks(shared: _Shared) -> int:
    """Chunks a clean build of the same files gives, in a local folder."""
    config = shared.base / "clean.toml"
    config.write_text(
        f'storage = "{shared.base / "clean-index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{shared.docs}"]\n',
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config), "--json"],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    chunks: int = json.loads(result.stdout)[0]["chunks_total"]
    return chunks


def test_exactly_one_of_racing_writers_takes_the_lease_and_a_lapsed_one_is_taken_over(s3: S3Server) -> None:
    from mcp_kb.index.store import LanceStore

    storage = s3.storage(s3.new_bucket())
    # Long enough that no loser of the race, however late on a loaded machine, finds it lapsed.
    stores = [LanceStore(storage["uri"], storage["options"], lease_seconds=5) for _ in range(4)]
    stores[0].lease_holder()  # nothing yet: no table, nobody holds it
    barrier = threading.Barrier(4)
    outcomes = {}

    def race(index: int) -> None:
        barrier.wait()
        outcomes[index] = stores[index].take_lease(SyncHolder(f"writer{index}", index, "h"))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 4  # the three that lost the race to create the lease's table did not fail either
    winners = [i for i, holder in outcomes.items() if holder is None]
    assert len(winners) == 1
    losers = [outcomes[i] for i in outcomes if i not in winners]
    assert all(named_holder(holder).id == f"writer{winners[0]}" for holder in losers)  # they name the holder

    # The winner never renews (as if killed): another writer takes the lease once it lapses.
    other = next(i for i in range(4) if i not in winners)
    until(lambda: stores[other].take_lease(SyncHolder("late", 9, "h")) is None, seconds=60)
    assert not stores[winners[0]].renew_lease(f"writer{winners[0]}", {})  # the old holder learns it lost it
    assert named_holder(stores[other].lease_holder()).id == "late"


def test_a_sync_that_lost_its_lease_stops_before_its_next_commit(s3: S3Server) -> None:
    from mcp_kb.errors import SyncBusyError
    from mcp_kb.index import state
    from mcp_kb.index.store import LanceStore

    storage = s3.storage(s3.new_bucket())
    store, other = (LanceStore(storage["uri"], storage["options"], lease_seconds=5) for _ in range(2))
    with state.sync_lock(store, ["docs"]):
        state.write_progress(store, "docs", SyncProgress(1, 10))
        assert named_holder(other.lease_holder()).progress == {"docs": SyncProgress(1, 10)}
        lease = state._StoreLease._held[store.uri]
        lease.stop.set()  # its heartbeats stop reaching the store (a network partition)...
        assert lease.thread is not None
        lease.thread.join()
        # ...so another writer takes over once the lease lapses
        until(lambda: other.take_lease(SyncHolder("next-writer", 2, "h")) is None, seconds=60)
        with pytest.raises(SyncBusyError, match="lost the writer lease"):
            state.write_progress(store, "docs", SyncProgress(2, 10))  # called between batches: no further commit
    assert named_holder(other.lease_holder()).id == "next-writer"  # releasing a lost lease leaves the new holder alone


def test_a_store_lost_at_the_final_write_is_one_error_line_and_the_next_sync_repairs(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store drops during the sync's last commit (and so during the lease release after it): the
    user reads one line naming the store error, never a traceback from the release; once the store is
    back, the next sync completes the index."""
    from click.testing import CliRunner

    from mcp_kb import cli
    from mcp_kb.index.store import LanceStore

    docs = tmp_path / "docs"
    for i in range(3):
        write(docs / f"note{i}.md", f"# Note {i}\n\nThe ingest worker {i} restarts when its queue backs up.\n")
    try:
        bucket = s3.new_bucket()
        storage = s3.storage(bucket)
        config = tmp_path / "kb.toml"
        config.write_text(
            f'[storage]\nuri = "{storage["uri"]}"\nlease_seconds = 3\n[storage.options]\n'
            + "".join(f'{k} = "{v}"\n' for k, v in storage["options"].items())
            + f'[[kb]]\nname = "docs"\ndescription = "Runbooks"\npaths = ["{docs}"]\n',
            encoding="utf-8",
        )
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        real_write_state = LanceStore.write_state

        def dropping(self: LanceStore, kb: str, state: KBState) -> None:
            if state.filled and kb == "docs":  # the commit that completes the sync
                s3.drop()
            return real_write_state(self, kb, state)

        monkeypatch.setattr(LanceStore, "write_state", dropping)
        result = CliRunner().invoke(cli.main, ["sync", "-c", str(config)])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "could not be written (a KB's state)" in errors[0], result.output
        assert "s3://" in errors[0] and ".rs:" not in errors[0]

        monkeypatch.setattr(LanceStore, "write_state", real_write_state)
        s3.restore()
        result = CliRunner().invoke(cli.main, ["sync", "-c", str(config)])
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(cli.main, ["search", "-c", str(config), "docs", "ingest worker queue"])
        assert result.exit_code == 0 and "note" in result.output
    finally:
        s3.restore()  # the module's other tests share this server


async def test_a_read_only_server_without_the_sources_reads_lists_and_searches_across(shared: _Shared) -> None:
    """Reading comes from the index: a reader on another machine, with no copy of the folder, reads a section and
    goes on with its cursor, lists the documents and an outline, and searches across its knowledge bases."""
    write(
        shared.docs / "runbook.md",
        "# Runbook\n\n## Restarts\n\n"
        + "\n\n".join(f"Step {n}: restart worker {n} and wait for its queue to drain." for n in range(40))
        + "\n",
    )
    shared.cli("writer", "sync")
    shared.docs.rename(shared.base / "docs-not-on-this-machine")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_kb", "serve", "--read-only"],
        env=shared.env("reader", extra='[server]\nsearch_tools = "both"\n'),
    )
    async with Client(params) as client:
        parts = [
            await client.call_tool(
                "read_document",
                {"kb": "docs", "path": "runbook.md", "section": "Runbook › Restarts", "max_tokens": 200},
            )
        ]
        while parts[-1].structured_content["cursor"]:
            parts.append(
                await client.call_tool(
                    "read_document", {"kb": "docs", "max_tokens": 200, "cursor": parts[-1].structured_content["cursor"]}
                )
            )
        listed = await client.call_tool("list_documents", {"kb": "docs", "path": "note*"})
        outline = await client.call_tool("list_documents", {"kb": "docs", "path": "runbook.md", "outline": True})
        across = await client.call_tool("search_knowledge_bases", {"query": "E5021 access token"})
        resource = text_of((await client.read_resource("kb://docs/documents/errors.md")).contents[0])
    text = "".join(part.structured_content["text"] for part in parts)
    assert len(parts) > 1 and text.startswith("## Restarts") and "Step 39: restart worker 39" in text
    assert [d["path"] for d in listed.structured_content["documents"]] == [f"note{i}.md" for i in range(6)]
    assert [e["heading"] for e in outline.structured_content["outline"]] == ["Runbook", "Runbook › Restarts"]
    assert across.structured_content["results"][0]["source"] == "errors.md"
    assert resource.startswith("# Errors")


def test_a_read_only_reader_searches_as_of_a_tag_while_a_writer_syncs(shared: _Shared) -> None:
    """A reader on another machine (it never writes) answers as of a tagged version from the bucket's old table
    versions while a writer rewrites every document; afterwards the tag still reads the old text, the current
    version the new, and a fresh reader process (a cold read cache: it asks the store for the old manifest's size)
    searches as of the tag too."""
    for i in range(40):
        write(shared.docs / f"bulk{i:02d}.md", f"# Bulk {i}\n\n" + f"Paragraph {i} about shard rebalancing. " * 40)
    shared.cli("writer", "sync", "--tag", "before-rewrite")
    for i in range(40):
        write(shared.docs / f"bulk{i:02d}.md", f"# Bulk {i}\n\n" + f"Revised text {i} on replica placement. " * 40)
    write(shared.docs / "errors.md", "# Errors\n\nE5021 now means the account is locked; call the help desk.\n")
    writer = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync"],
        env=shared.env("writer"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    reader = shared.reader()
    answers: list[tuple[str, list[str]]] = []
    while writer.poll() is None or not answers:
        result = reader.search(
            "docs", SearchRequest(query="E5021 token", mode="keyword", as_of="before-rewrite"), record=False
        )
        answers.append((result.hits[0].text if result.hits else "", result.notes[:1]))
    assert writer.wait() == 0
    assert len(answers) > 1 and all(
        text.endswith("the access token expired; sign in again.")
        and note[0].startswith("answered as of version 1 (before-rewrite)")
        for text, note in answers
    ), answers[-1]
    now = reader.search("docs", SearchRequest(query="E5021", mode="keyword"), record=False)
    assert "account is locked" in now.hits[0].text
    old = shared.cli("reader", "search", "docs", "shard rebalancing", "--as-of", "before-rewrite", "--json")
    assert json.loads(old.stdout)["results"][0]["source"].startswith("bulk")
