"""mcp_kb/index/compat.py: lancedb imported without the REST namespace client's package __init__, most of its model
classes, or its overrides checked.

Each case runs in a fresh interpreter: the test process has imported lancedb already."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SHIM = "mcp_kb/index/compat.py"


def _run(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_lancedb_imports_and_works_without_the_rest_clients_api_classes(tmp_path: Path) -> None:
    answer = _run(f"""
        import sys
        from mcp_kb.index.compat import REST_CLIENT, import_lancedb
        import_lancedb()
        loaded = sorted(name for name in sys.modules if name.startswith(REST_CLIENT))
        print("models" if REST_CLIENT + ".models" in loaded else "no models", "api" if REST_CLIENT + ".api" in loaded
              else "no api")
        from mcp_kb.index.store import LanceStore
        from mcp_kb.records import KBState
        store = LanceStore({str(tmp_path / "index")!r})
        store.write_state("docs", KBState(generation="abc"))
        assert store.read_state("docs").generation == "abc"
        import lance_namespace_urllib3_client as client
        print(client.ApiClient.__name__, REST_CLIENT + ".api" in sys.modules)
    """)
    assert answer.returncode == 0, answer.stderr
    first, second = answer.stdout.split("\n")[:2]
    # "no models": lancedb no longer needs the client at all; "api": it imports the API classes itself. Either
    # way the shim saves nothing now: update or remove it.
    assert first == "models no api", f"{SHIM}: what lancedb imports of the REST client changed ({first})"
    assert second == "ApiClient True", f"{SHIM}: the package's own names must load it for real ({second})"


@pytest.fixture
def fake_package(tmp_path: Path) -> Path:
    """A package whose __init__ is costly (it records that it ran) and whose `models` subpackage is cheap."""
    package = tmp_path / "costly"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("import sys\nsys.modules['costly_ran'] = sys\nAPI = 'api'\n")
    (package / "models" / "__init__.py").write_text("MODEL = 'model'\n")
    return tmp_path


def test_a_deferred_package_runs_its_init_only_when_a_name_of_its_own_is_read(fake_package: Path) -> None:
    answer = _run(
        """
        import sys
        from mcp_kb.imports import defer_package_init
        assert defer_package_init("costly", needed="models")
        from costly.models import MODEL
        ran_for_models = "costly_ran" in sys.modules
        import costly
        print(MODEL, ran_for_models, costly.API, "costly_ran" in sys.modules, hasattr(costly, "nothing"))
    """,
        cwd=fake_package,
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split() == ["model", "False", "api", "True", "False"]


@pytest.mark.parametrize("layout", ["no such subpackage", "not installed", "imported already"])
def test_the_shim_steps_aside_where_the_package_is_not_as_expected(fake_package: Path, layout: str) -> None:
    answer = _run(
        f"""
        import sys
        from mcp_kb.imports import defer_package_init
        if {layout!r} == "imported already":
            import costly
        name, needed = ("absent", "models") if {layout!r} == "not installed" else ("costly", "models")
        if {layout!r} == "no such subpackage":
            needed = "schemas"
        print(defer_package_init(name, needed=needed))
        if name == "costly":
            import costly
            print(costly.API, "costly_ran" in sys.modules)
    """,
        cwd=fake_package,
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split()[0] == "False"  # nothing was registered: a plain import follows
    if layout != "not installed":
        assert answer.stdout.split()[1:] == ["api", "True"]


def test_lancedb_loads_few_model_classes_and_marks_its_overrides_without_checking_them(tmp_path: Path) -> None:
    answer = _run(f"""
        import json, sys
        import overrides
        checking = overrides.override
        from mcp_kb.index.compat import MODELS, import_lancedb
        lancedb = import_lancedb()
        import lance_namespace, lancedb.db
        loaded = sum(name.startswith(MODELS + ".") for name in sys.modules)
        listed = lancedb.connect({str(tmp_path / "index")!r}).list_tables()
        from lance_namespace_urllib3_client.models import ListTablesResponse
        print(json.dumps({{"loaded": loaded, "re-exported": type(lance_namespace.ListTablesResponse).__name__,
                           # lancedb 0.40 lists tables in the model class; 0.41 in a listing of its own
                           "listed": type(listed).__name__ in ("ListTablesResponse", "TableListing")
                                     and listed.tables == [] and ListTablesResponse.__name__ == "ListTablesResponse",
                           "override": lancedb.db.override.__module__, "restored": overrides.override is checking}}))
    """)
    assert answer.returncode == 0, answer.stderr
    found = json.loads(answer.stdout)
    assert found["re-exported"] == "_Reference", f"{SHIM}: lance_namespace's model classes were loaded whole"
    # 16 in lancedb 0.40 (those lancedb.namespace imports itself, and the listing's); lance_namespace has ~150
    assert found["loaded"] < 40, f"{SHIM}: lancedb now loads {found['loaded']} model classes as it starts"
    assert found["listed"], f"{SHIM}: a table listing must work, its model class built when it is named"
    if sys.version_info < (3, 12):  # lancedb uses typing.override from 3.12 on: the shim has nothing to do
        assert found["override"] in ("typing", "typing_extensions"), f"{SHIM}: lancedb checked its overrides"
    assert found["restored"], f"{SHIM}: overrides.override must be the package's own again"


def test_a_lancedb_that_breaks_under_the_shims_is_imported_as_usual(tmp_path: Path) -> None:
    answer = _run(f"""
        import contextlib, sys
        import mcp_kb.index.compat as compat

        @contextlib.contextmanager
        def breaking(name):  # as if lancedb used what a shim changed while it loads
            sys.modules["lance_namespace"] = None  # its import fails
            try:
                yield True
            finally:
                del sys.modules["lance_namespace"]

        compat.names_by_reference = breaking
        lancedb = compat.import_lancedb()
        import lance_namespace
        print(lancedb.connect({str(tmp_path / "index")!r}).list_tables().tables,
              type(lance_namespace.ListTablesResponse).__name__)
    """)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split() == ["[]", "ModelMetaclass"]
