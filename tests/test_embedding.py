"""Embedding: loading the real model, identity, tokenizer, and clear errors."""

import numpy as np
import pytest
from helpers import write

from mcp_kb.config import EmbeddingConfig
from mcp_kb.errors import ModelError
from mcp_kb.models.fastembed import FastEmbedder, load_tokenizer


def test_vectors_are_unit_length_and_batch_independent(embedder):
    vectors = embedder.embed_batch(["annual leave policy", "error code E5021"])
    alone = embedder.embed_batch(["error code E5021"])
    assert vectors.shape == (2, embedder.identity.dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[1], alone[0], atol=1e-5)


def test_identity_names_model_dimension_and_file_hash(embedder):
    identity = embedder.identity
    assert identity.dimension == 384 and len(identity.file_hash) == 64


def test_missing_model_folder_says_how_to_fix(tmp_path):
    broken = FastEmbedder(EmbeddingConfig(model="sentence-transformers/all-MiniLM-L6-v2", model_path=str(tmp_path)))
    with pytest.raises(ModelError, match="has no model.onnx.*model_path"):
        broken.embed_query("x")


def test_tokenizer_knows_where_the_model_truncates(embedding_config):
    tokenizer = load_tokenizer(embedding_config)
    assert tokenizer.max_tokens == 256
    assert tokenizer.unknown_share("年假申请流程") > 0.3 and tokenizer.unknown_share("annual leave") == 0.0


def test_without_a_model_and_without_network_a_command_fails_fast_with_its_fix(tmp_path):
    """fastembed alone retried for about 40 s; one attempt at a hub that refuses (loopback) must be quick."""
    import os
    import subprocess
    import sys
    import time

    write(tmp_path / "docs" / "a.md", "# A\n\nSome text.\n")
    config = tmp_path / "kb.toml"
    config.write_text(f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
                      f'paths = ["{tmp_path / "docs"}"]\n', encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_KB_")}
    env.update({"MCP_KB_EMBEDDING_MODEL": "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
                "HF_ENDPOINT": "http://127.0.0.1:9", "FASTEMBED_CACHE_PATH": str(tmp_path / "empty-cache")})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)], env=env,
                            capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    [error] = result.stderr.strip().splitlines()  # one line: fastembed's own download log is silenced
    assert error.startswith("Error: cannot download embedding model") and "model_path" in error
    assert elapsed < 15, f"took {elapsed:.1f} s"
