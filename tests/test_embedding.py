"""Embedding: loading the real model, identity, tokenizer, and clear errors."""

import numpy as np
import pytest

from mcp_kb.config import EmbeddingConfig
from mcp_kb.models.fastembed import FastEmbedder, load_tokenizer
from mcp_kb.errors import ModelError


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
