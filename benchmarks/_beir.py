"""Shared helpers for benchmarks: turn a BEIR set from ../shared/eval into a KB on disk."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
EVAL = SHARED / "eval"
MODEL = SHARED / "models" / "all-MiniLM-L6-v2-onnx"


def use_offline_model() -> None:
    """The brief's offline model, unless the caller chose another."""
    if MODEL.is_dir():
        os.environ.setdefault("MCP_KB_EMBEDDING_MODEL", "sentence-transformers/all-MiniLM-L6-v2")
        os.environ.setdefault("MCP_KB_EMBEDDING_MODEL_PATH", str(MODEL))


def write_corpus(dataset: str, folder: Path, limit: int | None = None) -> int:
    """One Markdown file per corpus entry: `# title` then the text. Returns the count."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    with (EVAL / dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            target = folder / f"{row['_id']}.md"
            body = f"# {row['title']}\n\n{row['text']}\n" if row.get("title") else f"{row['text']}\n"
            if not target.exists() or target.read_text(encoding="utf-8") != body:
                target.write_text(body, encoding="utf-8")
            count += 1
            if limit and count >= limit:
                break
    return count


def kb_config(
    folder: Path, storage: Path, name: str, search: dict | None = None, quantize: str = "int8", workers: int = 0
):
    from mcp_kb.settings import build_config

    kb = {"name": name, "description": name, "paths": [str(folder)], **({"search": search} if search else {})}
    raw = {"storage": str(storage), "kb": [kb], "embedding": {"quantize": quantize}, "sync": {"workers": workers}}
    return build_config(raw, base_dir=folder, source=None)


def progress(done: int, total: int, message: str) -> None:
    print(f"\r{message}", end="", file=sys.stderr, flush=True)
