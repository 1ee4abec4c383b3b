"""Where mcp-kb reaches past LanceDB's public API (lancedb 0.40) to import it (lance_query.py does so to run
queries).

`import lancedb` costs most of a command's start (0.7 s of CPU), and most of that is work lancedb's own use
of the index never needs:
- the package `__init__` of the REST namespace client, `lance_namespace_urllib3_client`, imports every
  generated REST API class although lancedb (through `lance_namespace`) only imports its `models`
  subpackage: the package is registered unexecuted (imports.defer_package_init);
- `lance_namespace` re-exports each of the ~150 classes of `…models` (0.15 s), of which lancedb calls a few
  (a table listing is one), none as it loads: while it loads, each is a reference that imports its class's
  own module when first used (imports.names_by_reference); other readers of `…models` load it whole;
- on Python < 3.12 lancedb marks its overriding methods with the `overrides` package, which checks each as
  the class is made by disassembling the module's code (0.07 s): while it loads, it gets `typing.override`'s
  marking alone, as lancedb uses on Python 3.12 and later.
tests/index/test_lancedb_compat.py fails, naming this module, when lancedb or lance-namespace change what
these rely on; where a package is not laid out as expected, its shim steps aside, and a lancedb that uses
what they change as it loads is imported again as usual.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from ..imports import defer_package_init, forget_imported_since, names_by_reference

REST_CLIENT = "lance_namespace_urllib3_client"
MODELS = f"{REST_CLIENT}.models"
_LOADED_WITH_LANCEDB = ("lancedb", "lance_namespace", MODELS)  # what holds what the shims change, once loaded

log = logging.getLogger(__name__)


def import_lancedb() -> ModuleType:
    """lancedb, imported without what it does not use from the packages it imports, where that can be kept apart."""
    if "lancedb" not in sys.modules:
        defer_package_init(REST_CLIENT, needed="models")
        before = set(sys.modules)
        try:
            with names_by_reference(MODELS), _overrides_marked_only():
                import lancedb
        except Exception as exc:  # whatever a shim broke: lancedb is imported as usual below
            log.debug("lancedb imported as usual: the import shims failed (%s: %s)", type(exc).__name__, exc)
            forget_imported_since(before, _LOADED_WITH_LANCEDB)
    import lancedb

    return lancedb


@contextmanager
def _overrides_marked_only() -> Iterator[None]:
    """`overrides.override` as `typing.override` is (it marks the method), on Python < 3.12 while the block runs."""
    if sys.version_info >= (3, 12):  # lancedb uses typing.override itself there
        yield
        return
    try:
        import overrides
        from typing_extensions import override
    except ImportError:  # lancedb on Python 3.12+ does without it
        yield
        return
    checking = overrides.override
    overrides.override = override  # type: ignore[assignment]
    try:
        yield
    finally:
        overrides.override = checking
