"""The model run without fastembed (models/onnx_session.py) gives fastembed's vectors, and a server uses it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from helpers import ROOT

from mcp_kb.models.fastembed import recipe_of
from mcp_kb.models.fastembed_load import model_files
from mcp_kb.models.onnx_session import OnnxSession, _normalized, _padded_tokenizer, _pooled
from helpers import MakeConfig
from mcp_kb.settings import FastembedSettings
from mcp_kb.models.fastembed import FastEmbedder

_PARTED = (
    "mcp_kb/models/onnx_session.py no longer runs the model as fastembed does (see recipe_of in "
    "mcp_kb/models/fastembed.py: pooling, normalization, the file loaded, or the tokenizer's setup changed)"
)
_CHINESE = [
    "年假怎么申请？请在系统里提交申请，经理批准后生效。",
    "配置文件放在项目根目录下，名为 kb.toml。",
    "如果同步失败，日志会说明是哪一个文件出了问题。",
    "向量检索与关键词检索的结果按排名融合。",
    "每个知识库都有自己的搜索工具，名称和描述来自配置。",
]


def passages(n: int = 1000) -> list[str]:
    """`n` passages of every shape a server embeds: the project's own documentation in paragraphs and sentences,
    Chinese, mixed scripts, long texts cut at the model's limit, and near-empty ones."""
    documents = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    paragraphs = [
        part.strip() for document in documents for part in document.read_text("utf-8").split("\n\n") if part.strip()
    ]
    sentences = [part for paragraph in paragraphs for part in re.split(r"(?<=[.!?])\s+", paragraph) if part]
    shaped = [
        *_CHINESE,
        *(f"{a} {b}" for a, b in zip(_CHINESE, paragraphs)),
        " ".join(paragraphs[:40]),
        "?",
        "a",
        "🙂 emoji ünïcödé",
        "\u200b zero width",
    ]
    found = list(dict.fromkeys(shaped + paragraphs + sentences))
    assert len(found) >= n, "the documentation gives too few passages: add some of your own here"
    return found[:n]


def _in_batches(texts: list[str], embed: Callable[[list[str]], Any], size: int = 32) -> np.ndarray:
    """Vectors of `texts` embedded `size` at a time, in order: an int8 model quantizes its activations per batch,
    so both ways must see the same batches."""
    return np.concatenate(
        [np.asarray(embed(texts[start : start + size]), dtype=np.float32) for start in range(0, len(texts), size)]
    )


@pytest.mark.parametrize("model", ["embedder", "fp32_embedder"])
def test_the_model_run_without_fastembed_gives_fastembeds_vectors(model: str, request: pytest.FixtureRequest) -> None:
    """1,000 passages embedded both ways, the int8 copy a server runs and the fp32 model: cosine >= 0.9999 each."""
    loaded = request.getfixturevalue(model).model  # fastembed's TextEmbedding, as a sync loads it
    recipe = recipe_of(loaded)
    assert recipe is not None, f"fastembed runs {type(model_files(loaded)).__name__} now: {_PARTED}"
    assert Path(cast(Any, model_files(loaded)).model._model_path) == recipe.folder / recipe.model_file, _PARTED
    texts = sorted(passages(), key=len)  # batches of like lengths: little padding to run through the model
    theirs = _in_batches(texts, lambda batch: list(loaded.embed(batch, batch_size=len(batch))))
    ours = _in_batches(texts, OnnxSession(recipe).embed)
    cosines = np.sum(theirs * ours, axis=1) / (np.linalg.norm(theirs, axis=1) * np.linalg.norm(ours, axis=1))
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.9999, f"passage {texts[worst][:60]!r}: cosine {cosines[worst]:.6f}; {_PARTED}"
    assert np.allclose(np.linalg.norm(ours, axis=1), np.linalg.norm(theirs, axis=1), atol=1e-4), _PARTED


def _fastembed_classes() -> list[type[Any]]:
    from fastembed.text.onnx_embedding import OnnxTextEmbedding
    from fastembed.text.pooled_embedding import PooledEmbedding
    from fastembed.text.pooled_normalized_embedding import PooledNormalizedEmbedding

    return [OnnxTextEmbedding, PooledEmbedding, PooledNormalizedEmbedding]


@pytest.mark.parametrize("model_class", _fastembed_classes(), ids=lambda cls: cls.__name__)
def test_each_model_class_is_pooled_and_normalized_as_fastembed_does(model_class: type[Any], tmp_path: Path) -> None:
    """The recipe read off each model class fastembed runs plainly (CLS pooling of BGE-like models, mean pooling of
    the multilingual default, mean and normalized of MiniLM) turns a model's output into fastembed's vectors."""
    from types import SimpleNamespace

    from fastembed.common.onnx_model import OnnxOutputContext

    inner = object.__new__(model_class)  # no model loaded: only its output handling is asked
    inner._model_dir = tmp_path
    inner.model_description = SimpleNamespace(model_file="model.onnx", additional_files=[])
    recipe = recipe_of(cast(Any, SimpleNamespace(model=inner)))  # a TextEmbedding as far as recipe_of reads one
    assert recipe is not None, f"{model_class.__name__} is no longer run plainly: {_PARTED}"
    rng = np.random.default_rng(3)
    output = rng.normal(size=(4, 9, 16)).astype(np.float32)
    mask = np.array([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7, [1] + [0] * 8], dtype=np.int64)
    theirs = np.asarray(list(model_class._post_process_onnx_output(inner, OnnxOutputContext(output, mask))))
    pooled = _pooled(output, mask, recipe.pooling)
    ours = _normalized(pooled) if recipe.normalize else pooled
    assert np.allclose(ours, theirs, atol=1e-6), _PARTED


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"padding_side": "left"},
        {"truncation_side": "left", "model_max_length": 12},
        {"max_length": 8},
        {"extra_special": True},
    ],
)
def test_the_tokenizer_is_set_up_as_fastembed_sets_it_up(
    model_folder: Path, tmp_path: Path, changes: dict[str, Any]
) -> None:
    """Truncation, padding and special tokens as fastembed's loader makes them, for the settings models ship."""
    import json
    import shutil

    from fastembed.common.preprocessor_utils import load_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        if (model_folder / name).is_file():
            shutil.copy(model_folder / name, tmp_path / name)
    settings = json.loads((tmp_path / "tokenizer_config.json").read_text())
    extra = changes.pop("extra_special", False)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**settings, **changes}))
    if extra:  # a list of additional special tokens, one of them written out as an AddedToken
        tokens = json.loads((tmp_path / "special_tokens_map.json").read_text())
        tokens["additional_special_tokens"] = [
            "<extra>",
            {"content": "<more>", "lstrip": False, "rstrip": False, "normalized": False, "single_word": False},
        ]
        (tmp_path / "special_tokens_map.json").write_text(json.dumps(tokens))
    texts = ["a short one", "年假怎么申请？ <extra> and <more>", "a much longer text " * 20]
    theirs = load_tokenizer(tmp_path)[0].encode_batch(texts)
    ours = _padded_tokenizer(tmp_path).encode_batch(texts)
    assert [(e.ids, e.attention_mask) for e in ours] == [(e.ids, e.attention_mask) for e in theirs], _PARTED


def test_a_session_that_fails_to_load_leaves_the_server_to_fastembed(
    embedding_config: FastembedSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A remembered recipe whose file is damaged costs one warning: queries are answered through fastembed."""
    from mcp_kb.models import fastembed
    from mcp_kb.models.base import ModelIdentity
    from mcp_kb.models.identities import RememberedModel
    from mcp_kb.models.onnx_session import Recipe

    (tmp_path / "model.onnx").write_bytes(b"not a model")
    remembered = RememberedModel(ModelIdentity("m", 384, ""), tmp_path, Recipe(tmp_path, "model.onnx", "mean", True))
    monkeypatch.setattr(fastembed, "remembered_model_of", lambda config: remembered)
    served = fastembed.FastEmbedder(embedding_config)
    served.serve_queries()
    with caplog.at_level("WARNING"):
        vectors = [served.embed_query("annual leave") for _ in range(2)]
    assert all(vector.shape == (384,) for vector in vectors)
    assert sum("embedding through fastembed instead" in record.message for record in caplog.records) == 1


_SERVE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from mcp_kb.settings import build_config
    from mcp_kb.models.fastembed import FastEmbedder
    embedder = FastEmbedder(build_config({}, Path.cwd(), None).embedding)
    embedder.serve_queries()
    vector = embedder.embed_query("how do I ask for annual leave?")
    _ = embedder.identity  # what a search asks next: remembered with the recipe when worked out
    batch = embedder.embed_batch(["a sync run by the server", "embeds with the model it serves"])
    print(json.dumps({"fastembed": "fastembed" in sys.modules, "vector": vector.tolist(), "batch": batch.shape[0]}))
""")


def _served_query(cache: Path) -> tuple[bool, np.ndarray]:
    """A fresh process embedding a query as `mcp-kb serve` does: whether it imported fastembed, and the vector."""
    import json

    answer = subprocess.run(
        [sys.executable, "-c", _SERVE],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )
    assert answer.returncode == 0, answer.stderr[-3000:]
    printed = json.loads(answer.stdout.strip().splitlines()[-1])
    assert printed["batch"] == 2
    return printed["fastembed"], np.asarray(printed["vector"], dtype=np.float32)


def test_a_server_embeds_queries_without_importing_fastembed_once_the_model_is_remembered(
    embedder: FastEmbedder, tmp_path: Path
) -> None:
    """The first server on a machine knows no recipe yet: it answers through fastembed and remembers how fastembed
    ran the model; from then on servers answer, and embed a sync's batches, without importing it, with the same
    vectors."""
    expected = np.asarray(next(iter(embedder.model.query_embed("how do I ask for annual leave?"))), dtype=np.float32)
    first_imported, first = _served_query(tmp_path / "cache")
    second_imported, second = _served_query(tmp_path / "cache")
    assert (first_imported, second_imported) == (True, False)
    for vector in (first, second):
        assert float(vector @ expected) >= 0.9999


def _threads(session: OnnxSession) -> int:
    """A session's onnxruntime threads (0: its default, every core)."""
    return int(session._session.get_session_options().intra_op_num_threads)


def test_a_servers_sync_embeds_on_every_core_while_its_queries_keep_one_thread(
    embedder: FastEmbedder, make_config: MakeConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync run by a server embedded through the one-thread session its queries use: on one core (1.85x slower
    than `mcp-kb sync` on two cores). Its batches now run on a session of their own with every core, the same
    vectors as the CLI's, and that session is let go when the KB is embedded; queries keep their session."""
    from helpers import write

    from mcp_kb.api import SearchRequest
    from mcp_kb.app import App

    _ = embedder.identity  # remembered: a server runs the model without fastembed
    for n in range(12):
        write(tmp_path / "docs" / f"n{n}.md", f"# Note {n}\n\nAnnual leave rule number {n} of the handbook.\n")
    app = App(make_config({"name": "docs", "description": "d", "paths": [str(tmp_path / "docs")]}), serving=True)
    app.warm_up()
    served = app.embedder
    assert isinstance(served, FastEmbedder)
    queries = served._session
    assert queries is not None and _threads(queries) == 1
    used: list[OnnxSession | None] = []
    batch_session = served._batch_session

    def counted() -> OnnxSession | None:
        used.append(batch_session())
        return used[-1]

    monkeypatch.setattr(served, "_batch_session", counted)
    app.sync()
    assert used and all(session is not queries and session and _threads(session) == 0 for session in used)
    assert served._batches is None and served._session is queries  # let go after the sync; queries' kept
    texts = ["Annual leave rule number 3 of the handbook.", "a second passage, longer than the first one is"]
    assert used[0] and np.allclose(used[0].embed(texts), embedder.embed_batch(texts), atol=2e-2)  # the CLI's vectors
    assert app.search("docs", SearchRequest(query="annual leave rule 3", mode="vector")).hits
    from mcp_kb import sync
    from mcp_kb.api import KBError

    def failing(*_args: object) -> None:
        raise KBError("the disk is full")

    write(tmp_path / "docs" / "late.md", "# Late\n\nA rule added later.\n")
    monkeypatch.setattr(sync, "_remove_deleted", failing)  # the sync fails after its batches were embedded
    with pytest.raises(KBError, match="the disk is full"):
        app.sync()
    assert len(used) == 2 and served._batches is None  # let go however the sync ended
