"""Where mcp-kb reaches past LanceDB's public API (lancedb 0.40), in one place: how it is imported.

`import lancedb` costs most of a command's start (0.7 s of CPU), and most of that is the package
`__init__` of the REST namespace client, `lance_namespace_urllib3_client`, which imports every generated
REST API class although lancedb (through `lance_namespace`) only imports its `models` subpackage. The
package is registered unexecuted, with its `__path__`, so that `…models` loads alone; whatever reads any
other name of the package runs its `__init__` for real then. tests/index/test_lancedb_compat.py fails, naming
this module, when lancedb or lance-namespace change what they import; where the package is not laid out
as expected, the shim steps aside and lancedb is imported as usual.
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import PathFinder
import sys
import threading
from types import ModuleType
from typing import Any

REST_CLIENT = "lance_namespace_urllib3_client"
_LOADING = threading.Lock()


def import_lancedb() -> ModuleType:
    """lancedb, imported without running the REST client's package `__init__` when that can be kept apart."""
    if "lancedb" not in sys.modules:
        defer_package_init(REST_CLIENT, needed="models")
    import lancedb

    return lancedb


def defer_package_init(name: str, needed: str) -> bool:
    """Register package `name` without running its `__init__`, so that its subpackage `needed` imports alone;
    the first read of any other attribute of the package runs the `__init__`. False (nothing done) when the
    package is imported already, not installed, or has no such subpackage."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return False
    if PathFinder.find_spec(f"{name}.{needed}", spec.submodule_search_locations) is None:  # not importing `name`
        return False
    package = importlib.util.module_from_spec(spec)

    def load_for_real(attribute: str) -> Any:
        with _LOADING:
            if "__getattr__" in package.__dict__:
                del package.__getattr__
                spec.loader.exec_module(package)  # type: ignore[union-attr]  # checked above
        try:
            return package.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__getattr__ = load_for_real  # type: ignore[method-assign]  # a module's own __getattr__ (PEP 562)
    sys.modules[name] = package
    return True
