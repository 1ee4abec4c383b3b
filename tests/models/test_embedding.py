"""Embedding: loading the real model, identity, tokenizer, and clear errors."""

import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest
from fake_hub import FakeHub, serve_hub
from helpers import write

from mcp_kb.settings import FastembedSettings
from mcp_kb.errors import ModelError
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.models.fastembed_tokenizer import load_tokenizer


def test_vectors_are_unit_length_and_batch_independent(fp32_embedder: FastEmbedder) -> None:
    vectors = fp32_embedder.embed_batch(["annual leave policy", "error code E5021"])
    alone = fp32_embedder.embed_batch(["error code E5021"])
    assert vectors.shape == (2, fp32_embedder.identity.dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[1], alone[0], atol=1e-5)


def test_int8_vectors_move_only_a_little_with_their_batch(embedder: FastEmbedder) -> None:
    """The default int8 model quantizes each batch's activations with one scale: a text's vector depends a
    little on its batch mates, far less than texts differ."""
    assert embedder.identity.name.endswith("(int8)")
    vectors = embedder.embed_batch(["annual leave policy", "error code E5021"])
    alone = embedder.embed_batch(["error code E5021"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert 0.99 < float(vectors[1] @ alone[0]) < 0.99999 and float(vectors[0] @ vectors[1]) < 0.5


def test_identity_names_model_dimension_and_file_hash(embedder: FastEmbedder) -> None:
    identity = embedder.identity
    assert identity.dimension == 384 and len(identity.file_hash) == 64


def test_missing_model_folder_says_how_to_fix(tmp_path: Path) -> None:
    broken = FastEmbedder(FastembedSettings(model="sentence-transformers/all-MiniLM-L6-v2", model_path=str(tmp_path)))
    with pytest.raises(ModelError, match="has no model.onnx .the file fastembed loads .*model_path.*model fetch --to"):
        broken.embed_query("x")


def test_an_empty_folder_for_the_default_model_names_the_file_that_model_needs(tmp_path: Path) -> None:
    default = FastEmbedder(FastembedSettings(model_path=str(tmp_path)))  # paraphrase-multilingual-MiniLM-L12-v2
    with pytest.raises(ModelError) as missing:
        default.embed_query("x")
    assert "has no model_optimized.onnx" in str(missing.value) and "model.onnx," not in str(missing.value)


def test_a_folder_of_another_model_names_both_settings(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"weights of all-MiniLM-L6-v2")
    other = FastEmbedder(
        FastembedSettings(model="sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", model_path=str(tmp_path))
    )
    with pytest.raises(
        ModelError,
        match=r"holds another model than .*paraphrase-multilingual.*"
        r"model_optimized\.onnx; the folder has model\.onnx\): set "
        r"MCP_KB_EMBEDDING_MODEL to the folder's model",
    ) as wrong:
        other.embed_query("x")
    # one line: the models fastembed loads from model.onnx are many, and listed under --verbose
    assert "--verbose lists" in str(wrong.value) and "thenlper/gte-large" not in str(wrong.value)
    named = tmp_path / "all-MiniLM-L6-v2"  # a folder named after its model: that one is offered
    named.mkdir()
    (named / "model.onnx").write_bytes(b"weights of all-MiniLM-L6-v2")
    with pytest.raises(ModelError, match=r"to the folder's model \(sentence-transformers/all-MiniLM-L6-v2\?\)"):
        FastEmbedder(other.config.model_copy(update={"model_path": str(named)})).embed_query("x")
    (named / "model.onnx").unlink()
    named.rmdir()
    (tmp_path / "model.onnx").unlink()
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"weights of another model")
    with pytest.raises(ModelError) as nested:
        FastEmbedder(other.config).embed_query("x")
    assert "the folder has onnx/model.onnx" in str(nested.value) and "all-MiniLM-L6-v2" not in str(nested.value)


def test_tokenizer_knows_where_the_model_truncates(embedding_config: FastembedSettings) -> None:
    tokenizer = load_tokenizer(embedding_config)
    assert tokenizer.max_tokens == 256
    assert tokenizer.unknown_share("年假申请流程") > 0.3 and tokenizer.unknown_share("annual leave") == 0.0


@pytest.mark.parametrize(
    "limits",
    [
        {"model_max_length": 256},
        {"model_max_length": 512, "max_length": 128},
        {"model_max_length": 1000000000000000019884624838656, "max_length": 384},
        {"model_max_length": 0, "max_length": 300},
        {"model_max_length": None, "max_length": True, "x": 2},
        {"model_max_length": "512"},
    ],
)
def test_the_truncation_length_is_the_one_fastembed_works_out(
    model_folder: Path, tmp_path: Path, limits: dict[str, Any]
) -> None:
    """mcp-kb reads the limit itself (fastembed's loader imports all of fastembed): both must agree, or refuse
    alike."""
    from fastembed.common.preprocessor_utils import load_tokenizer as fastembeds_loader

    from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

    settings = {**json.loads((model_folder / "tokenizer_config.json").read_text()), **limits}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    (tmp_path / "tokenizer.json").write_bytes((model_folder / "tokenizer.json").read_bytes())
    try:
        truncation = fastembeds_loader(tmp_path)[0].truncation
        assert truncation is not None
        expected = truncation["max_length"]
    except ValueError:
        with pytest.raises(ModelError, match="cannot read the tokenizer.*no usable model_max_length"):
            ModelTokenizer(tmp_path)
        return
    assert ModelTokenizer(tmp_path).max_tokens == expected


def test_a_tokenizer_loads_at_first_use_and_travels_as_its_folder(model_folder: Path, tmp_path: Path) -> None:
    import pickle

    from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

    tokenizer = ModelTokenizer(model_folder)
    sent = pickle.dumps(tokenizer)
    assert tokenizer._tokenizer is None and len(sent) < 2_000  # not the tokenizer's 700 kB of vocabulary
    counts = tokenizer.count(["annual leave policy", "年假"])
    assert len(pickle.dumps(tokenizer)) < 2_000 and pickle.loads(sent).count(["annual leave policy", "年假"]) == counts
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((model_folder / name).read_bytes())
    (tmp_path / "tokenizer.json").write_text("{broken")
    broken = ModelTokenizer(tmp_path)  # its limit reads at once; the rest fails at first use, with the fix
    with pytest.raises(ModelError, match=f"cannot read the tokenizer in {tmp_path}.*model_path"):
        broken.count(["x"])


def test_without_a_model_and_without_network_a_command_fails_fast_with_its_fix(tmp_path: Path) -> None:
    """fastembed alone retried for about 40 s; one attempt at a hub that refuses (loopback) must be quick."""
    import time

    write(tmp_path / "docs" / "a.md", "# A\n\nSome text.\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_")}
    env.update(
        {
            "MCP_KB_EMBEDDING_MODEL": "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "FASTEMBED_CACHE_PATH": str(tmp_path / "empty-cache"),
        }
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    [error] = result.stderr.strip().splitlines()  # one line: fastembed's own download log is silenced
    assert error.startswith("Error: ") and "paraphrase-multilingual-MiniLM-L12-v2" in error and "model_path" in error
    assert elapsed < 15, f"took {elapsed:.1f} s"


HUB_REPO = "Qdrant/all-MiniLM-L6-v2-onnx"  # where fastembed downloads all-MiniLM-L6-v2 from
HUB_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "model.onnx"]


@pytest.fixture
def hub(model_folder: Path) -> Iterator[FakeHub]:
    """The tests' model served as a model hub on 127.0.0.1: downloads run for real."""
    with serve_hub(FakeHub(HUB_REPO, model_folder, HUB_FILES)) as served:
        yield served


def _mcp_kb(tmp_path: Path, hub_url: str, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """The command in a fresh process with an empty model cache and the hub at hub_url."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_")}
    env.update(
        {
            "MCP_KB_EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
            "HF_ENDPOINT": hub_url,
            "FASTEMBED_CACHE_PATH": str(tmp_path / "cache"),
            **variables,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "mcp_kb", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=300,
    )


def test_chunks_fetches_only_the_tokenizer(tmp_path: Path, hub: FakeHub) -> None:
    write(tmp_path / "guide.md", "# Guide\n\n## Install\n\nRun the installer, then restart.\n")
    result = _mcp_kb(tmp_path, hub.url, "chunks", "guide.md")
    assert result.returncode == 0, result.stderr
    assert "Guide › Install" in result.stdout
    assert "model.onnx" not in hub.fetched and "tokenizer.json" in hub.fetched
    hub.fetched.clear()
    assert _mcp_kb(tmp_path, hub.url, "chunks", "guide.md").returncode == 0
    assert hub.fetched == []  # kept in the cache


def test_chunks_without_tokenizer_or_network_says_what_is_missing(tmp_path: Path) -> None:
    write(tmp_path / "guide.md", "# Guide\n\nText.\n")
    result = _mcp_kb(tmp_path, "http://127.0.0.1:9", "chunks", "guide.md")
    assert result.returncode == 1
    [error] = result.stderr.strip().splitlines()
    assert "the tokenizer of embedding model" in error and "is not on this machine" in error and "model_path" in error


def test_a_missing_model_is_one_error_of_ours_not_fastembeds_own_lines(tmp_path: Path) -> None:
    """Loading a model that is neither here nor reachable (as the suite does without a model) raises our error,
    with its fix; fastembed's four ERROR lines (one per place it looked) used to be printed first."""
    code = (
        "from mcp_kb.models.fastembed import FastEmbedder\n"
        "from mcp_kb.settings import FastembedSettings\n"
        "try:\n"
        "    FastEmbedder(FastembedSettings(model='sentence-transformers/all-MiniLM-L6-v2')).embed_query('x')\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_")}
    env.update({"HF_ENDPOINT": "http://127.0.0.1:9", "FASTEMBED_CACHE_PATH": str(tmp_path / "cache")})
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.stderr == "" and result.stdout.startswith("ModelError cannot download embedding model"), result


def test_model_fetch_then_status_names_the_source_and_the_copy_serves_offline(tmp_path: Path, hub: FakeHub) -> None:
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is requested in the HR portal.\n")
    before = _mcp_kb(tmp_path, hub.url, "status", "docs")
    assert "not on this machine yet" in before.stdout and "mcp-kb model fetch" in before.stdout

    fetched = _mcp_kb(tmp_path, hub.url, "model", "fetch", "--to", "models/minilm")
    assert fetched.returncode == 0, fetched.stderr
    assert "copied to" in fetched.stdout
    assert 'model = "sentence-transformers/all-MiniLM-L6-v2" and model_path' in fetched.stdout
    assert "model.onnx" in hub.fetched
    assert "fastembed cache" in _mcp_kb(tmp_path, hub.url, "status", "docs").stdout

    offline = {
        "MCP_KB_EMBEDDING_MODEL_PATH": str(tmp_path / "models" / "minilm"),
        "FASTEMBED_CACHE_PATH": str(tmp_path / "other-cache"),
    }
    assert _mcp_kb(tmp_path, "http://127.0.0.1:9", "sync", "docs", **offline).returncode == 0
    found = _mcp_kb(
        tmp_path, "http://127.0.0.1:9", "search", "docs", "where do I request annual leave", "--json", **offline
    )
    assert json.loads(found.stdout)["results"][0]["source"] == "leave.md"
    status = _mcp_kb(tmp_path, "http://127.0.0.1:9", "status", "docs", **offline).stdout
    assert f"folder {tmp_path / 'models' / 'minilm'}" in status


def test_device_cuda_without_a_gpu_warns_and_runs_on_the_cpu(
    embedding_config: FastembedSettings, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    cuda = FastEmbedder(embedding_config.model_copy(update={"device": "cuda"}))
    with caplog.at_level(logging.WARNING, logger="mcp_kb.models.fastembed_device"):
        vector = cuda.embed_query("annual leave")
    assert "no CUDA provider" in caplog.text and "running on the CPU" in caplog.text
    assert vector.shape == (384,)


def test_texts_sorted_by_length_for_batching_come_back_in_input_order(fp32_embedder: FastEmbedder) -> None:
    texts = ["a much longer passage about annual leave, approvals and the HR portal", "E5021", "leave policy"]
    together = fp32_embedder.embed_batch(texts)
    for text, vector in zip(texts, together):
        assert np.allclose(vector, fp32_embedder.embed_batch([text])[0], atol=1e-5)


def test_a_released_model_frees_its_session_and_loads_again_with_the_same_vectors(
    embedding_config: FastembedSettings,
) -> None:
    model = FastEmbedder(embedding_config)
    texts = ["annual leave policy", "error code E5021"]
    before = model.embed_batch(texts)
    session = weakref.ref(cast(Any, model.model).model.model)  # TextEmbedding → its ONNX model → onnxruntime's session
    model.release()
    assert session() is None  # nothing else holds it: its memory is gone
    assert np.allclose(model.embed_batch(texts), before, atol=1e-6)
