"""Module boundaries: only store.py touches LanceDB, only embedding.py loads models,
and the server never reaches into the CLI (the CLI's `serve` only starts the server)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mcp_kb"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level
            names.add(prefix + (node.module or ""))
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_only_store_imports_lancedb(path):
    if path.name != "store.py":
        assert not any(name.split(".")[0] == "lancedb" for name in _imports(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_only_embedding_imports_fastembed(path):
    if path.name != "embedding.py":
        assert not any(name.split(".")[0] in ("fastembed", "onnxruntime") for name in _imports(path))


def test_server_does_not_import_the_cli():
    assert ".cli" not in _imports(PACKAGE / "server.py")


def test_core_modules_do_not_import_front_ends():
    front_ends = {".cli", ".server"}
    for path in MODULES:
        if path.name not in ("cli.py", "server.py", "__main__.py"):
            assert not front_ends & _imports(path), path.name
