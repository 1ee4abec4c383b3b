"""mcp_kb/imports.py's `import_leaving_out` on a made-up SDK: what it leaves out, and how it steps aside.

Each case runs in a fresh interpreter over packages written to tmp_path; the SDK's own case is
tests/mcp/test_sdk_import.py (and the deferred package `__init__`, tests/index/test_lancedb_compat.py).
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def made_up_sdk(tmp_path: Path) -> Path:
    """`sdk`, whose `__init__` imports its HTTP client; `sdk.server`, which imports the HTTP stack (`web`) and
    its own `sdk.auth.*` at its top but uses them only in a function; `web`, which records that it ran."""

    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")

    write("sdk/__init__.py", "import sdk.client\n")
    write("sdk/client.py", "import web\n")
    write("sdk/auth/__init__.py", "")
    write("sdk/auth/settings.py", "class Settings:\n    pass\n")
    write("sdk/auth/routes.py", "import web\n")
    write(
        "sdk/server.py",
        """
        from web.app import App
        from sdk.auth.routes import web as routes_web
        from sdk.auth.settings import Settings

        def http_app():
            return App()
    """,
    )
    write("web/__init__.py", "import sys\nsys.modules['web_ran'] = sys\n")
    write("web/app.py", "class App:\n    pass\n")
    return tmp_path


def _run(code: str, cwd: Path) -> list[str]:
    answer = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
    return answer.stdout.split("\n")


_LEAVE_OUT_WEB = """
    import sys
    from mcp_kb.imports import import_leaving_out
    print(import_leaving_out(["sdk.server"], ["web", "sdk.auth."], ["sdk.auth.settings"], note="stdio only"))
    import sdk.server
    print(sorted(name for name in sys.modules if name.startswith(("web", "sdk"))))
"""


def test_the_left_out_modules_never_run_and_their_names_fail_when_used(made_up_sdk: Path) -> None:
    stepped_aside, loaded, failure, later = _run(
        _LEAVE_OUT_WEB
        + """
    try:
        sdk.server.http_app()
    except RuntimeError as exc:
        print(exc)
    import web.app  # elsewhere, later: the real module
    print(web.app.App.__name__, sdk.server.Settings.__name__)
    """,
        made_up_sdk,
    )[:4]
    assert stepped_aside == "None"
    assert loaded == str(["sdk", "sdk.auth", "sdk.auth.settings", "sdk.server"])  # sdk's __init__ did not run
    assert failure == "web.app.App was left out of this process: stdio only"
    assert later == "App Settings"


def test_nothing_is_an_instance_of_a_left_out_class(made_up_sdk: Path) -> None:
    """A kept module that checks `isinstance(x, App)` against a left-out class goes on as if nothing matched (no
    object can be of a class never loaded), instead of failing with a TypeError."""
    checked = _run(
        _LEAVE_OUT_WEB
        + """
    print(isinstance(object(), sdk.server.App), issubclass(int, sdk.server.App))
    """,
        made_up_sdk,
    )[2]
    assert checked == "False False"


def test_a_package_using_a_left_out_name_as_it_loads_is_imported_whole(made_up_sdk: Path) -> None:
    (made_up_sdk / "sdk" / "server.py").write_text("from web.app import App\nOptionalApp = App | None\n")
    stepped_aside, loaded = _run(
        _LEAVE_OUT_WEB
        + """
    print(sdk.server.OptionalApp, "web_ran" in sys.modules)
    """,
        made_up_sdk,
    )[:2]
    assert stepped_aside.startswith("sdk uses what was left out as it loads (TypeError: ")
    assert "'sdk.client'" in loaded and "'web.app'" in loaded  # its __init__ ran, the real modules loaded


def test_a_package_imported_already_is_left_as_it_is(made_up_sdk: Path) -> None:
    stepped_aside = _run("import sdk.server\n" + textwrap.dedent(_LEAVE_OUT_WEB), made_up_sdk)[0]
    assert stepped_aside == "sdk was imported already"


@pytest.fixture
def many_classes(tmp_path: Path) -> Path:
    """`models`, whose `__init__` re-exports a class of each of its modules (and records that it ran)."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text(
        "import sys\nsys.modules['models_init_ran'] = sys\nfrom models.a import A\nfrom models.b import B\nVERSION = 1\n"
    )
    (tmp_path / "models" / "a.py").write_text(
        "class A:\n    def __init__(self, value=0):\n        self.value = value\n"
    )
    (tmp_path / "models" / "b.py").write_text("class B:\n    pass\n")
    return tmp_path


def test_re_exported_classes_are_references_that_load_their_own_module_when_used(many_classes: Path) -> None:
    lines = _run(
        """
        import sys
        from mcp_kb.imports import names_by_reference
        with names_by_reference("models") as done:
            from models import A, B  # as a package re-exporting them would, while it loads
        loaded = lambda: sorted(name for name in sys.modules if name.startswith("models"))
        print(done, loaded())
        made = A(7)
        print(made.value, isinstance(made, A), type(made).__name__, loaded())

        class C(B):
            pass

        print(issubclass(C, B), loaded())
        import models  # any other reader: the package loads for real
        print(models.VERSION, type(models.A).__name__, models.A is type(made))
    """,
        many_classes,
    )
    assert lines[0] == "True ['models']"  # nothing ran: neither the package's __init__ nor its modules
    assert lines[1] == "7 True A ['models', 'models.a']"
    assert lines[2] == "True ['models', 'models.a', 'models.b']"
    assert lines[3] == "1 type True"


def test_references_are_not_made_for_a_package_imported_already(many_classes: Path) -> None:
    assert (
        _run(
            """
        import models
        from mcp_kb.imports import names_by_reference
        with names_by_reference("models") as done:
            from models import A
        print(done, type(A).__name__)
    """,
            many_classes,
        )[0]
        == "False type"
    )
