"""Markup residue and broken words in chunk text: the real PDFs and the FastAPI docs (and the BEIR sets, written as
Markdown as benchmarks/retrieval.py writes them) parsed and chunked as a sync does. Run by hand:

    python benchmarks/chunk_text.py --baseline /tmp/chunk-text-before.json   # first run: saves the chunk texts
    python benchmarks/chunk_text.py --baseline /tmp/chunk-text-before.json   # after a change: compares with them

Prints, per corpus, the files and chunks, how many chunks hold each residue pattern (MkDocs include directives,
fence attributes, heading `{ #id }`s, `///` admonition lines, HTML tags outside code, terminal colour tags in
console fences, PDF words broken at a line-end hyphen), and, given a saved baseline, how many chunks' text is new
(no chunk of the baseline had it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _beir import EVAL, use_offline_model, write_corpus

RESIDUE = {
    "include": re.compile(r"\{\*.*?\*\}|\{!.*?!\}"),
    "fence attrs": re.compile(r"^[ \t>]*(?:`{3,}|~{3,})[^\n`]*(?:hl_lines|\{)", re.M),
    "heading id": re.compile(r"\{\s*#[\w-]+\s*\}"),
    "admonition": re.compile(r"^[ \t>]*/{3,}", re.M),
    "html tag": re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"),  # outside code (see _CODE)
    "console html": re.compile(r"<font\b|<span style="),
    "hyphen break": re.compile(r"[^\W\d_]-[ \t]*\n[ \t]*\w"),
}
# Fenced code and code spans: an HTML tag there is code, not residue.
_CODE = re.compile(r"^[ \t>]*(`{3,}|~{3,}).*?^[ \t>]*\1|(`+).+?\2", re.M | re.S)


def corpora(temporary: Path) -> Iterator[tuple[str, Path, list[Path]]]:
    docs = EVAL / "fastapi-docs" / "docs"
    yield "fastapi-docs", docs, sorted(docs.rglob("*.md"))
    pdfs = EVAL / "pdfs"
    yield "pdfs", pdfs, sorted(pdfs.rglob("*.pdf"))
    for dataset in ("scifact", "cmrc2018"):
        folder = temporary / dataset
        write_corpus(dataset, folder)
        yield dataset, folder, sorted(folder.glob("*.md"))


def chunk_texts(root: Path, files: list[Path]) -> dict[str, str]:
    """`path#index` -> chunk text (its heading path first, as it is embedded and keyword-indexed)."""
    from mcp_kb.errors import ParseError
    from mcp_kb.ingest.chunking import chunk_document
    from mcp_kb.ingest.parsers import parse_file
    from mcp_kb.models import load_token_counter
    from mcp_kb.settings import ChunkingConfig, build_config

    counter = load_token_counter(build_config({}, Path.cwd(), None).embedding)
    texts = {}
    for path in files:
        name = str(path.relative_to(root))
        try:
            document = parse_file(path, name, ocr=False)
        except ParseError:
            continue  # encrypted, image-only, malformed: reported by a sync, no text here
        for chunk in chunk_document(document, ChunkingConfig(), counter):
            texts[f"{name}#{chunk.chunk_index}"] = chunk.embed_text
    return texts


def residue(texts: dict[str, str]) -> Counter[str]:
    """Chunks holding each pattern."""
    found: Counter[str] = Counter()
    for text in texts.values():
        for name, pattern in RESIDUE.items():
            if pattern.search(_CODE.sub("", text) if name == "html tag" else text):
                found[name] += 1
    return found


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Chunks (`path#index`) whose text no chunk of the baseline had: a chunk that only moved is not counted."""
    known = set(before.values())
    return [key for key, digest in after.items() if digest not in known]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="chunk text hashes: written when missing, else compared")
    parser.add_argument("--only", nargs="+", help="corpora to read (fastapi-docs pdfs scifact cmrc2018)")
    arguments = parser.parse_args()
    use_offline_model()
    saved = json.loads(arguments.baseline.read_text()) if arguments.baseline and arguments.baseline.exists() else None
    hashes: dict[str, dict[str, str]] = {}
    print(f"{'corpus':14} {'files':>6} {'chunks':>7} {'changed':>8}  residue (chunks holding it)")
    with tempfile.TemporaryDirectory() as temporary:
        for name, root, files in corpora(Path(temporary)):
            if arguments.only and name not in arguments.only:
                continue
            texts = chunk_texts(root, files)
            hashes[name] = {key: hashlib.sha256(text.encode()).hexdigest() for key, text in texts.items()}
            before = (saved or {}).get(name)
            changed = "-" if before is None else str(len(_changed(before, hashes[name])))
            found = residue(texts)
            print(
                f"{name:14} {len(files):6d} {len(texts):7d} {changed:>8}  "
                + ", ".join(f"{pattern} {found[pattern]}" for pattern in RESIDUE),
                flush=True,
            )
    if arguments.baseline and saved is None:
        arguments.baseline.write_text(json.dumps(hashes))
        print(f"baseline written to {arguments.baseline}")


if __name__ == "__main__":
    main()
