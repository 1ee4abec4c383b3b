"""Layering: faces → service → operations → foundation → base, never upward.

faces (cli, mcp, ui, the HTTP edge) import the core only through its public API (mcp_kb.api) and settings.
faces → service (api, app, live) → operations (sync, search, passages, evaluation, present, access, view, audit)
→ foundation (ingest, models, index) → base (settings, errors, digest, schema, requests, records, read_outputs,
text, lru).
Search never imports sync; only the index package imports lancedb; only the fastembed provider
(models/fastembed*.py) loads models. Faces reach the core through its contract, never the index; models never import
the index; no two modules (nor two folders) import each other, by any path.
"""

import ast
import re
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "mcp_kb"
MODULES = sorted(PACKAGE.rglob("*.py"))
TIERS = {  # the most specific prefix decides a module's tier
    "mcp_kb.cli": 4,
    "mcp_kb.serve": 4,
    "mcp_kb.signals": 4,
    "mcp_kb.mcp": 4,
    "mcp_kb.ui": 4,
    "mcp_kb.present": 4,
    "mcp_kb.__main__": 4,
    "mcp_kb.api": 3,
    "mcp_kb.app": 3,
    "mcp_kb.live": 3,
    "mcp_kb.http": 3,
    "mcp_kb.sync": 2,
    "mcp_kb.search": 2,
    "mcp_kb.passages": 2,
    "mcp_kb.metrics": 2,
    "mcp_kb.evaluation": 2,
    "mcp_kb.status": 2,
    "mcp_kb.dry_run": 2,
    "mcp_kb.access": 2,
    "mcp_kb.audit": 2,
    "mcp_kb.view": 2,
    "mcp_kb.ray_engine": 2,
    "mcp_kb.batches": 2,
    "mcp_kb.reader": 2,
    "mcp_kb.history": 2,
    "mcp_kb.freshness": 2,
    "mcp_kb.webhooks": 2,
    "mcp_kb.ingest": 1,
    "mcp_kb.kept_versions": 1,
    "mcp_kb.models": 1,
    "mcp_kb.index": 1,
    "mcp_kb.settings": 0,
    "mcp_kb.errors": 0,
    "mcp_kb.doc_ids": 0,
    "mcp_kb.digest": 0,
    "mcp_kb.schema": 0,
    "mcp_kb.registry": 0,
    "mcp_kb.vocabulary": 0,
    "mcp_kb.lru": 0,
    "mcp_kb.text": 0,
    "mcp_kb.requests": 0,
    "mcp_kb.records": 0,
    "mcp_kb.cursors": 0,
    "mcp_kb.files": 0,
    "mcp_kb.wire": 0,
    "mcp_kb.stopwatch": 0,
    "mcp_kb.slices": 0,
    "mcp_kb.imports": 0,
    "mcp_kb.heap": 0,
    "mcp_kb.read_outputs": 0,
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of every module the file imports (relative imports resolved)."""
    package = _name(path).split(".") if path.name == "__init__.py" else _name(path).split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # `from . import x` names a module
    return names


def _tier(module: str) -> int | None:
    matches = [prefix for prefix in TIERS if module == prefix or module.startswith(prefix + ".")]
    return TIERS[max(matches, key=len)] if matches else None


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_has_a_tier_and_imports_only_its_own_tier_or_below(path: Path) -> None:
    module = _name(path)
    if module == "mcp_kb":
        return  # the package's lazy exports name every layer on purpose
    tier = _tier(module)
    assert tier is not None, f"{module} is in no tier: add it to TIERS"
    upward = sorted(name for name in _imports(path) if (_tier(name) or -1) > tier)
    assert not upward, f"{module} (tier {tier}) imports {upward}"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_index_package_imports_lancedb(path: Path) -> None:
    if not _name(path).startswith("mcp_kb.index"):
        assert not any(name.split(".")[0] == "lancedb" for name in _imports(path))


_MODEL_RUNTIME_USERS = (
    "mcp_kb.models.fastembed",
    "mcp_kb.models.fastembed_device",
    "mcp_kb.models.fastembed_int8",
    "mcp_kb.models.fastembed_load",
    "mcp_kb.models.fastembed_rerank",
    "mcp_kb.models.fastembed_tokenizer",
    "mcp_kb.models.quantize",
    "mcp_kb.models.onnx_session",
)


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_fastembed_provider_imports_model_runtimes(path: Path) -> None:
    # the fastembed provider's modules, its int8 copies (quantize) and its model run without fastembed (onnx_session)
    if _name(path) not in _MODEL_RUNTIME_USERS:
        assert not any(
            name.split(".")[0] in ("fastembed", "onnxruntime", "onnx", "tokenizers") for name in _imports(path)
        )


def test_search_never_imports_sync() -> None:
    assert not {name for name in _imports(PACKAGE / "search.py") if name.startswith("mcp_kb.sync")}


def _owner(name: str) -> str | None:
    """The package module an imported name belongs to (`mcp_kb.index.filters.build_where` → its module)."""
    known = {_name(path) for path in MODULES}
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _module_graph() -> dict[str, set[str]]:
    """Each module → the modules of this package it imports (at the top or inside a function)."""
    graph = {}
    for path in MODULES:
        module = _name(path)
        graph[module] = {
            owner
            for name in _imports(path)
            if name.startswith("mcp_kb.")
            if (owner := _owner(name)) not in (None, module, "mcp_kb")
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_modules_import_each_other_by_any_path() -> None:
    assert _cycles(_module_graph()) == []


def test_no_folders_import_each_other_by_any_path() -> None:
    """Folders as units (`mcp_kb.index`, `mcp_kb.ingest`, ...; top-level modules stand for themselves)."""

    def folder(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2])

    graph: dict[str, set[str]] = {}
    for module, targets in _module_graph().items():
        graph.setdefault(folder(module), set()).update(folder(t) for t in targets if folder(t) != folder(module))
    assert _cycles(graph) == []


FACES = (
    "mcp_kb.cli",
    "mcp_kb.serve",
    "mcp_kb.signals",
    "mcp_kb.mcp",
    "mcp_kb.ui",
    "mcp_kb.http",
    "mcp_kb.__main__",
    "mcp_kb.present",  # the faces' wording of the core's records
)
# The core's public API, the settings a face loads, and the import machinery the MCP face's SDK shim is built on
# (a mechanism of Python's, no decision of the domain's).
PUBLIC = ("mcp_kb.api", "mcp_kb.settings", "mcp_kb.imports")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def _inner_modules(names: set[str]) -> list[str]:
    """The core's inner modules among imported names (what a face must not import)."""
    return sorted(
        {
            owner
            for name in names
            if name.startswith("mcp_kb")
            if (owner := _owner(name)) and not _within(owner, PUBLIC + FACES)
        }
    )


@pytest.mark.parametrize("path", [path for path in MODULES if _within(_name(path), FACES)], ids=_name)
def test_a_face_imports_only_the_public_api_settings_and_faces(path: Path) -> None:
    """What a face cannot import it cannot re-decide: the core's inner modules are its own."""
    inner = _inner_modules(_imports(path))
    assert not inner, f"{_name(path)} imports {inner}: use mcp_kb.api (offer the name in its module's __all__)"


def test_the_face_rule_fails_on_an_inner_import() -> None:
    assert _inner_modules({"mcp_kb.api.App", "mcp_kb.settings.Config", "mcp_kb.mcp.guard"}) == []
    assert _inner_modules({"mcp_kb.api.App", "mcp_kb.index.state.sync_activity"}) == ["mcp_kb.index.state"]
    assert _inner_modules({"mcp_kb.records"}) == ["mcp_kb.records"]


_JSON_FORMS = ("as_dict", "model_dump", "listed")  # the methods that give a record's JSON form


def _key_reads(source: str) -> list[str]:
    """Where a face reads a key of a record's JSON form (`status.as_dict()["files"]`, `.get("files")`, or the
    form handed to a function of its own to pick from) instead of the record's typed attribute."""
    tree = ast.parse(source)
    forms = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_json_form(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    own = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    reads = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and _is_json_form(node.value, forms)
        ):
            reads.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            reads += [ast.unparse(node)] if _is_json_form(node.func.value, forms) else []
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in own:
            reads += [ast.unparse(node) for argument in node.args if _is_json_form(argument, forms)]
    return reads


def _is_json_form(node: ast.expr, forms: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in forms
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _JSON_FORMS


@pytest.mark.parametrize("path", [path for path in MODULES if _within(_name(path), FACES)], ids=_name)
def test_a_face_reads_a_records_attributes_not_the_keys_of_its_json_form(path: Path) -> None:
    """A record's JSON form is what a face hands on (printed, sent); what it reads, it reads typed, so a renamed
    field fails the type check rather than a page in a browser."""
    assert _key_reads(path.read_text(encoding="utf-8")) == []


def test_the_key_rule_fails_on_a_face_reading_keys() -> None:
    assert _key_reads("files = status.as_dict()['files']") == ["status.as_dict()['files']"]
    assert _key_reads("form = answer.model_dump(mode='json')\nform.get('hits')") == ["form.get('hits')"]
    picked = "def _polled(status):\n    return status['name']\n\n_polled(glance.as_dict())"
    assert _key_reads(picked) == ["_polled(glance.as_dict())"]
    assert _key_reads("print(json_text(status))\nstatus.files") == []


def test_models_never_import_the_index() -> None:
    reached = {
        f"{module} → {target}"
        for module, targets in _module_graph().items()
        if module.startswith("mcp_kb.models")
        for target in targets
        if target.startswith("mcp_kb.index")
    }
    assert not reached


def test_the_cli_starts_servers_through_serving_and_the_mcp_face_knows_no_transport() -> None:
    """The CLI's `serve` and `ui` only start what serve.py composes; the MCP surface never reaches into the CLI,
    the serving module or the HTTP edge (transports, signals and the page beside it are serve.py's)."""
    reached = {name for name in _imports(PACKAGE / "cli.py") if name.startswith(("mcp_kb.mcp", "mcp_kb.ui"))}
    assert reached == set()
    for path in (PACKAGE / "mcp").glob("*.py"):
        assert not {
            name
            for name in _imports(path)
            if name.startswith(("mcp_kb.cli", "mcp_kb.serve", "mcp_kb.http", "mcp_kb.ui"))
        }, path.name


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_every_module_says_its_concern_in_a_docstring(path: Path) -> None:
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{_name(path)} has no module docstring"


def _calls_into_environment(tree: ast.AST) -> list[int]:
    """Lines reading the environment: os.getenv, os.environ.get / [...] / `in os.environ`."""

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("getenv", "get")
            and (node.attr == "getenv" or is_environ(node.value))
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_settings_read_the_environment(path: Path) -> None:
    if _name(path) != "mcp_kb.settings.variables":
        lines = _calls_into_environment(ast.parse(path.read_text(encoding="utf-8")))
        assert not lines, (
            f"{_name(path)} reads environment variables (lines {lines}); read them in settings/variables.py"
        )


_SQL = re.compile(r"\s(AND|OR|BETWEEN)\s|\sIN \(|regexp_like\(|starts_with\(|array_has|[a-z_]+ = ['\d]")


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_filters_module_composes_predicate_text(path: Path) -> None:
    if _name(path) == "mcp_kb.index.filters":
        return
    texts = [
        node
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.search(node.value)
    ]
    lines = [text.lineno for text in texts]
    assert not texts, f"{_name(path)} writes SQL text at lines {lines}: compose it in index/filters.py"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_source_seam_knows_the_source_kinds(path: Path) -> None:
    """What a file or a web page is stays with folders.py and web.py; everything else asks ingest/sources.py."""
    if _name(path).startswith("mcp_kb.ingest"):
        return
    kinds = {name for name in _imports(path) if name.startswith(("mcp_kb.ingest.folders", "mcp_kb.ingest.web"))}
    assert not kinds, f"{_name(path)} imports {sorted(kinds)}: use the Source protocol of ingest/sources.py"


@pytest.mark.parametrize("face", ["mcp_kb.mcp", "mcp_kb.ui"])
def test_only_the_http_edge_reads_a_requests_credentials(face: str) -> None:
    """One way to read a bearer header or the page's cookie (http/edge.py): the faces ask it."""
    readers = []
    for path in MODULES:
        if not (_name(path) == face or _name(path).startswith(face + ".")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = (
                isinstance(node, ast.Constant)
                and isinstance(node.value, (str, bytes))
                and node.value.lower() in ("authorization", b"authorization", "mcp_kb_token")
            )
            if named or (isinstance(node, ast.Attribute) and node.attr == "cookies"):
                assert isinstance(node, ast.expr)
                readers.append(f"{_name(path)}:{node.lineno}")
    assert not readers, f"read credentials through mcp_kb.http.edge: {readers}"


_TARGET = re.compile(r"^mcp_kb(\.\w+)+(:\w+)?$")  # a module named as text: "mcp_kb.models.fastembed:FastembedProvider"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_names_one_of_a_higher_tier_as_text(path: Path) -> None:
    """Lazy imports by name ("package.module:Name") obey the tiers as imports do: each implementing package
    binds its own parts to the registries, so no module names one above it."""
    module = _name(path)
    tier = _tier(module)
    named = [
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _TARGET.match(node.value)
    ]
    upward = [target for target in named if (_tier(target.split(":")[0]) or -1) > (tier or 0)]
    assert not upward, f"{module} (tier {tier}) names {upward}"
