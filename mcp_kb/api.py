"""The core's public API: the one surface the faces (the CLI, the MCP server, the admin page, the HTTP edge)
import, besides `settings` for loading a config and `present` for wording records. It offers the domain's types
and operations and nothing of a face's: each module below declares what it offers in its `__all__`, and this
module re-exports exactly those lists (tests/test_exported_members.py checks that no name arrives any other way).

Names load on first use, so `mcp-kb --help` and a server's start import only what they touch; the type checker
reads the same lists through the `TYPE_CHECKING` block.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The modules whose `__all__` make up the API, the cheapest to import first: a name is looked up in this order.
MODULES = (
    "errors",
    "vocabulary",
    "text",
    "stopwatch",
    "schema",
    "records",
    "evaluation",
    "requests",
    "read_outputs",
    "view",
    "access",
    "audit",
    "passages",
    "search",
    "webhooks",
    "models",
    "live",
    "app",
)

if TYPE_CHECKING:
    from .access import *
    from .app import *
    from .audit import *
    from .errors import *
    from .evaluation import *
    from .live import *
    from .models import *
    from .passages import *
    from .read_outputs import *
    from .records import *
    from .requests import *
    from .schema import *
    from .search import *
    from .stopwatch import *
    from .text import *
    from .view import *
    from .vocabulary import *
    from .webhooks import *
else:

    def __getattr__(name: str) -> Any:
        """A name of the API, imported from the first module whose `__all__` lists it; the next lookup is a plain
        attribute."""
        for module in MODULES:
            home = import_module(f".{module}", __package__)
            if name in home.__all__:
                value = getattr(home, name)
                globals()[name] = value
                return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
