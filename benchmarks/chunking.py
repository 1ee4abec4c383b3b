"""Chunking text that offers no split point (no blank line, no sentence end, no space): the case OCR output and
scraped text produce. Run by hand:

    python benchmarks/chunking.py [--sizes 0.1 1 10]

Each size (MB) and alphabet (Latin "a.a.a…", Chinese without punctuation) is chunked in a fresh process with
the default model's tokenizer and the default chunking settings; prints seconds and the process's peak RSS.
The goal: linear time (10 MB in seconds), memory proportional to a chunk window, not to the file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import use_offline_model

UNITS = {"Latin": "a.a.a.a.", "Chinese": "数据库索引同步"}

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from mcp_kb.ingest.chunking import chunk_document
from mcp_kb.ingest.document import Block, Document
from mcp_kb.models import load_token_counter
from mcp_kb.settings import ChunkingConfig, build_config

unit, megabytes = sys.argv[1], float(sys.argv[2])
text = unit * int(megabytes * 1024 * 1024 / len(unit.encode()))
counter = load_token_counter(build_config({}, Path.cwd(), None).embedding)
started = time.perf_counter()
chunks = chunk_document(Document("x.txt", "text", "x", (Block(text),)), ChunkingConfig(), counter)
print(json.dumps({"seconds": time.perf_counter() - started, "chunks": len(chunks),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.1, 1.0, 10.0], help="text sizes in MB")
    arguments = parser.parse_args()
    use_offline_model()
    print(f"{'text':8} {'MB':>6} {'seconds':>9} {'chunks':>8} {'peak RSS MB':>12}")
    for name, unit in UNITS.items():
        for size in arguments.sizes:
            run = subprocess.run(
                [sys.executable, "-c", _CHILD, unit, str(size)],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).resolve().parents[1],
            )
            figures = json.loads(run.stdout.strip().splitlines()[-1])
            print(
                f"{name:8} {size:6g} {figures['seconds']:9.2f} {figures['chunks']:8d} {figures['peak_mb']:12.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
