import ast
from importlib import import_module
from pathlib import Path

import mcp_kb
import mcp_kb.api
from helpers import ROOT


def test_all_lists_exactly_the_public_names() -> None:
    assert sorted(mcp_kb.__all__) == sorted(
        [
            "App",
            "Config",
            "KBConfig",
            "load_config",
            "config_for_folder",
            "KBError",
            "ConfigError",
            "ParseError",
            "ModelError",
            "StoreError",
            "SyncBusyError",
            "MassDeleteError",
            "SearchError",
            "SyncReport",
            "SearchRequest",
            "SyncRequest",
            "SearchResult",
            "Hit",
            "build_server",
            "__version__",
        ]
    )


def test_every_public_name_resolves() -> None:
    for name in mcp_kb.__all__:
        assert getattr(mcp_kb, name) is not None


def test_errors_share_one_base() -> None:
    for name in (
        "ConfigError",
        "ParseError",
        "ModelError",
        "StoreError",
        "SyncBusyError",
        "MassDeleteError",
        "SearchError",
    ):
        assert issubclass(getattr(mcp_kb, name), mcp_kb.KBError)


API = ROOT / "mcp_kb" / "api.py"
FACES = ("cli.py", "serve.py", "signals.py", "present.py", "__main__.py", "__init__.py", "mcp", "ui", "http")
_API_OWN = {"__version__", "MODULES"}  # the two names the API module itself defines


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def _stray_names(source: str) -> list[str]:
    """What in the API's source gives a name any other way than a module's `__all__` (re-exported by a star
    import in the TYPE_CHECKING block, looked up by `__getattr__` at run time)."""
    stray = []
    for node in ast.parse(source).body:
        if _is_type_checking(node):
            assert isinstance(node, ast.If)
            stray += [ast.unparse(statement) for statement in node.body if not _is_star_import(statement)]
            stray += [ast.unparse(statement) for statement in node.orelse if not _is_lookup(statement)]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__" and node.level:
            stray.append(ast.unparse(node))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.FunctionDef | ast.ClassDef):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", node)]
            names = {getattr(target, "id", getattr(target, "name", "")) for target in targets}
            stray += [ast.unparse(node).splitlines()[0]] if not names <= _API_OWN else []
    return stray


def _is_star_import(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and [alias.name for alias in statement.names] == ["*"]


def _is_lookup(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.FunctionDef) and statement.name == "__getattr__"


def _star_modules() -> list[str]:
    [block] = [node for node in ast.parse(API.read_text(encoding="utf-8")).body if _is_type_checking(node)]
    assert isinstance(block, ast.If)
    return [statement.module for statement in block.body if isinstance(statement, ast.ImportFrom) and statement.module]


def test_a_name_reaches_the_api_only_from_a_modules_all() -> None:
    assert _stray_names(API.read_text(encoding="utf-8")) == []
    assert sorted(_star_modules()) == sorted(mcp_kb.api.MODULES)  # the type checker and the program read one list


def test_the_api_rule_fails_on_a_name_given_another_way() -> None:
    source = API.read_text(encoding="utf-8")
    named = source.replace(
        "    from .text import *\n", "    from .text import *\n    from .text import clipped as clipped\n"
    )
    assert _stray_names(named) == ["from .text import clipped as clipped"]
    aliased = source + "\nfrom .ingest.chunking import chunk_document\nchunks = chunk_document\n"
    assert _stray_names(aliased) == ["from .ingest.chunking import chunk_document", "chunks = chunk_document"]


def _offered() -> dict[str, str]:
    """Each name the API offers → its module, from the modules' own `__all__`."""
    offered: dict[str, str] = {}
    for module in mcp_kb.api.MODULES:
        for name in import_module(f"mcp_kb.{module}").__all__:
            assert name not in offered, f"{name} is offered by both mcp_kb.{offered[name]} and mcp_kb.{module}"
            offered[name] = module
    return offered


def test_every_name_of_the_core_api_resolves_to_its_home() -> None:
    for name, module in _offered().items():
        assert getattr(mcp_kb.api, name) is getattr(import_module(f"mcp_kb.{module}"), name)


def _face_files() -> list[Path]:
    package = ROOT / "mcp_kb"
    return [
        path
        for face in FACES
        for path in ([package / face] if face.endswith(".py") else (package / face).rglob("*.py"))
    ]


def _names_faces_take() -> set[str]:
    taken: set[str] = set()
    for path in _face_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "api":
                taken.update(alias.name for alias in node.names)
    return taken | {name for name, home in mcp_kb._EXPORTS.items() if home == "api"}


def test_the_api_offers_only_what_a_face_takes() -> None:
    errors = set(import_module("mcp_kb.errors").__all__)  # each offered, so a caller can catch one by name
    unused = sorted(set(_offered()) - _names_faces_take() - errors)
    assert unused == [], f"no face takes {unused}: take them out of their module's __all__"


def test_a_name_outside_every_all_is_not_part_of_the_api() -> None:
    for inner in ("recorded_at", "sliced", "cited_text", "import_leaving_out", "HEADING_PARTS"):
        assert not hasattr(mcp_kb.api, inner)


def test_an_unknown_name_of_the_core_api_is_an_attribute_error() -> None:
    unknown = "Nonexistent"
    try:
        getattr(mcp_kb.api, unknown)
    except AttributeError as exc:
        assert "Nonexistent" in str(exc)
    else:
        raise AssertionError("mcp_kb.api.Nonexistent resolved")
