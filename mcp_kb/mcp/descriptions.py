"""What the server tells a model about the knowledge bases: the handshake's instructions and each search
tool's description, naming only the KBs a caller may see."""

from __future__ import annotations

import logging
from collections.abc import Sequence


from ..api import (
    CITATION_FORMAT,
    LIST_TOOL,
    READ_TOOL,
    SEARCH_ALL_TOOL,
    App,
    as_sentence,
    CallerView,
    citation_marker,
    sync_named,
    NEVER_SYNCED,
)
from ..settings import MODES_TEXT, KBConfig


log = logging.getLogger(__name__)


def instructions(view: CallerView) -> str:
    """The handshake's instructions, naming the KBs this caller may see (and no other), and the tools to use."""
    lines = []
    if view.tools_of_each_kb:
        across = f", or {SEARCH_ALL_TOOL} for all at once" if view.tool_across_kbs else ""
        lines.append(
            f"Knowledge bases to search, one tool each: use the one whose description fits the question, "
            f"and search several when unsure{across}."
        )
        lines += [f"- {kb.search_tool_name}: {as_sentence(kb.description)}" for kb in view.kbs]
    else:
        lines.append(f"Search the knowledge bases with {SEARCH_ALL_TOOL} (all at once, or the ones you name):")
        lines += [f"- {kb.name}: {_clipped(as_sentence(kb.description))}" for kb in view.kbs]
    lines += [
        f"Cite results as {citation_marker(1)} with their source ({CITATION_FORMAT}). When a passage is not "
        f"enough, read more of its document with {READ_TOOL} (the section its citation names, or on from the "
        f"passage); {LIST_TOOL} lists a knowledge base's documents and a document's outline."
    ]
    return "\n".join(lines)


_DESCRIPTION_CHARS = 200  # of a KB's description, in the list a search across KBs gives


def _clipped(text: str) -> str:
    return text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 1] + "…"


def across_description(kbs: Sequence[KBConfig]) -> str:
    """The search across KBs described with the KBs a caller sees, one line each."""
    lines = [
        f"Search these knowledge bases at once: passages of all of them ranked together, each naming its "
        f"knowledge base, with numbered citations ({CITATION_FORMAT}). Name some in kbs to search only those. "
        f"Modes: {MODES_TEXT}. Knowledge bases:"
    ]
    lines += [f"- {kb.name}: {_clipped(as_sentence(kb.description))}" for kb in kbs]
    return "\n".join(lines)


def tool_description(app: App, kb: KBConfig) -> str:
    """The KB's own description plus what it holds, so the model picks the right tool."""
    summary = app.summary(kb.name)
    kinds = ", ".join(f"{n} {kind}" for kind, n in list(summary.kinds.items())[:5])
    titles = "; ".join(summary.titles)
    if summary.documents:
        holds = f" Holds {summary.documents} documents ({kinds}){f', among them: {titles}' if titles else ''}."
    else:
        holds = f" {_not_holding(app, kb)}"
    versions = (
        f" Versions: {', '.join(v.name for v in kb.versions)} (searched: `version`, default "
        f"{kb.default_version}; a citation's path begins with its version)."
        if kb.versions
        else ""
    )
    pending = app.pending_known(kb.name)
    behind = (
        f" Behind its sources ({pending.text()}): answers may be out of date until it is synced."
        if pending and pending.behind
        else ""
    )
    return (
        f"{as_sentence(kb.description)}{holds}{versions}{behind} Returns passages with numbered citations "
        f"({CITATION_FORMAT}). Modes: {MODES_TEXT}."
    )


def _not_holding(app: App, kb: KBConfig) -> str:
    """Why a KB's tool finds nothing yet, as things stand: a sync runs, none has run (and none will by itself),
    the last one failed, or it found no documents."""
    glance = app.glance(kb.name)
    if glance.sync_running:
        return "Not indexed yet: its first sync is running."
    if glance.last_outcome == NEVER_SYNCED:
        if kb.sync.on_start:
            return "Not indexed yet: its first sync starts with the server."
        return f"Not indexed yet: no sync has run ({sync_named()} indexes it)."
    if glance.last_outcome != "ok":
        return f"Not indexed: its last sync did not finish ({glance.last_outcome}; the status resource says why)."
    return "Holds no documents yet: its last sync found none."
