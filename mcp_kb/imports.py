"""How mcp-kb imports third-party packages it needs only part of, in one place: a package registered without
running its `__init__` (`defer_package_init`), a package whose `__init__` re-exports many classes read as
references that each import their own module when first used (`names_by_reference`), and a package imported
with some of the modules it imports stood in for (`import_leaving_out`). The shims built on them, each with a
test that fails when the package changes what they rely on: index/compat.py (lancedb without the REST client's
API and model classes) and mcp/sdk_import.py (the MCP SDK without its HTTP stack, for a stdio server).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from importlib import import_module
from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

_LOADING = threading.Lock()


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


@contextmanager
def names_by_reference(name: str) -> Iterator[bool]:
    """While open, package `name` (not imported yet) is registered without running its `__init__`, and each name
    its `__init__` imports from one of the package's modules reads as a reference that imports that module alone
    when first used (called, read from, checked against, subclassed); any other name read runs the `__init__`
    for real, as every read does once the block ends. Yields whether it did so (False: the package is imported
    already, or its `__init__` imports no names that way)."""
    home_of = {} if name in sys.modules else _homes(name)
    if not home_of or not defer_package_init(name, needed=next(iter(home_of.values())).rpartition(".")[2]):
        yield False
        return
    package = sys.modules[name]
    load_for_real = package.__getattr__

    def reference(attribute: str) -> Any:
        if attribute in home_of and package.__dict__.get("__getattr__") is reference:
            return _Reference(home_of[attribute], attribute)
        return load_for_real(attribute)

    package.__getattr__ = reference  # type: ignore[method-assign]  # a module's own __getattr__ (PEP 562)
    try:
        yield True
    finally:
        if package.__dict__.get("__getattr__") is reference:  # still unexecuted
            package.__getattr__ = load_for_real  # type: ignore[method-assign]


def _homes(name: str) -> dict[str, str]:
    """Each name package `name`'s `__init__` imports from one of the package's own modules → that module."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return {}
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        if node.module and node.module.startswith(name + ".")
        for alias in node.names
    }


class _Reference:
    """A class of a module not imported yet, standing in for it until first used: then the module is imported
    and the use goes to the class."""

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    def _target(self) -> Any:
        return getattr(import_module(self._module), self._name)

    def __repr__(self) -> str:
        return f"<reference to {self._module}.{self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__") and attribute != "__name__":  # probes (copy, typing, pickle)
            raise AttributeError(attribute)
        return getattr(self._target(), attribute)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._target())

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, self._target())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type]:
        return (self._target(),)


def forget_imported_since(before: Collection[str], packages: Sequence[str]) -> None:
    """Take the Python modules of `packages` imported since `before` (a snapshot of `sys.modules`' names) out of
    `sys.modules`, so that the next import runs them again (after a shim failed as they loaded). Compiled
    extensions stay: they hold no names of ours, and lancedb's cannot be initialized twice."""
    for name in set(sys.modules) - set(before):
        spec = getattr(sys.modules[name], "__spec__", None)
        if _within(name, tuple(packages)) and not isinstance(getattr(spec, "loader", None), ExtensionFileLoader):
            _forget(name)


def import_leaving_out(
    modules: Sequence[str], left_out: Sequence[str], kept: Sequence[str] = (), *, note: str
) -> str | None:
    """Import `modules` (of one package) without running the package's own `__init__`, and with each module
    `left_out` names stood in for where the package's own modules import it: the stand-in gives any name
    asked of it, as a placeholder that fails when used (saying `note`). A `left_out` entry names a module and
    its submodules, or (ending in ".") only the submodules; `kept` names exceptions. Stand-ins leave
    `sys.modules` afterwards, so a later import elsewhere gets the real module.

    None when done so; otherwise why the package was imported as usual instead: it was imported already,
    or its modules use a left-out name as they load (what failed is said).
    """
    package = modules[0].partition(".")[0]
    if package in sys.modules:
        return f"{package} was imported already"
    before = set(sys.modules)
    stand_ins = _StandIns(package, tuple(left_out), tuple(kept), note)
    defer_package_init(package, needed=modules[0].split(".")[1])
    failure = None
    sys.meta_path.insert(0, stand_ins)
    try:
        for module in modules:
            import_module(module)
    except Exception as exc:  # whatever a placeholder broke: the package is imported whole below
        failure = f"{package} uses what was left out as it loads ({type(exc).__name__}: {exc})"
    finally:
        sys.meta_path.remove(stand_ins)
        for name in stand_ins.made:
            _forget(name)
    if failure:
        forget_imported_since(before, [package])  # its modules may hold placeholders
        for module in modules:
            import_module(module)
    return failure


def _forget(name: str) -> None:
    """Take module `name` out of `sys.modules` and off its parent package, so that the next import loads it."""
    module = sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    if parent in sys.modules and getattr(sys.modules[parent], child, None) is module:
        delattr(sys.modules[parent], child)


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name.startswith(p) if p.endswith(".") else name == p or name.startswith(p + ".") for p in prefixes)


def _importer() -> str:
    """The name of the module whose code is importing (the first frame outside the import machinery)."""
    frame = sys._getframe(2)  # skips this function and the finder's find_spec
    while frame.f_back is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", ""))


class _StandIns:  # a finder and loader (importlib.abc's classes cost an import of their own)
    """Finds a stand-in for each left-out module that one of `package`'s own modules imports."""

    def __init__(self, package: str, left_out: tuple[str, ...], kept: tuple[str, ...], note: str) -> None:
        self.package, self.left_out, self.kept, self.note = package, left_out, kept, note
        self.made: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname in self.kept or not _within(fullname, self.left_out) or not _within(_importer(), (self.package,)):
            return None
        return ModuleSpec(fullname, cast("Loader", self), is_package=True)  # a package: its submodules stand in too

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        self.made.append(spec.name)
        return _StandIn(spec.name, self.note)

    def exec_module(self, module: ModuleType) -> None:
        """A stand-in runs no code."""


class _StandIn(ModuleType):
    """A left-out module: each name asked of it is a placeholder that fails when used."""

    def __init__(self, name: str, note: str) -> None:
        super().__init__(name)
        self.__note = note

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = _LeftOut(f"{self.__name__}.{name}", self.__note)
        setattr(self, name, placeholder)
        return placeholder


class _LeftOut:
    """What a stand-in module gives for a name: calling it or reading from it fails, naming it."""

    def __init__(self, name: str, note: str) -> None:
        self._name, self._note = name, note

    def __repr__(self) -> str:
        return f"<left out: {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{self._name} was left out of this process: {self._note}")

    def __getattr__(self, attribute: str) -> NoReturn:
        if attribute.startswith("__"):  # probes (copy, typing, pickle) see a plain object
            raise AttributeError(attribute)
        raise RuntimeError(f"{self._name}.{attribute} was left out of this process: {self._note}")

    # Nothing is an instance of a class never loaded: an isinstance or issubclass check against one is False.
    def __instancecheck__(self, instance: Any) -> bool:
        return False

    def __subclasscheck__(self, subclass: type) -> bool:
        return False
