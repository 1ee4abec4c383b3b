"""[embedding] quantize = "int8": a copy of the real model made once, checked against fp32, kept by hash, made
again when damaged, refused (fp32 stays, one warning) when it cannot be made or comes out too far, and a
different model for rebuild decisions."""

import errno
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from helpers import write

from mcp_kb.digest import file_sha256
from mcp_kb.models import quantize
from mcp_kb.models.fastembed import FastEmbedder, prepare_model
from mcp_kb.models.fastembed_load import model_source
from mcp_kb.models.base import Embedder
from mcp_kb.api import SearchRequest
from helpers import MakeConfig
from mcp_kb.settings import FastembedSettings

WARNINGS = "mcp_kb.models.fastembed_int8"


@pytest.fixture(scope="module")
def int8_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: quantizing the model takes about 15 s."""
    return tmp_path_factory.mktemp("int8-cache")


@pytest.fixture
def settings(
    embedding_config: FastembedSettings, model_folder: Path, int8_cache: Path
) -> Callable[..., FastembedSettings]:
    def make(cache: Path = int8_cache) -> FastembedSettings:
        return embedding_config.model_copy(
            update={"quantize": "int8", "model_path": str(model_folder), "cache_dir": str(cache)}
        )

    return make


def _copy_folder(embedder: FastEmbedder) -> str:
    folder = embedder.settings.model_path
    assert folder is not None
    return folder


def _never_quantize(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise AssertionError("quantized again")

    monkeypatch.setattr(quantize, "_quantize", fail)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_an_int8_copy_is_made_once_checked_against_fp32_and_used(
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    model_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert prepare_model(settings()) == model_folder  # `mcp-kb model fetch` makes the copy ahead of the first sync
    assert 'quantize = "int8": embedded with an int8 copy of it' in model_source(settings())
    _never_quantize(monkeypatch)
    int8 = FastEmbedder(settings())
    assert int8.identity.name == f"{fp32_embedder.identity.name} (int8)"
    assert int8.identity.file_hash != fp32_embedder.identity.file_hash and int8.identity.dimension == 384
    record = json.loads((Path(_copy_folder(int8)) / quantize.RECORD).read_text())
    assert record["int8_sha256"] == int8.identity.file_hash and "mean 0.99" in record["closeness"]
    text = "Employees apply for annual leave in the HR portal two weeks ahead."
    close = _cosine(int8.embed_query(text), fp32_embedder.embed_query(text))
    assert 0.98 <= close < 0.99999  # the int8 model ran: near fp32, not equal


def test_a_damaged_or_deleted_copy_is_made_again(
    settings: Callable[..., FastembedSettings], caplog: pytest.LogCaptureFixture
) -> None:
    made = FastEmbedder(settings())
    folder = Path(_copy_folder(made))
    with open(folder / "model.onnx", "r+b") as graph:  # a bit rot in the weights
        graph.seek(20_000_000)
        graph.write(b"\x00" * 64)
    with caplog.at_level(logging.WARNING):
        repaired = FastEmbedder(settings())
        assert repaired.identity == made.identity
    assert "damaged or incomplete; making it again" in caplog.text
    shutil.rmtree(folder)
    assert FastEmbedder(settings()).identity == made.identity


def test_a_changed_tokenizer_byte_or_a_graph_linked_to_an_endless_file_is_a_damaged_copy(
    settings: Callable[..., FastembedSettings], caplog: pytest.LogCaptureFixture
) -> None:
    """Every file of the copy is checked, not the graph only; links and special files are never read."""
    made = FastEmbedder(settings())
    folder = Path(_copy_folder(made))
    text = "Employees apply for annual leave in the HR portal two weeks ahead."
    vector = made.embed_query(text)
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b'"[UNK]"', b'"[UNX]"', 1))
    with caplog.at_level(logging.WARNING):
        repaired = FastEmbedder(settings())
        assert repaired.identity == made.identity  # remembered: the weights are the same files
        assert np.allclose(repaired.embed_query(text), vector)  # the copy is checked before it embeds anything
    assert "damaged or incomplete; making it again" in caplog.text
    assert b'"[UNK]"' in tokenizer.read_bytes()
    caplog.clear()
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to("/dev/zero")  # hashing it would never end
    with caplog.at_level(logging.WARNING):
        relinked = FastEmbedder(settings())
        assert relinked.identity == made.identity
    assert "damaged or incomplete; making it again" in caplog.text
    assert not (folder / "model.onnx").is_symlink()


def test_switching_to_int8_rebuilds_the_index_says_why_and_searches(
    make_config: MakeConfig, settings: Callable[..., FastembedSettings], tmp_path: Path
) -> None:
    from mcp_kb.app import App

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nApply for annual leave in the HR portal two weeks ahead.\n")
    config = make_config(
        {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}, embedding={"quantize": "none"}
    )
    App(config).sync()
    int8 = App(config.model_copy(update={"embedding": settings()}))
    report = int8.sync()[0]
    assert "embedding model changed" in report.rebuilt and "(int8)" in report.rebuilt
    assert report.chunks_embedded == report.chunks_total
    assert (
        int8.search("docs", SearchRequest(query="how do I ask for time off", mode="vector")).hits[0].source
        == "leave.md"
    )
    assert "embedding model changed" in App(config).sync()[0].rebuilt  # and back to fp32


def test_a_copy_too_far_from_fp32_is_refused_once_with_the_figure(
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(quantize, "MIN_COSINE", 0.9999)
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        refused = FastEmbedder(settings(tmp_path / "strict"))
        assert refused.identity == fp32_embedder.identity  # the fp32 model, as before
    assert "came out too far from the fp32 model" in caplog.text and "mean 0.99" in caplog.text
    assert "embedding with the fp32 model" in caplog.text
    caplog.clear()
    _never_quantize(monkeypatch)  # the refusal is remembered: the next start does not try again
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        again = FastEmbedder(settings(tmp_path / "strict"))
        assert again.identity == fp32_embedder.identity and not caplog.text  # remembered, with the weights' hash
        assert np.allclose(again.embed_query("annual leave"), fp32_embedder.embed_query("annual leave"))
    assert caplog.text.count("too far from the fp32 model") == 1  # said once by each process that loads it


def test_a_graph_the_quantizer_cannot_handle_leaves_fp32_with_one_warning(
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def unsupported(*_: object) -> None:
        raise RuntimeError("Unsupported op type: FancyAttention")

    monkeypatch.setattr(quantize, "_quantize", unsupported)
    copies = tmp_path / "cache" / "mcp-kb-int8"
    model_path = settings().model_path
    assert model_path is not None
    name = file_sha256(Path(model_path) / "model.onnx")[:16]
    abandoned, at_work = copies / f".{name}.4242.building", copies / f".{name}.4343.building"
    write(abandoned / "model.onnx", "left by a process killed two hours ago")
    os.utime(abandoned, (time.time() - 7200,) * 2)
    write(at_work / "model.onnx", "another process, making its copy right now")
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        model = FastEmbedder(settings(tmp_path / "cache"))
        vector = model.embed_query("annual leave")
    assert model.identity == fp32_embedder.identity
    assert np.allclose(vector, fp32_embedder.embed_query("annual leave"))
    assert len(caplog.records) == 1 and "Unsupported op type: FancyAttention" in caplog.text
    assert sorted(p.name for p in copies.glob("*.building")) == [at_work.name]  # ours and the abandoned one: gone


def test_a_cache_that_cannot_be_written_leaves_fp32_and_is_tried_again(
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write(tmp_path / "cache" / "mcp-kb-int8", "a file where the copies' folder should be")
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        assert FastEmbedder(settings(tmp_path / "cache")).identity == fp32_embedder.identity
    assert "could not be written" in caplog.text and "embedding with the fp32 model" in caplog.text
    (tmp_path / "cache" / "mcp-kb-int8").unlink()  # space again: the next start tries again (nothing remembered)
    tried: list[tuple[Path, ...]] = []

    def quantizing(*paths: Path) -> float:
        tried.append(paths)
        return 1 / 0

    monkeypatch.setattr(quantize, "_quantize", quantizing)
    _ = FastEmbedder(settings(tmp_path / "cache")).identity
    assert len(tried) == 1


def test_a_disk_that_fills_while_quantizing_leaves_fp32_and_nothing_behind(
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tried again once the cache has more free space, or an hour later (test_quantize_cache.py fills a real disk)."""

    def full(_: Path, int8: Path) -> None:
        int8.write_bytes(b"\x08\x07" * 1000)  # a part written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(quantize, "_quantize", full)
    free = [10 << 30]  # what the cache's file system has free, whatever other writers do to the real one
    monkeypatch.setattr(quantize, "_free_bytes", lambda _: free[0])
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        assert FastEmbedder(settings(tmp_path / "cache")).identity == fp32_embedder.identity
    assert "No space left on device" in caplog.text and "embedding with the fp32 model" in caplog.text
    copies = tmp_path / "cache" / "mcp-kb-int8"
    [unkept] = copies.glob("*.unkept.json")
    assert len(list(copies.iterdir())) == 2  # and the verdict that the model was not quantized: no part, no refusal
    caplog.clear()
    _never_quantize(monkeypatch)  # the next starts within the hour do not quantize for nothing
    with caplog.at_level(logging.WARNING, logger=WARNINGS):
        assert FastEmbedder(settings(tmp_path / "cache")).identity == fp32_embedder.identity
    assert "No space left on device" in caplog.text
    assert "tried again once the cache has more free space, or 60 minutes after" in caplog.text
    tried: list[tuple[Path, ...]] = []

    def quantizing(*paths: Path) -> float:
        tried.append(paths)
        return 1 / 0

    monkeypatch.setattr(quantize, "_quantize", quantizing)
    free[0] += 1 << 20  # space made: the next start tries again
    _ = FastEmbedder(settings(tmp_path / "cache")).identity
    assert len(tried) == 1


def test_a_copy_that_could_not_be_kept_is_tried_again_an_hour_later_whatever_the_free_space(
    settings: Callable[..., FastembedSettings], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def place_taken(*_: object) -> None:
        raise OSError(errno.EEXIST, "File exists")

    monkeypatch.setattr(quantize, "_quantize", place_taken)
    monkeypatch.setattr(quantize, "_free_bytes", lambda _: 10 << 30)
    _ = FastEmbedder(settings(tmp_path / "cache")).identity
    [unkept] = (tmp_path / "cache" / "mcp-kb-int8").glob("*.unkept.json")
    _never_quantize(monkeypatch)
    _ = FastEmbedder(settings(tmp_path / "cache")).identity  # no more space than then: not within the hour
    record = json.loads(unkept.read_text())
    unkept.write_text(json.dumps({**record, "at": record["at"] - quantize.RETRY_WRITE_AFTER_SECONDS}))
    tried: list[tuple[Path, ...]] = []

    def quantizing(*paths: Path) -> float:
        tried.append(paths)
        return 1 / 0

    monkeypatch.setattr(quantize, "_quantize", quantizing)
    _ = FastEmbedder(settings(tmp_path / "cache")).identity  # an hour later: tried again
    assert len(tried) == 1


def test_queries_never_search_an_int8_index_with_fp32_vectors(
    make_config: MakeConfig,
    settings: Callable[..., FastembedSettings],
    fp32_embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server whose int8 copy cannot be had (here: refused) embeds queries with fp32: on an index of int8
    vectors it answers from keyword search, saying why, and its status shows it."""
    from mcp_kb.app import App

    write(tmp_path / "docs" / "leave.md", "# Leave\n\nApply for annual leave in the HR portal two weeks ahead.\n")
    write(tmp_path / "docs" / "parking.md", "# Parking\n\nThe garage opens at seven; badges open the gate.\n")
    config = make_config(
        {"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}, embedding=settings().model_dump()
    )
    built = App(config)
    built.sync()
    model = built.status("docs")[0].model
    assert model and "(int8)" in model.name and not built.status("docs")[0].query_model_differs
    monkeypatch.setattr(quantize, "MIN_COSINE", 0.9999)  # another machine's cache, where the copy is refused
    served = App(config.model_copy(update={"embedding": settings(tmp_path / "other-cache")}))
    result = served.search("docs", SearchRequest(query="annual leave portal", mode="hybrid"))
    assert result.mode == "keyword" and result.hits[0].source == "leave.md"
    differs = (
        f"the index holds vectors of {fp32_embedder.identity.name} (int8) (384-d) and queries here are embedded "
        f"with {fp32_embedder.identity.name} (384-d)"
    )
    assert result.notes[0].startswith(f"vector search is off: {differs}; answered from keyword search")
    assert served.status("docs")[0].query_model_differs == differs
    assert built.search("docs", SearchRequest(query="annual leave portal", mode="hybrid")).mode == "hybrid"


def test_a_model_quantized_already_is_used_as_it_is_and_the_verdict_is_remembered(
    settings: Callable[..., FastembedSettings],
    embedder: FastEmbedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An int8 export (here: the copy made above, as a model folder of its own) is never quantized twice, and
    quantize = "int8" on it names the same model as "none": switching rebuilds nothing."""
    export = Path(_copy_folder(FastEmbedder(settings())))
    ready_made = settings(tmp_path / "cache").model_copy(update={"model_path": str(export)})
    _never_quantize(monkeypatch)
    with caplog.at_level(logging.INFO, logger=WARNINGS):
        as_is = FastEmbedder(ready_made)
        assert as_is.identity == FastEmbedder(ready_made.model_copy(update={"quantize": "none"})).identity
    assert as_is.identity.name == embedder.config.model and "(int8)" not in as_is.identity.name
    assert "quantized already (DequantizeLinear, DynamicQuantizeLinear, MatMulInteger)" in caplog.text
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
    text = "Employees apply for annual leave in the HR portal two weeks ahead."
    assert np.allclose(as_is.embed_query(text), embedder.embed_query(text), atol=1e-6)  # the same int8 weights

    import onnx

    monkeypatch.setattr(onnx, "load", lambda *_, **__: 1 / 0)  # the verdict is remembered: the graph is not read
    assert FastEmbedder(ready_made).settings.model_path == str(export)


def test_a_server_runs_its_model_without_the_memory_arena_and_a_sync_with_it(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    """A server answers queries for long: onnxruntime's arena would keep a sync's batch memory; the vectors are
    the same either way."""
    from mcp_kb.app import App

    config = make_config({"name": "docs", "description": "d", "paths": [str(tmp_path)]})
    served, synced = App(config, serving=True).embedder, App(config).embedder

    def arena(embedder: Embedder) -> bool:
        assert isinstance(embedder, FastEmbedder)
        return bool(cast(Any, embedder.model).model.model.get_session_options().enable_cpu_mem_arena)

    text = "Employees apply for annual leave in the HR portal two weeks ahead."
    assert np.array_equal(served.embed_query(text), synced.embed_query(text))
    assert (arena(served), arena(synced)) == (False, True)
