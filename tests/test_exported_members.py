import ast

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


def _type_checking_imports() -> dict[str, str | None]:
    """What the core API's TYPE_CHECKING block imports: name → module (the names the type checker sees)."""
    tree = ast.parse((ROOT / "mcp_kb" / "api.py").read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    return {
        alias.asname or alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_core_api_gives_the_type_checker_and_the_running_program_the_same_names() -> None:
    assert _type_checking_imports() == mcp_kb.api._HOMES
    assert sorted(mcp_kb.api.__all__) == sorted([*mcp_kb.api._HOMES, "__version__"])


def test_every_name_of_the_core_api_resolves_to_its_home() -> None:
    for name, module in mcp_kb.api._HOMES.items():
        assert getattr(mcp_kb.api, name) is getattr(__import__(f"mcp_kb.{module}", fromlist=[name]), name)


def test_an_unknown_name_of_the_core_api_is_an_attribute_error() -> None:
    try:
        mcp_kb.api.Nonexistent  # noqa: B018
    except AttributeError as exc:
        assert "Nonexistent" in str(exc)
    else:
        raise AssertionError("mcp_kb.api.Nonexistent resolved")
