"""Model identities remembered across processes (models/identities.py)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mcp_kb.models.base import ModelIdentity
from mcp_kb.models.identities import RememberedModel, remember_model, remembered_model
from mcp_kb.models.onnx_session import Recipe
from mcp_kb.models.fastembed import FastEmbedder

IDENTITY = ModelIdentity("some/model", 384, "ab" * 32)


def _remember(weights: Path, cache: Path) -> None:
    remember_model("key", RememberedModel(IDENTITY, weights.parent, None), [weights], cache=cache)


def _recalled(key: str, cache: Path) -> ModelIdentity | None:
    remembered = remembered_model(key, cache=cache)
    return remembered.identity if remembered else None


def test_an_identity_holds_while_its_weights_file_is_the_same(tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"weights")
    _remember(weights, tmp_path / "cache")
    assert _recalled("key", tmp_path / "cache") == IDENTITY
    remembered = remembered_model("key", cache=tmp_path / "cache")
    assert remembered and remembered.folder == tmp_path.resolve()  # where the model lies
    assert _recalled("other key", tmp_path / "cache") is None
    os.utime(weights, ns=(1, 1))  # touched, or replaced by other weights: worked out again
    assert _recalled("key", tmp_path / "cache") is None
    _remember(weights, tmp_path / "cache")
    weights.unlink()
    assert _recalled("key", tmp_path / "cache") is None


def test_a_record_written_before_recipes_is_worked_out_again_once(tmp_path: Path) -> None:
    """A server runs the model without fastembed by the recipe remembered with its identity; a record from before
    recipes has none, so it counts as missing (the next load writes it with one)."""
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"weights")
    recipe = Recipe(tmp_path, "model.onnx", "mean", True)
    remember_model("key", RememberedModel(IDENTITY, weights.parent, recipe), [weights], cache=tmp_path / "cache")
    remembered = remembered_model("key", cache=tmp_path / "cache")
    assert remembered is not None and remembered.recipe == recipe
    records = json.loads((tmp_path / "cache" / "model-identities.json").read_text())
    del records["key"]["recipe"]
    (tmp_path / "cache" / "model-identities.json").write_text(json.dumps(records))
    assert remembered_model("key", cache=tmp_path / "cache") is None


def test_a_damaged_or_unwritable_cache_costs_only_the_work(tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"weights")
    cache = tmp_path / "cache"
    cache.mkdir()
    for garbage in ("{not json", "[1, 2]", json.dumps({"key": {"name": "x"}}), json.dumps({"key": 5})):
        (cache / "model-identities.json").write_text(garbage)
        assert _recalled("key", cache) is None
    _remember(weights, cache)
    assert _recalled("key", cache) == IDENTITY
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    _remember(weights, blocked)  # no error, nothing kept
    assert _recalled("key", blocked) is None
    assert sorted(p.name for p in cache.iterdir()) == ["model-identities.json"]  # no temporary file left


def test_an_int8_identity_holds_while_its_copy_and_the_model_it_was_made_from_are_the_same(tmp_path: Path) -> None:
    copy, source = tmp_path / "int8" / "model.onnx", tmp_path / "fp32" / "model.onnx"
    for weights in (copy, source):
        weights.parent.mkdir()
        weights.write_bytes(b"weights")
    remember_model("key", RememberedModel(IDENTITY, source.parent, None), [copy, source], cache=tmp_path / "cache")
    assert _recalled("key", tmp_path / "cache") == IDENTITY
    os.utime(source, ns=(1, 1))  # the fp32 model was replaced: its copy is another one
    assert _recalled("key", tmp_path / "cache") is None


@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_a_second_process_knows_the_models_identity_without_loading_fastembed(
    tmp_path: Path, embedder: FastEmbedder, fp32_embedder: FastEmbedder, quantize: str
) -> None:
    """What `status` and a sync with nothing to index rely on, for the default int8 copy and the fp32 model."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from mcp_kb.settings import build_config
        from mcp_kb.models.fastembed import FastEmbedder
        config = build_config({{"embedding": {{"quantize": {quantize!r}}}}}, Path.cwd(), None)
        identity = FastEmbedder(config.embedding).identity
        print(identity.name, identity.dimension, identity.file_hash, "fastembed" in sys.modules, sep="|")
    """)
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first, second = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
        for _ in range(2)
    )
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    expected = (embedder if quantize == "int8" else fp32_embedder).identity
    assert first.stdout.split("|") == [expected.name, str(expected.dimension), expected.file_hash, "True\n"]
    assert second.stdout.split("|") == [expected.name, str(expected.dimension), expected.file_hash, "False\n"]


def test_what_a_remembered_identity_is_keyed_by_is_where_the_weights_come_from() -> None:
    from mcp_kb.models.fastembed_load import memory_key
    from mcp_kb.settings import FastembedSettings

    def key(**settings: Any) -> str:
        return memory_key(FastembedSettings(model="sentence-transformers/all-MiniLM-L6-v2", **settings))

    assert key(batch_size=8) == key(batch_size=32, threads=2)  # how it runs: the same weights
    assert len({key(), key(model_path="/models/a"), key(cache_dir="/cache/b"), key(quantize="none")}) == 4
    import onnxruntime  # a copy refused by one onnxruntime is tried again by another

    assert onnxruntime.__version__ in key() and onnxruntime.__version__ not in key(quantize="none")


def test_a_model_from_fastembeds_cache_is_found_again_without_importing_fastembed(
    tmp_path: Path, model_folder: Path
) -> None:
    """With no model_path (the default), the model's folder in fastembed's cache was found through fastembed;
    once remembered, a command finds its tokenizer and says where it is without fastembed."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from mcp_kb.models.base import ModelIdentity
        from mcp_kb.models.fastembed_load import memory_key, model_source
        from mcp_kb.models.fastembed_tokenizer import tokenizer_dir
        from mcp_kb.models.identities import RememberedModel, remember_model
        from mcp_kb.settings import FastembedSettings
        config = FastembedSettings(model="sentence-transformers/all-MiniLM-L6-v2")
        folder = Path({str(model_folder)!r})
        identity = ModelIdentity(config.model, 384, "ab" * 32)
        remember_model(memory_key(config), RememberedModel(identity, folder, None), [folder / "tokenizer.json"])
        print(tokenizer_dir(config), model_source(config), "fastembed" in sys.modules, sep="|")
    """)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_EMBEDDING")}
    answer = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert answer.returncode == 0, answer.stderr
    folder = str(model_folder.resolve())
    directory, source, imported = answer.stdout.strip().split("|")
    assert (directory, imported) == (folder, "False") and source.startswith(f"fastembed cache {folder}; quantize")
