"""Words users and clients meet in several places, each defined once: the sync tool's name, the
resource URIs, the remedy for a KB that is not synced, how citations and heading paths read, the
loopback address."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "HEADING_SEPARATOR",
    "CITATION_FORMAT",
    "DOCUMENT_URI",
    "LIST_URI",
    "LOOPBACK",
    "METRICS_URI",
    "STATUS_URI",
    "SYNC_TOOL",
    "LIST_TOOL",
    "READ_TOOL",
    "SEARCH_ALL_TOOL",
    "WORKBENCH_TOOLS",
    "SYNC_WORK_KEPT",
    "citation_marker",
    "document_uri",
    "remember_invocation",
    "sync_named",
    "rebuild_option",
    "work_kept",
    "status_uri",
    "sync_remedy",
]  # what the core's API (mcp_kb.api) offers from this module

SYNC_TOOL = "sync_knowledge_base"
READ_TOOL = "read_document"
LIST_TOOL = "list_documents"
SEARCH_ALL_TOOL = "search_knowledge_bases"
WORKBENCH_TOOLS = (READ_TOOL, LIST_TOOL, SEARCH_ALL_TOOL)  # tools over every KB a caller sees, a `kb` argument each
LIST_URI = "kb://knowledge-bases"
STATUS_URI = "kb://{name}/status"  # also the resource template
METRICS_URI = "kb://{name}/metrics"
DOCUMENT_URI = "kb://{name}/documents/{+path}"
HEADING_SEPARATOR = " › "  # between the headings of a heading path: "Install › Linux"
CITATION_FORMAT = f"file{HEADING_SEPARATOR}heading, page"  # how a cited source reads
LOOPBACK = "127.0.0.1"  # the address this machine alone reaches: the default bind, `mcp-kb ui`, the read cache


_TYPED_SEPARATOR = re.compile(rf"\s*(?:{HEADING_SEPARATOR.strip()}|>)\s*")  # how a caller may type one: "A>B"


def heading_path(text: str) -> str:
    """A heading path as a caller wrote it, its separators written one way (`A>B`, `A > B` and `A › B` alike)."""
    return HEADING_SEPARATOR.join(part.strip() for part in _TYPED_SEPARATOR.split(text.strip()))


def citation_marker(number: int) -> str:
    """How an answer cites passage `number` of a search: "[1]"."""
    return f"[{number}]"


def files_done(done: int, total: int) -> str:
    """How far a sync is, said one way by every face: "3 of 10 files" ("?" before it knows how many)."""
    return f"{done} of {total or '?'} files"


def files_indexed(done: int, total: int) -> str:
    """How far a sync's indexing is: "3 of 10 files indexed"."""
    return f"{files_done(done, total)} indexed"


def status_uri(kb: str) -> str:
    return STATUS_URI.format(name=kb)


def document_uri(kb: str, document: str) -> str:
    """The document resource of `document` (a path or a page's URL), percent-encoded where a URI needs it:
    `?`, `#`, `%`, spaces and non-ASCII characters; the resource template decodes them back."""
    return DOCUMENT_URI.replace("{+path}", quote(document, safe="/:@!$&'()*+,;=")).format(name=kb)


_invocation: dict[str, list[str]] = {"before": [], "after": []}  # remember_invocation's words


def remember_invocation(
    folder: Path | None = None, config: Path | None = None, variables: dict[str, str] | None = None
) -> None:
    """This process serves `folder` (zero-config) or the kb.toml `config`, with these environment `variables`
    set (where the index is, which model from which folder: as a client's `env` block gives them): remedies
    name them, so the command they suggest works pasted into any shell, in any directory."""
    _invocation["before"] = [f"{name}={shlex.quote(value)}" for name, value in (variables or {}).items() if value]
    _invocation["after"] = (
        [shlex.quote(str(folder.resolve()))] if folder else ["-c", shlex.quote(str(config.resolve()))] if config else []
    )


# What a stopped sync (Ctrl-C, SIGTERM, a client's cancel) leaves, said one way by every face.
SYNC_WORK_KEPT = (
    "what it indexed so far stays (during a rebuild, searches keep using the previous index), and the "
    "next sync goes on from there"
)


def rebuild_option(full: bool, reembed: bool) -> str:
    """The option of a rebuild a user asked for ("" for a sync): only a sync with it goes on with an unfinished one."""
    return "reembed" if reembed else "full" if full else ""


def work_kept(option: str = "") -> str:
    """What a stopped sync leaves; `option`: that of the rebuild it was (rebuild_option), which the next sync must
    name to go on with it (a sync without it keeps the previous index and drops the unfinished rebuild)."""
    if not option:
        return SYNC_WORK_KEPT
    return (
        f"what it rebuilt so far stays beside the index searches keep using, and the next sync with --{option} "
        f"goes on from there (one without it drops the unfinished rebuild)"
    )


def sync_remedy(kb: str | None = None, options: str = "") -> str:
    """The one way to say how to (re)index a KB, from the command line or a client: a command that works
    pasted anywhere (remember_invocation)."""
    after = _invocation["after"]
    named = [] if after and after[0] != "-c" else [kb or ""]  # a folder's one KB goes without its name
    words = [*_invocation["before"], "mcp-kb sync", *named, *after, options]
    command = " ".join(word for word in words if word)
    return f"run `{command}` (or call the {SYNC_TOOL} tool)"


def sync_named(option: str = "") -> str:
    """How to sync, for text every caller reads: by command or by tool, without the config file or the storage a
    command line would name (sync_remedy names them, for the owner)."""
    return (
        f"mcp-kb sync --{option}, or the {SYNC_TOOL} tool with {option}"
        if option
        else f"mcp-kb sync, or the {SYNC_TOOL} tool"
    )
