"""Markdown block text as the rendered page reads: markup the page never shows a reader is taken out.

MkDocs include directives become the path of the file they name, fence attributes (`hl_lines`, `{ .annotate }`)
leave the language alone, `///` block markers leave their title, HTML tags leave their text (`<abbr>` and `<dfn>`
their explanation too), terminal sessions lose their colour tags. Code stays code; Markdown itself stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A fence's opening line (in a list or quote too) and its info string.
_FENCE = re.compile(r"^([ \t>]*)(`{3,}(?=[^`]*$)|~{3,})(.*)$")
# `{* ../../docs_src/app.py hl[7] *}`, `{!../../docs_src/app.py!}`: MkDocs inlines the file when it builds the
# page; the index does not, so the file's path stands where its code would be.
_INCLUDE = re.compile(r"^([ \t>]*)\{([*!])[ \t]*(?:\.\./)*([^\s*!]+)[^\n]*?\2\}[ \t]*$", re.M)
# pymdownx blocks (`/// tip | Title`, `//// tab | Python 3.10+`): the page shows the title, else the kind;
# the closing `///` shows nothing.
_BLOCK_START = re.compile(r"^([ \t>]*)/{3,}[ \t]*([\w-]+)[ \t]*(?:\|[ \t]*(.*?))?[ \t]*$", re.M)
_BLOCK_END = re.compile(r"^[ \t>]*/{3,}[ \t]*(?:\n|\Z)", re.M)
# A code span: a run of backticks closed by the next run as long. One in a paragraph is short; searching further for
# the closing run of each unclosed one made crafted text quadratic.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).{1,2000}?(?<!`)\1(?!`)", re.S)
# A tooltip explaining a term is read as the term, then its explanation.
# (The term stops at the next <abbr> or <dfn>: searching on to the end for each tag would make text quadratic.)
_EXPLAINED = re.compile(
    r"<(abbr|dfn)\b[^<>]*?\btitle=(\"[^\"<>]*\"|'[^'<>]*')[^<>]*>((?:[^<]|<(?!/?\1\b))*)</\1\s*>", re.I
)
# An HTML tag or comment (CommonMark's open and closing tags). Neither runs past the next `<`, nor a comment past the
# next `<!--`: a tag left open would otherwise be searched to the end of the text for each `<`.
_TAG = re.compile(
    r"</?[A-Za-z][A-Za-z0-9-]*(?:\s+[A-Za-z_:][\w:.-]*(?:\s*=\s*(?:[^\"'=<>`\s]+|'[^'<>]*'|\"[^\"<>]*\"))?)*"
    r"\s*/?>|<!--(?:(?!<!--|-->).)*-->",
    re.S,
)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)")
# Tags inside a line of text (bold, colour, links) vanish; any other (<br>, <td>, <div>) parts words.
_PHRASING = frozenset(
    {
        "a",
        "abbr",
        "b",
        "code",
        "dfn",
        "em",
        "font",
        "i",
        "kbd",
        "mark",
        "s",
        "small",
        "span",
        "strong",
        "sub",
        "sup",
        "u",
    }
)
_TERMINALS = frozenset({"console"})  # the FastAPI docs colour terminal output with <font> and <span> tags
# `{ #anchor }` ids (as in the FastAPI docs) are noise in a heading.
_HEADING_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")


def readable(text: str) -> str:
    """A block's text without the markup its rendered page does not show."""
    if "```" not in text and "~~~" not in text:  # no fence: most blocks are read faster whole
        return _prose(text).strip()
    lines = text.split("\n")
    parts: list[str] = []
    start = index = 0  # start: the first line of prose not cleaned yet
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = _fence_end(lines, index + 1, opening.group(2))
        if index > start:
            parts.append(_prose("\n".join(lines[start:index])))
        parts.append(_fence(lines[index:end], opening))
        start = index = end
    if len(lines) > start:
        parts.append(_prose("\n".join(lines[start:])))
    return "\n".join(parts).strip()


def heading_text(text: str) -> str:
    """A heading without its `{ #anchor }` and HTML tags (a tooltip's explanation is too long for a heading)."""
    return _outside_code_spans(_HEADING_ANCHOR.sub("", text), _untagged).strip()


def _fence_end(lines: list[str], index: int, marker: str) -> int:
    """The line after the fence that opened before `index` (its closing line, or the block's end)."""
    closing = re.compile(rf"^[ \t>]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    while index < len(lines):
        if closing.match(lines[index]):
            return index + 1
        index += 1
    return index


def _fence(lines: list[str], opening: re.Match[str]) -> str:
    """A fenced block: its code as it is, its info string cut to the language."""
    prefix, marker, info = opening.groups()
    language = _language(info)
    if language != info.strip():
        lines = [f"{prefix}{marker}{language}", *lines[1:]]
    code = "\n".join(lines)
    if language.lower() in _TERMINALS:
        code = _TAG.sub(lambda tag: "" if _inline(tag) else tag.group(), code)
    return _INCLUDE.sub(r"\1\3", code)


def _language(info: str) -> str:
    """The language an info string names: its first word (`Python hl_lines="7"`) or class (`{ .dockerfile }`)."""
    words = info.strip().strip("{}").split()
    first = words[0].lstrip(".") if words else ""
    return "" if "=" in first else first


def _prose(text: str) -> str:
    # Most text holds none of the marks each rule looks for: asking first keeps parsing fast.
    if "{" in text:
        text = _INCLUDE.sub(r"\1\3", text)
    if "///" in text:
        text = _BLOCK_END.sub("", text)
        text = _BLOCK_START.sub(lambda start: start.group(1) + (start.group(3) or start.group(2).capitalize()), text)
    return _outside_code_spans(text, _explained) if "<" in text else text


def _outside_code_spans(text: str, clean: Callable[[str], str]) -> str:
    """`clean` applied to the text between code spans: a tag written in backticks is code."""
    parts, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        parts += [clean(text[at : span.start()]), span.group()]
        at = span.end()
    return "".join([*parts, clean(text[at:])])


def _explained(text: str) -> str:
    return _untagged(_EXPLAINED.sub(lambda tag: f"{tag.group(3)} ({tag.group(2)[1:-1]})", text))


def _untagged(text: str) -> str:
    return _TAG.sub(lambda tag: "" if _inline(tag) else " ", text)


def _inline(tag: re.Match[str]) -> bool:
    """Whether a tag formats text within a line, or is a comment: it vanishes without parting words."""
    name = _TAG_NAME.match(tag.group())
    return name is None or name.group(1).lower() in _PHRASING
