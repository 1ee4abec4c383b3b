"""A sync's parsing, chunking and embedding on a Ray cluster (`[sync] engine = "ray"`), for corpora one machine
cannot index in time.

The coordinator (the process that runs the sync) keeps everything sync.py decides: the plan, the writer's lock or
lease, the commits, the state. It sends the new and changed files wave by wave (`[sync] wave_files`), each wave in
batches of files:
- a parse task (one CPU of the cluster) parses and chunks a batch in a worker process with the same hard limits
  per file as a local sync (ingest/workers.py);
- an indexer actor (one per node, holding the model) embeds a parsed batch, reusing the stored vectors of chunk
  contents the index already has, and writes its rows as uncommitted fragments straight to the index storage;
- the coordinator commits the wave at once (its documents' old chunks out, the new ones in: index/fragments.py),
  then their manifest records: a local batch's order, so a local sync's crash rules hold. A coordinator lost
  mid-wave leaves the waves committed before it (the next sync goes on from there); a lost node's tasks run
  again elsewhere (Ray retries them), and files whose tasks cannot are not recorded, so the next sync retries them.
Ray is imported here only, and only by such syncs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import pickle
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import KBError, ModelError
from .index import open_store
from .ingest.sources import SourceFile
from .ingest.workers import Job, Parsed, ParseWorkers, resident_peak_mb
from .lru import BoundedLRU
from .models import create_embedder
from .models.base import TokenCounter
from .settings import Config, EmbeddingConfig, KBConfig, StorageConfig, SyncEngineConfig
from .settings.sync import RAY_CLIENT, RayAddress, check_ray_address, parse_ray_address
from .settings.variables import ENV_RAY_ADDRESS, environment
from .batches import (
    BATCH_FILES,
    BatchContext,
    ParsedFile,
    SyncContext,
    Timer,
    count_batch,
    embedded_rows,
    not_indexed,
    parse_job,
    parsed_files,
    parsing_peak_mb,
    refuse,
    write_readings,
    written_records,
)
from .records import SyncReport
from .slices import sliced
from .stopwatch import Stopwatch
from .vocabulary import LOOPBACK

log = logging.getLogger(__name__)

_RETRIES = 2  # of a task or actor lost with its node (an error of the task itself is not retried)
_CONNECT_SECONDS = 5.0  # for a cluster's address to answer: once to connect, once to a request in Ray's protocol
# A Ray's refusals of a process without its token (Ray's token authentication).
_REFUSED = ("UNAUTHENTICATED", "PERMISSION_DENIED")
_POLL_SECONDS = 1.0  # between two looks at a wave's batches, so that progress moves and Ctrl-C is heard
_RECENT_VECTORS = 20_000  # an indexer's memory of the vectors it embedded (384 floats: ~30 MB)


@dataclass
class IndexedBatch:
    """What an indexer made of a parsed batch: its files (errors of refused documents set), its rows as
    uncommitted fragments, and what that cost."""

    files: list[ParsedFile]
    fragments: bytes = b""
    error: str = ""  # nothing of the batch is written: the model failed, or the cluster lost it
    lost: bool = False  # the cluster lost it (else the model failed)
    chunks_embedded: int = 0
    tokens_embedded: int = 0
    chunks_reused: int = 0
    worker_peak_mb: int = 0
    indexer_peak_mb: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Wave:
    """A wave of a sync's files with their content hashes, in batches: `what` names it in progress ("wave 2/5"),
    among `total` files to index."""

    batches: list[list[tuple[SourceFile, str]]]
    what: str
    total: int


def index_on_ray(config: Config, context: SyncContext, todo: list[SourceFile], hash_by_path: dict[str, str]) -> None:
    """Parse, chunk, embed and write `todo` on the cluster, one commit per wave."""
    report = context.report
    with _cluster(config) as ray, context.timer("cluster"):
        indexers = _start_indexers(ray, config.embedding, config.storage, context.embedder.identity.fingerprint())
        log.info("%s: %d files to index on a Ray cluster of %d nodes", context.kb.name, len(todo), len(indexers))
        waves = sliced(todo, config.sync.wave_files)
        for number, files in enumerate(waves, 1):
            hashed = [(source, hash_by_path[source.doc_id]) for source in files]
            wave = _Wave(sliced(hashed, BATCH_FILES), f"wave {number}/{len(waves)}", len(todo))
            indexed = _run_wave(ray, indexers, config.sync, context, wave)
            _commit_wave(context, indexed)
            report.files_written += len(files)
            context.indexed(report.files_written, len(todo))


@contextmanager
def _cluster(config: Config) -> Iterator[Any]:
    """Ray, connected to the configured cluster (or one of this machine's own), for the length of a sync."""
    try:
        import ray
    except ImportError:
        raise KBError(
            "[sync] engine = \"ray\" needs Ray: pip install 'mcp-kb-server[ray]' (on every node too), "
            "or sync with --engine local"
        ) from None
    joined = not ray.is_initialized()
    if joined:
        _join(ray, config)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # Ray tells of lost nodes on stdout: a --json answer's place
            yield ray
    finally:
        if joined:
            ray.shutdown()


def _join(ray: Any, config: Config) -> None:
    """ray.init on the configured cluster, at the address the probe found a Ray answering; every failure is one
    line naming the setting to fix."""
    address, setting = config.sync.ray_address, config.sync.address_setting(config.source)
    check_ray_address(address, setting)  # here, not when the config loads: other commands ignore RAY_ADDRESS
    cluster = _ray_answers(address, setting)
    try:
        with _warnings_logged(), _signal_handlers_kept():
            ray.init(
                address=cluster.address if cluster else "local",
                logging_level=logging.WARNING,
                log_to_driver=False,
                configure_logging=False,
                **_own_ray(cluster),
            )
    except Exception as exc:  # Ray's own words say what failed (a version mismatch, a node it cannot reach)
        ray.shutdown()  # a join that failed half-way must not pass for a joined cluster at the next sync
        said = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise KBError(f"cannot join the Ray cluster at {address or 'this machine'}: {said} ({setting})") from exc


@contextmanager
def _warnings_logged() -> Iterator[None]:
    """Ray's Python warnings while it starts or joins (a Ray Client's timeout, lancedb's notice of Ray's forks) go
    to the log (-v): a failure says what failed in its one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                log.info("Ray: %s", warning.message)


@contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Ray's start puts its own handlers of SIGTERM and SIGINT in place (print and exit): a sync stopped by either
    must still be recorded as interrupted, so the process's handlers come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in kept.items():
            if handler is not None:
                signal.signal(number, handler)


class _NoCluster(Exception):
    """No Ray answers at an address: why, and what to do."""


def _ray_answers(address: str, setting: str) -> RayAddress | None:
    """The cluster ray.init is to dial for `address` (None: a Ray of the sync's own), once a Ray answered there
    within seconds: Ray itself waits minutes, or without end, where nothing listens, or a server that says nothing,
    speaks another protocol or refuses this process."""
    if not address:
        return None
    cluster = None
    try:
        cluster = _dialled(address)
        _token_as_ray_init(address)
        _connects(cluster)
        _speaks_ray(cluster)
    except _NoCluster as exc:
        raise KBError(
            f"cannot join the Ray cluster at {address}: {exc}{_as_dialled(address, cluster)} ({setting})"
        ) from None
    return cluster


def _token_as_ray_init(address: str) -> None:
    """Ray's token authentication turned on as ray.init does for "auto" (unless RAY_ADDRESS replaces it) when this
    machine has a token (and says so): the probe carries it then, and so does ray.init, given the cluster found."""
    if address != "auto" or environment(ENV_RAY_ADDRESS):
        return
    with contextlib.suppress(ImportError, AttributeError):  # a Ray without token authentication
        _ray_module("_private.authentication.authentication_token_setup").maybe_enable_token_auth_if_token_available(
            warn_if_disabled=False
        )


def _dialled(address: str) -> RayAddress:
    """The cluster ray.init dials for `address`: a Ray Client server as written; a head node as Ray rewrites it
    ("auto": the cluster Ray finds; a loopback host: this machine's network address), so the probe asks there."""
    if address.startswith(RAY_CLIENT):
        return parse_ray_address(address)
    from ray._private.services import canonicalize_bootstrap_address

    found = None
    with contextlib.suppress(ConnectionError):  # "auto", and Ray found none
        found = canonicalize_bootstrap_address(address)
    if not found:
        raise _NoCluster("no Ray cluster runs on this machine; start one (ray start --head) or fix the address")
    try:
        return parse_ray_address(found)
    except ValueError as exc:  # what "auto" found (RAY_ADDRESS, a stale record of `ray start`)
        raise _NoCluster(f"Ray finds {found!r} for it, not a Ray cluster address ({exc}); fix the address") from None


def _as_dialled(address: str, cluster: RayAddress | None) -> str:
    """Why a head node's loopback address finds no Ray: Ray dials elsewhere. That address goes unsaid: views that
    hide the cluster from a token's holder hide the address as written."""
    if cluster is None or address == "auto" or cluster.address == address:
        return ""
    return "; Ray dials a loopback host at this machine's network address instead"


def _connects(cluster: RayAddress) -> None:
    """Something listens there (the reason of a refusal is the clearest there is)."""
    try:
        socket.create_connection((cluster.host.strip("[]"), cluster.port), timeout=_CONNECT_SECONDS).close()
    except (OSError, UnicodeError, ValueError) as exc:  # refused, unreachable, no such name, a name DNS refuses
        why = getattr(exc, "strerror", None) or exc
        raise _NoCluster(f"nothing answers there ({why}); start it (ray start --head) or fix the address") from None


def _speaks_ray(cluster: RayAddress) -> None:
    """What listens answers one request of Ray's own protocol with a deadline: a head node's GCS its cluster id,
    a Ray Client server a ping."""
    import grpc

    try:
        with _ray_channel(cluster.target) as channel:
            answered = _ask_ray(cluster, channel)
    except (ImportError, AttributeError) as exc:  # Ray's internals moved: the connect check above has to do
        log.debug("no probe of Ray's protocol with this Ray (%s)", exc)
        return
    except grpc.RpcError as exc:
        raise _NoCluster(_refusal(cluster, exc.code().name)) from None
    if not answered:
        raise _NoCluster(f"what listens there answers as no {_kind(cluster)} does (an empty reply); fix the address")


def _refusal(cluster: RayAddress, code: str) -> str:
    """Why a Ray's answer with status `code` (a gRPC status's name) is not one to join."""
    if code in _REFUSED:
        return _token_wanted(code)
    if code == "DEADLINE_EXCEEDED":
        return f"what listens there says nothing within {_CONNECT_SECONDS:g} s; fix the address"
    swapped = "a head node's port takes no ray://" if cluster.client else "a Ray Client server's port needs ray://"
    hint = f" ({swapped}?)" if code == "UNIMPLEMENTED" else ""  # the other port of a Ray
    return f"what listens there does not answer as a {_kind(cluster)} ({code}){hint}; fix the address"


def _token_wanted(code: str) -> str:
    """A cluster that refuses this process wants Ray's token authentication and its token: the probe carried the
    one ray.init would (none unless RAY_AUTH_MODE=token), and ray.init would retry for half a minute, then not say
    why."""
    token = "the cluster's token in RAY_AUTH_TOKEN (or in a file RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token)"
    if _token_auth_on():
        return f"the cluster refuses this process's Ray token ({code}); set {token}"
    return f"the cluster refuses this process ({code}): it asks for Ray's token; set RAY_AUTH_MODE=token and {token}"


def _token_auth_on() -> bool:
    """Ray's token authentication is on in this process: its gRPC channels carry the token."""
    try:
        on: bool = _ray_module("_private.authentication.authentication_utils").is_token_auth_enabled()
    except (ImportError, AttributeError):  # a Ray without it
        return False
    return on


def _kind(cluster: RayAddress) -> str:
    return "Ray Client server" if cluster.client else "Ray head node"


def _ask_ray(cluster: RayAddress, channel: Any) -> bool:
    """One request a Ray answers at once, and whether the answer is one: a Ray Client server's ping (a JSON
    object), a head node's cluster id (not empty)."""
    if cluster.client:
        client = _ray_module("core.generated.ray_client_pb2")
        reply = (
            _ray_module("core.generated.ray_client_pb2_grpc")
            .RayletDriverStub(channel)
            .ClusterInfo(client.ClusterInfoRequest(type=client.ClusterInfoType.PING), timeout=_CONNECT_SECONDS)
        )
        try:
            return isinstance(json.loads(reply.json), dict)
        except ValueError:
            return False
    gcs = _ray_module("core.generated.gcs_service_pb2")
    reply = (
        _ray_module("core.generated.gcs_service_pb2_grpc")
        .NodeInfoGcsServiceStub(channel)
        .GetClusterId(gcs.GetClusterIdRequest(), timeout=_CONNECT_SECONDS)
    )
    return bool(reply.cluster_id)


def _ray_channel(target: str) -> Any:
    """A gRPC channel as Ray opens its own (TLS when RAY_USE_TLS says so, its token when its token authentication
    is on)."""
    try:
        channels = _ray_module("_private.grpc_utils")
    except ImportError:  # a Ray before its token authentication kept it among its utilities
        channels = _ray_module("_private.utils")
    return channels.init_grpc_channel(target)


def _ray_module(name: str) -> Any:
    """A module of Ray's internals (its gRPC messages and channels, which carry no types)."""
    return importlib.import_module(f"ray.{name}")


def _own_ray(cluster: RayAddress | None) -> dict[str, object]:
    """A Ray of the sync's own (no address given) stays on this machine's loopback, without a dashboard."""
    return {} if cluster else {"_node_ip_address": LOOPBACK, "include_dashboard": False}


def _start_indexers(
    ray: Any, embedding: EmbeddingConfig, storage: StorageConfig, fingerprint: dict[str, object]
) -> list[Any]:
    """One indexer per node with CPUs, placed there while the node lives (elsewhere once it is lost). The nodes get
    the settings of the model and of the index storage, nothing else of the configuration (its server token,
    its issuers' secrets)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [node for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU")]
    if not nodes:
        raise KBError("the Ray cluster has no node with a CPU to parse and embed on")
    actor = ray.remote(Indexer)
    on_gpu = [_takes_gpu(node, embedding) for node in nodes]
    log.info("a Ray cluster of %d nodes; indexers holding a GPU: %d", len(nodes), sum(on_gpu))
    # A call waits for its indexer's restart (elsewhere, once its node is lost); the restarts are what is bounded.
    return [
        actor.options(
            num_cpus=0,
            num_gpus=int(gpu),
            max_restarts=_RETRIES,
            max_task_retries=-1,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=True),
        ).remote(embedding, storage, fingerprint, int(node["Resources"]["CPU"]))
        for node, gpu in zip(nodes, on_gpu)
    ]


def _takes_gpu(node: dict[str, Any], embedding: EmbeddingConfig) -> bool:  # a node of ray.nodes()
    """An indexer holds one of its node's GPUs when the model runs in it (a local model whose `device` is not "cpu"):
    Ray then shows it that GPU alone, and `device = "auto"` uses it where onnxruntime offers CUDA."""
    return node["Resources"].get("GPU", 0) >= 1 and getattr(embedding, "device", "cpu") != "cpu"


def _run_wave(
    ray: Any, indexers: list[Any], settings: SyncEngineConfig, context: SyncContext, wave: _Wave
) -> list[IndexedBatch]:
    """Every batch of a wave parsed and indexed on the cluster, in batch order; a batch whose tasks were lost
    for good comes back with no fragments and the reason."""
    kb, target, reuse_from, batches = context.kb, context.target, context.reuse_from, wave.batches
    parse = ray.remote(parse_files).options(num_cpus=1, max_retries=_RETRIES)
    pending = []
    for number, batch in enumerate(batches):
        parsed = parse.remote([parse_job(source, kb) for source, _ in batch], context.counter, settings)
        pending.append(indexers[number % len(indexers)].index.remote(parsed, batch, kb, target, reuse_from))
    results: dict[int, IndexedBatch] = {}
    waiting = dict(enumerate(pending))
    try:
        while waiting:
            ready, _ = ray.wait(list(waiting.values()), num_returns=1, timeout=_POLL_SECONDS)
            for ref in ready:
                number = next(n for n, r in waiting.items() if r == ref)
                del waiting[number]
                results[number] = _outcome(ray, ref, batches[number])
                done = sum(len(batches[n]) for n in results)
                doing = f"{wave.what}: {done}/{sum(map(len, batches))} parsed and embedded"
                context.indexed(context.report.files_written, wave.total, doing)
    finally:
        for ref in waiting.values():  # the sync stopped (Ctrl-C, a cancel): nothing more is wanted of the wave
            with contextlib.suppress(Exception):  # already done, or its worker gone: nothing to stop
                ray.cancel(ref)
    return [results[number] for number in range(len(batches))]


def _outcome(ray: Any, ref: Any, batch: list[tuple[SourceFile, str]]) -> IndexedBatch:
    """A batch's result; a task that failed by itself fails the sync with its own error, as in a local sync (the
    index could not be written, a fault); one lost with its node past the retries fails only its files."""
    try:
        indexed: IndexedBatch = ray.get(ref)
        return indexed
    except ray.exceptions.RayError as exc:
        cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) else exc
        if not isinstance(cause, ray.exceptions.RayError):  # the task's own failure, not the cluster's
            raise cause from None
        files = [ParsedFile(source, file_hash, []) for source, file_hash in batch]
        log.warning("a batch of %d files was lost on the Ray cluster: %s", len(batch), exc)
        return IndexedBatch(files, error=f"the Ray cluster lost its batch ({type(exc).__name__})", lost=True)


def _commit_wave(context: SyncContext, indexed: list[IndexedBatch]) -> None:
    """One commit for the wave's chunks, then its manifest records (a local batch's order)."""
    store, kb, target, report, timer = context.store, context.kb, context.target, context.report, context.timer
    written = []
    for batch in indexed:
        for stage, seconds in batch.seconds.items():  # the cluster's seconds, summed over its workers
            timer.add(stage, seconds)
        report.worker_peak_mb = max(report.worker_peak_mb, batch.worker_peak_mb)
        report.indexer_peak_mb = max(report.indexer_peak_mb, batch.indexer_peak_mb)
        if batch.error:
            not_indexed(kb, batch.files, KBError(batch.error) if batch.lost else ModelError(batch.error), report)
            continue
        report.chunks_embedded += batch.chunks_embedded
        report.tokens_embedded += batch.tokens_embedded
        report.chunks_reused += batch.chunks_reused
        written.append(batch)
    with timer("commit"):
        paths = [item.source.doc_id for batch in written for item in batch.files if not item.retry]
        store.commit_fragments(kb.name, target, paths, [batch.fragments for batch in written])
        write_readings(store, kb.name, target, [item for batch in written for item in batch.files])
        store.write_files(kb.name, target, [record for batch in written for record in written_records(batch.files)])
    for batch in written:
        count_batch(kb, batch.files, report)


def parse_files(jobs: list[Job], counter: TokenCounter, settings: SyncEngineConfig) -> tuple[list[Parsed], float]:
    """A Ray task: a batch of files parsed and chunked, each in a worker process within the per-file limits; and
    the seconds that took."""
    watch = Stopwatch()
    parsed = _parse_workers(counter, settings).parse(jobs)
    return parsed, watch.seconds


_parsers: dict[bytes, ParseWorkers] = {}  # per Ray worker process: its parsing process serves later tasks too


def _parse_workers(counter: TokenCounter, settings: SyncEngineConfig) -> ParseWorkers:
    key = pickle.dumps((counter, settings))
    if key not in _parsers:
        for stale in _parsers.values():  # another sync's: let its process go
            stale.close()
        _parsers.clear()
        _parsers[key] = ParseWorkers(settings.model_copy(update={"workers": 1}), counter, 1)
    return _parsers[key]


class Indexer:
    """A Ray actor: embeds parsed batches with its own copy of the model and writes their rows as fragments."""

    def __init__(self, embedding: EmbeddingConfig, storage: StorageConfig, fingerprint: dict[str, object], cpus: int):
        if getattr(embedding, "threads", 0) is None:  # Ray caps a worker's threads at 1 unless told
            embedding = embedding.model_copy(update={"threads": cpus})
        self.embedder = create_embedder(embedding)
        self.store = open_store(storage)
        self.fingerprint = fingerprint
        # Vectors this indexer embedded for a generation that its wave has not committed yet: the same content in
        # a later batch of the wave is not embedded again (a local sync finds it committed).
        self.recent: BoundedLRU[str, Any] = BoundedLRU(_RECENT_VECTORS)
        self.recent_for = ("", "")

    def index(
        self,
        parsed: tuple[list[Parsed], float],
        sources: list[tuple[SourceFile, str]],
        kb: KBConfig,
        target: str,
        reuse_from: str | None,
    ) -> IndexedBatch:
        outcomes, parse_seconds = parsed
        files = parsed_files(sources, outcomes)
        report = SyncReport(kb.name, seconds={"parse": parse_seconds}, worker_peak_mb=parsing_peak_mb(outcomes))
        context = BatchContext(self.store, kb, target, reuse_from, self.embedder, report, Timer(report))
        batch = IndexedBatch(files, worker_peak_mb=report.worker_peak_mb, seconds=report.seconds)
        if self.recent_for != (kb.name, target):
            self.recent.clear()
            self.recent_for = (kb.name, target)
        try:
            self._check_model()
            rows_by_path = embedded_rows(context, files, _quiet, self.recent)
        except ModelError as exc:
            batch.error = str(exc)
            return batch
        with context.timer("write"):
            rows, refused = self.store.chunk_rows(kb.name, target, rows_by_path)
            batch.fragments = self.store.write_fragments(kb.name, target, rows)
        refuse(files, refused)
        batch.chunks_embedded, batch.tokens_embedded = report.chunks_embedded, report.tokens_embedded
        batch.chunks_reused = report.chunks_reused
        batch.indexer_peak_mb = resident_peak_mb()
        return batch

    def _check_model(self) -> None:
        """The node's model must be the coordinator's: vectors of two models never share an index."""
        if self.embedder.identity.fingerprint() != self.fingerprint:
            raise ModelError(
                f"a Ray node's embedding model ({self.embedder.identity.name}) is not the one this "
                f"index was built with ({self.fingerprint.get('name')}): install the same model at the "
                "same path on every node"
            )


def _quiet(done: int, total: int) -> None:
    """An indexer's embedding progress: the coordinator reports whole batches."""
