"""Syncs on a Ray cluster (`[sync] engine = "ray"`): a real cluster of two nodes on 127.0.0.1 (ray.cluster_utils)
and a real `mcp-kb sync --address` process as the coordinator. The scenarios that kill a node or the coordinator
mid-wave are part of the crash harness (slow: CI runs them)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from fake_embeddings import EmbeddingService, serve_embeddings
from helpers import chunk_table, closed_address, until, write

from mcp_kb.app import App
from mcp_kb.index.store import LanceStore
from mcp_kb.settings import load_config
from mcp_kb.api import SearchRequest
from mcp_kb.models.fastembed import FastEmbedder

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' (CI installs it)")

FILES = 200
WAVE = 64  # files per commit: four waves
CLI = [sys.executable, "-m", "mcp_kb"]
# Ray names a node by the machine's network address, also when told 127.0.0.1; this keeps the cluster and the
# coordinator on the loopback (its switch for machines where clusters are off).
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Any]]:
    """A head and a worker node of one CPU each, both on 127.0.0.1; the worker says it has a GPU (a logical one)."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        for name, value in LOOPBACK.items():
            patch.setenv(name, value)
        nodes = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
        )
        worker = nodes.add_node(num_cpus=1, num_gpus=1, node_ip_address="127.0.0.1")
        nodes.wait_for_nodes()
        try:
            yield nodes, worker
        finally:
            nodes.shutdown()  # type: ignore[no-untyped-call]  # Ray's Cluster.shutdown carries no annotations


def _corpus(folder: Path) -> None:
    for i in range(FILES):
        write(
            folder / f"doc{i:03d}.md",
            f"# Document {i}\n\nRecord {i} of the archive: the change window of team "
            f"{i % 9}, its owners, and the checks run before release {i}.\n",
        )


def _config(
    tmp_path: Path, docs: Path, storage: str, embedding: str = 'quantize = "none"', options: str = "", wave: int = WAVE
) -> Path:
    """fp32 vectors by default: int8's depend slightly on their batch (docs/sync.md)."""
    path = tmp_path / f"kb-{abs(hash(storage))}.toml"
    path.write_text(
        f'[storage]\nuri = "{storage}"\n{options}\n[sync]\nwave_files = {wave}\n'
        f"[embedding]\n{embedding}\n"
        f'[[kb]]\nname = "docs"\ndescription = "the archive"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    return path


def _sync(config: Path, *options: str, said: list[str] | None = None) -> dict[str, Any]:
    """A sync's report; `said` gets what it logged (-v)."""
    done = subprocess.run(
        [*CLI, "-v", "sync", "-c", str(config), "--json", *options],
        capture_output=True,
        text=True,
        env={**os.environ, **LOOPBACK},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if said is not None:
        said.append(done.stderr)
    report: dict[str, Any] = json.loads(done.stdout)[0]
    return report


def _rows(config: Path) -> dict[str, dict[str, Any]]:
    store = LanceStore.of(load_config(config).storage)
    return {row["id"]: row for row in chunk_table(store, "docs").to_arrow().to_pylist()}


def _assert_same_index(ray_config: Path, local_config: Path) -> None:
    """The same documents, chunk texts and vectors (to 1e-6) as a local sync."""
    ours, theirs = _rows(ray_config), _rows(local_config)
    assert ours.keys() == theirs.keys()
    for key, row in ours.items():
        assert (row["path"], row["text"], row["search_text"]) == (
            theirs[key]["path"],
            theirs[key]["text"],
            theirs[key]["search_text"],
        )
        assert np.abs(np.asarray(row["vector"]) - np.asarray(theirs[key]["vector"])).max() < 1e-6


def _assert_consistent(config: Path, expected: set[str]) -> None:
    """Every document of the manifest has exactly its chunks once, and there are no others."""
    store = LanceStore.of(load_config(config).storage)
    files = store.read_files("docs")
    rows = _rows(config).values()
    assert set(files) == expected
    assert Counter(row["path"] for row in rows) == {path: record.n_chunks for path, record in files.items()}
    assert len({row["id"] for row in rows}) == len(rows)


def test_a_ray_sync_equals_a_local_sync_and_applies_edits_and_deletes_alone(
    cluster: tuple[Cluster, Any], tmp_path: Path
) -> None:
    nodes, _ = cluster
    docs = tmp_path / "docs"
    _corpus(docs)
    on_ray = _config(tmp_path, docs, str(tmp_path / "ray-index"))
    local = _config(tmp_path, docs, str(tmp_path / "local-index"))

    said: list[str] = []
    report = _sync(on_ray, "--address", nodes.address, said=said)
    assert (report["files_added"], report["files_failed"], report["chunks_embedded"]) == (FILES, 0, FILES)
    assert 0 < report["worker_peak_mb"] < report["indexer_peak_mb"]  # a parser holds no model; an indexer does
    assert "a Ray cluster of 2 nodes; indexers holding a GPU: 1" in said[0]  # the local model's indexer holds the GPU
    _sync(local, "--engine", "local")
    _assert_same_index(on_ray, local)

    write(docs / "doc005.md", "# Document 5\n\nRewritten: the record moved to the new archive.\n")
    (docs / "doc007.md").unlink()
    report = _sync(on_ray, "--address", nodes.address)
    assert (report["files_changed"], report["files_deleted"], report["files_unchanged"]) == (1, 1, FILES - 2)
    assert report["chunks_embedded"] == 1  # the edited file's one new chunk, nothing else
    _sync(local, "--engine", "local")
    _assert_same_index(on_ray, local)
    _assert_consistent(on_ray, {f"doc{i:03d}.md" for i in range(FILES)} - {"doc007.md"})


def test_a_content_in_many_batches_of_one_wave_is_embedded_once_per_indexer(
    cluster: tuple[Cluster, Any], tmp_path: Path
) -> None:
    nodes, _ = cluster
    docs = tmp_path / "docs"
    _corpus(docs)
    template = "# Release checklist\n\nThe shared template: freeze, tag, build, sign, announce.\n"
    for i in range(0, FILES, 10):  # copies of one document, in every batch of the one wave
        write(docs / f"doc{i:03d}.md", template)
    report = _sync(_config(tmp_path, docs, str(tmp_path / "index"), wave=FILES), "--address", nodes.address)
    unique = FILES - FILES // 10 + 1
    assert report["chunks_total"] == FILES
    assert unique <= report["chunks_embedded"] <= unique + 1  # two indexers: at most one extra


def test_a_ray_sync_writes_straight_to_object_storage(cluster: tuple[Cluster, Any], tmp_path: Path) -> None:
    from s3_server import serve_s3

    nodes, _ = cluster
    docs = tmp_path / "docs"
    _corpus(docs)
    with serve_s3() as s3:
        storage = s3.storage(s3.new_bucket())
        options = "[storage.options]\n" + "".join(f'{key} = "{value}"\n' for key, value in storage["options"].items())
        on_ray = _config(tmp_path, docs, storage["uri"], options=options)
        local = _config(tmp_path, docs, str(tmp_path / "local-index"))
        report = _sync(on_ray, "--address", nodes.address)
        assert (report["files_added"], report["files_failed"]) == (FILES, 0)
        _sync(local, "--engine", "local")
        _assert_same_index(on_ray, local)


def test_a_cluster_that_cannot_be_joined_fails_the_sync_with_the_address_and_changes_nothing(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs)
    config = _config(tmp_path, docs, str(tmp_path / "index"))
    address = closed_address()
    done = subprocess.run(
        [*CLI, "sync", "-c", str(config), "--address", address],
        capture_output=True,
        text=True,
        env={**os.environ, **LOOPBACK},
        timeout=600,
    )
    assert done.returncode != 0
    assert f"cannot join the Ray cluster at {address}: nothing answers there" in done.stderr
    assert LanceStore.of(load_config(config).storage).read_files("docs") == {}


def test_a_head_node_s_port_given_as_a_ray_client_s_fails_the_sync_within_seconds_saying_so(
    cluster: tuple[Cluster, Any], tmp_path: Path
) -> None:
    """Ray Client would try its port for half a minute; the head's GCS answers that it is not one at once."""
    nodes, _ = cluster
    docs = tmp_path / "docs"
    write(docs / "a.md", "# A\n\nSomething to index.\n")
    address = f"ray://{nodes.address}"
    done = subprocess.run(
        [*CLI, "sync", "-c", str(_config(tmp_path, docs, str(tmp_path / "index"))), "--address", address],
        capture_output=True,
        text=True,
        env={**os.environ, **LOOPBACK},
        timeout=15,
    )
    assert done.returncode == 1
    assert (
        f"cannot join the Ray cluster at {address}: what listens there does not answer as a Ray Client server "
        "(UNIMPLEMENTED) (a head node's port takes no ray://?)"
    ) in done.stderr, done.stderr[-3000:]


TOKEN = "0123456789abcdef0123456789abcdef"  # a Ray token (its own are 32 hex digits)
_TOKEN_HEAD = """
import sys
from ray.cluster_utils import Cluster

nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                       "node_ip_address": "127.0.0.1"})
print(nodes.address, flush=True)
sys.stdin.read()  # until the test is done with it
nodes.shutdown()
"""


@pytest.fixture
def token_head() -> Iterator[str]:
    """The address of a head node (one CPU, 127.0.0.1) with Ray's token authentication on and TOKEN its token, in a
    process (and session) of its own: ray.init keeps Ray's settings of its process."""
    env = {**os.environ, **LOOPBACK, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    head = subprocess.Popen(
        [sys.executable, "-c", _TOKEN_HEAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert head.stdin and head.stdout
    try:
        ready, _, _ = select.select([head.stdout], [], [], 120)
        address = head.stdout.readline().strip() if ready else ""
        assert address, "the head node did not start within 120 s"
        yield address
    finally:
        head.stdin.close()  # it shuts its nodes down
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


def test_a_cluster_with_token_authentication_is_joined_with_its_token_and_refused_without_it(
    token_head: str, tmp_path: Path
) -> None:
    """A real head node refuses the probe without the token, in one line that says which credential Ray wants,
    at once; with RAY_AUTH_MODE=token and the token, the probe and ray.init carry it and the sync runs."""
    docs = tmp_path / "docs"
    write(docs / "a.md", "# A\n\nSomething to index.\n")
    config = _config(tmp_path, docs, str(tmp_path / "index"))
    plain = {key: value for key, value in os.environ.items() if not key.startswith("RAY_AUTH")}
    refused = subprocess.run(
        [*CLI, "sync", "-c", str(config), "--address", token_head],
        capture_output=True,
        text=True,
        env={**plain, **LOOPBACK},
        timeout=15,
    )
    assert refused.returncode == 1 and refused.stderr.strip() == (
        f"Error: cannot join the Ray cluster at {token_head}: the cluster refuses this process (UNAUTHENTICATED): "
        "it asks for Ray's token; set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file "
        "RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token) (--address)"
    ), refused.stderr[-3000:]
    done = subprocess.run(
        [*CLI, "sync", "-c", str(config), "--json", "--address", token_head],
        capture_output=True,
        text=True,
        env={**plain, **LOOPBACK, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)[0]["files_added"] == 1


# ---- the crash harness's Ray section: a node lost, the coordinator SIGKILLed, searches throughout ----------------


@pytest.fixture
def held_service(embedder: FastEmbedder, model_folder: Path) -> Iterator[tuple[EmbeddingService, str]]:
    """The embeddings service, holding the chunks of documents past the first wave until released."""
    service = EmbeddingService(embedder)
    first_wave = {f"Record {i} of" for i in range(WAVE)}
    service.faults.hold = lambda texts: (
        any("Record" in text for text in texts) and not any(marker in text for text in texts for marker in first_wave)
    )
    with serve_embeddings(service):
        yield (
            service,
            (
                f'provider = "openai"\nbase_url = "{service.url}"\nmodel = "{service.model}"\n'
                f'tokenizer_path = "{model_folder}"\nmax_input_tokens = 256\n'
            ),
        )
        service.faults.gate.set()


def _held_sync(
    address: str, held_service: tuple[EmbeddingService, str], tmp_path: Path
) -> tuple[Path, subprocess.Popen[str]]:
    """The corpus's config, and a sync of it on the cluster once its second wave waits at the service's gate (its
    first is committed)."""
    service, embedding = held_service
    docs = tmp_path / "docs"
    _corpus(docs)
    config = _config(tmp_path, docs, str(tmp_path / "index"), embedding)
    coordinator = subprocess.Popen(
        [*CLI, "sync", "-c", str(config), "--address", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **LOOPBACK},
    )
    until(lambda: service.faults.held.is_set() or coordinator.poll() is not None, 300, what="the second wave")
    if not service.faults.held.is_set():
        pytest.fail(f"the sync ended before its second wave: {coordinator.communicate()[1][-3000:]}")
    return config, coordinator


def _stopped_mid_wave(
    address: str, held_service: tuple[EmbeddingService, str], tmp_path: Path, number: int
) -> tuple[Path, tuple[int, str]]:
    """A held sync sent `number` (a signal): its config, and its exit status and stderr."""
    config, coordinator = _held_sync(address, held_service, tmp_path)
    try:
        coordinator.send_signal(number)
        _, err = coordinator.communicate(timeout=120)
    finally:
        coordinator.kill()
    return config, (coordinator.returncode, err)


def _search_throughout(
    config: Path, embedder: FastEmbedder, stop: threading.Event, answers: list[int], errors: list[str]
) -> None:
    app = App(load_config(config), embedder=embedder)
    while not stop.is_set():
        try:
            answers.append(
                len(app.search("docs", SearchRequest(query="the change window of team", mode="keyword", top_k=5)).hits)
            )
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_a_node_lost_mid_wave_costs_no_file_and_searches_answer_throughout(
    cluster: tuple[Cluster, Any], held_service: tuple[EmbeddingService, str], embedder: FastEmbedder, tmp_path: Path
) -> None:
    nodes, worker = cluster
    config, coordinator = _held_sync(nodes.address, held_service, tmp_path)
    try:
        stop = threading.Event()
        answers: list[int] = []
        errors: list[str] = []
        searcher = threading.Thread(target=_search_throughout, args=(config, embedder, stop, answers, errors))
        searcher.start()
        nodes.remove_node(worker, allow_graceful=False)  # the worker node dies with its tasks and its indexer
        held_service[0].faults.gate.set()
        out, err = coordinator.communicate(timeout=600)
        stop.set()
        searcher.join()
    finally:
        coordinator.kill()
        nodes.add_node(num_cpus=1, num_gpus=1, node_ip_address="127.0.0.1")  # the next test has two nodes again
    assert coordinator.returncode == 0, err[-3000:]
    assert f"{FILES} added" in out and " 0 failed" in out, out
    _assert_consistent(config, {f"doc{i:03d}.md" for i in range(FILES)})
    print(f"\nnode lost mid-wave: searches {len(answers)}, errors {len(errors)}, empty {answers.count(0)}")
    assert not errors and answers and min(answers) > 0


@pytest.mark.slow
def test_a_coordinator_sigkilled_mid_wave_leaves_whole_waves_and_the_next_sync_completes(
    cluster: tuple[Cluster, Any], held_service: tuple[EmbeddingService, str], embedder: FastEmbedder, tmp_path: Path
) -> None:
    nodes, _ = cluster
    config, _ = _stopped_mid_wave(nodes.address, held_service, tmp_path, signal.SIGKILL)
    first_wave = {f"doc{i:03d}.md" for i in range(WAVE)}
    _assert_consistent(config, first_wave)  # the committed wave, whole; nothing of the wave in flight
    hits = (
        App(load_config(config), embedder=embedder)
        .search("docs", SearchRequest(query="archive record", mode="keyword", top_k=5))
        .hits
    )
    assert hits and {hit.source for hit in hits} <= first_wave

    held_service[0].faults.gate.set()
    report = _sync(config, "--address", nodes.address)
    assert (report["files_added"], report["files_unchanged"], report["files_failed"]) == (FILES - WAVE, WAVE, 0)
    _assert_consistent(config, {f"doc{i:03d}.md" for i in range(FILES)})


@pytest.mark.slow
def test_a_ray_sync_stopped_by_sigterm_mid_wave_is_recorded_as_interrupted_with_whole_waves(
    cluster: tuple[Cluster, Any], held_service: tuple[EmbeddingService, str], embedder: FastEmbedder, tmp_path: Path
) -> None:
    nodes, _ = cluster
    config, (status, err) = _stopped_mid_wave(nodes.address, held_service, tmp_path, signal.SIGTERM)
    assert status != 0 and "interrupted" in err, err[-3000:]
    _assert_consistent(config, {f"doc{i:03d}.md" for i in range(WAVE)})
    recorded = App(load_config(config), embedder=embedder).status("docs")[0]
    assert recorded.last_outcome == "interrupted"
