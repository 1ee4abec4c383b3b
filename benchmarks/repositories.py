"""Incremental sync of a 10,000-file git repository (`[[kb.repos]]`), measured; run by hand.

    nice -n 10 .venv/bin/python benchmarks/repositories.py               # 10,000 files, 5 rounds
    nice -n 10 .venv/bin/python benchmarks/repositories.py --files 2000  # a quick check

A repository of FILES small Markdown files in 100 folders (made anew under /tmp/mcp-kb-bench/repositories, a local
path repository, the index beside it) is synced once. Then, per round: a sync with no new commit, and a sync after
one commit touching 10 files. Printed per kind of sync (median over the rounds): the whole sync's seconds
(`report.seconds["total"]`, the work inside one process: fetch, diff, manifest, writes, index upkeep; and the whole
`App.sync` call, which adds the summary, the version record and the state write), its scan
(fetch + diff + listing), and for the 10-file commit the embedding's share (the "embed" stage), so the work besides
embedding can be read beside the targets: no new commit <= 0.3 s; one commit of 10 files <= 1 s plus embedding.
The same as a folder KB of the same files (os.scandir + stat of every file) is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from git_server import Repo  # the tests' repository helper: git with no user or system config

from mcp_kb.app import App
from mcp_kb.settings import build_config

BASE = Path("/tmp/mcp-kb-bench/repositories")


def _app(storage: Path, kb: dict[str, Any]) -> App:
    return App(build_config({"storage": str(storage), "kb": [kb]}, base_dir=BASE, source=None))


def _note(i: int, edit: int = 0) -> str:
    return f"# Note {i}\n\nRunbook entry {i} for service s{i % 97}, revision {edit}.\n"


def _seconds(report: Any, stage: str) -> float:
    return float(report.seconds.get(stage, 0.0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shutil.rmtree(BASE, ignore_errors=True)
    repo = Repo(BASE / "repo")
    for i in range(args.files):
        repo.write(f"f{i % 100:02d}/n{i:05d}.md", _note(i))
    repo.commit("all files")
    kinds = {
        "repository": {"name": "repo", "description": "d", "repos": [{"url": str(repo.folder), "ref": "main"}]},
        "folder": {"name": "folder", "description": "d", "paths": [str(repo.folder)]},
    }
    apps = {kind: _app(BASE / f"index-{kind}", kb) for kind, kb in kinds.items()}
    for kind, app in apps.items():
        first = app.sync()[0]
        print(f"{kind}: first sync of {first.files_added} files in {_seconds(first, 'total'):.1f} s", flush=True)
    figures: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for kind, app in apps.items():
            began = time.perf_counter()
            idle = app.sync()[0]
            figures.setdefault(f"{kind} no new commit: the whole call", []).append(time.perf_counter() - began)
            figures.setdefault(f"{kind} no new commit: total", []).append(_seconds(idle, "total"))
            figures.setdefault(f"{kind} no new commit: scan", []).append(_seconds(idle, "scan"))
        for i in range(10):
            n = (round_ * 997 + i * 1009) % args.files
            repo.write(f"f{n % 100:02d}/n{n:05d}.md", _note(n, round_ + 1))
        repo.commit(f"round {round_}")
        for kind, app in apps.items():
            began = time.perf_counter()
            report = app.sync()[0]
            figures.setdefault(f"{kind} 10 files changed: the whole call", []).append(time.perf_counter() - began)
            assert report.files_changed == 10, report.summary()
            total, embed = _seconds(report, "total"), _seconds(report, "embed")
            figures.setdefault(f"{kind} 10 files changed: total", []).append(total)
            figures.setdefault(f"{kind} 10 files changed: embed", []).append(embed)
            figures.setdefault(f"{kind} 10 files changed: total less embedding", []).append(total - embed)
            figures.setdefault(f"{kind} 10 files changed: scan", []).append(_seconds(report, "scan"))
            if kind == "repository":
                assert report.crawl.get("commits diffed") == 1, report.crawl
    print(f"\n{args.files} files, median of {args.rounds} rounds (seconds of work inside the process):")
    for name, values in figures.items():
        print(f"  {name:<48} {statistics.median(values):.3f}   (all: {', '.join(f'{v:.3f}' for v in values)})")
    print(
        f"\ngit {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}; "
        f"{os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
