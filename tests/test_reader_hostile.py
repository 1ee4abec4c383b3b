"""Reading and listing documents from the index, attacked: huge documents (a 5 MB single line, one huge section),
thousands of documents and odd names, forged and replayed cursors, awkward headings, lines and pages, documents a
KB's filter hides, and searches across KBs. Each test asserts what a user (or a model) needs."""

from __future__ import annotations

import base64
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import write, text_of
from mcp import Client
from mcp_types import CallToolResult, ResourceTemplateReference
from pdfs import text_pdf

from mcp_kb.api import BrowseRequest, KBError, ReadOutput, ReadRequest, SearchRequest, SyncRequest
from mcp_kb.present import read_text
from mcp_kb.app import App
from mcp_kb.ingest.parsers import parse_file
from mcp_kb.ingest.reading import render
from mcp_kb.mcp.server import build_server
from helpers import MakeApp
from mcp_kb.models.fastembed import FastEmbedder
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

_CHARS_PER_TOKEN_MAX = 16  # reader.py: a read encodes at most this many characters per token of its budget
_NOT_VALID = "cursor is not valid here"
_INTERNALS = (
    "Traceback",
    "lance",
    "pyarrow",
    "arrow",
    "binascii",
    "JSONDecode",
    "KeyError",
    "internal error",
    "__reading__",
    "sqlparser",
    "datafusion",
)


# ---- helpers ---------------------------------------------------------------------------------------


def _app(base: Path, embedder: FastEmbedder, *kbs: dict[str, Any], **top: Any) -> App:
    from mcp_kb.app import App
    from mcp_kb.settings import build_config

    raw = {"storage": str(base / "index"), "kb": list(kbs), **top}
    return App(build_config(raw, base_dir=base, source=None), embedder=embedder)


def _follow(app: App, kb: str, request: ReadRequest) -> list[ReadOutput]:
    """Every answer of a read, following its cursors (with the same budget)."""
    answers = [app.read(kb, request)]
    while answers[-1].cursor:
        answers.append(app.read(kb, ReadRequest(kb=kb, cursor=answers[-1].cursor, max_tokens=request.max_tokens)))
        assert len(answers) < 10_000, "the cursors never end"
    return answers


def _joined(answers: list[ReadOutput]) -> str:
    """The parts' texts put end to end, their locations checked: a part cut at a line's end (its text ending with the
    line break) is followed by the next line (line_end + 1), one cut inside a line goes on in the same line."""
    for before, after in zip(answers, answers[1:]):
        expected = before.line_end + 1 if before.text.endswith("\n") else before.line_end
        assert after.line_start == expected, (before.location, after.location)
    return "".join(answer.text for answer in answers)


def _browse_all(app: App, kb: str, request: BrowseRequest) -> list[str]:
    pages = [app.browse(kb, request)]
    while pages[-1].cursor:
        pages.append(app.browse(kb, BrowseRequest(kb=kb, cursor=pages[-1].cursor, limit=request.limit)))
        assert len(pages) < 10_000, "the cursors never end"
    assert all(page.total == pages[0].total for page in pages)
    return [d.path for page in pages for d in page.documents]


def _one_clear_error(text: str) -> None:
    assert "\n" not in text.strip(), text
    assert not any(word.lower() in text.lower() for word in _INTERNALS), text


def _words(rnd: random.Random, n: int) -> str:
    words = ["leave", "portal", "manager", "budget", "travel", "hiring", "contract", "policy", "request", "approval"]
    return " ".join(f"{rnd.choice(words)}{rnd.randrange(1000)}" for _ in range(n))


# ---- 1. huge inputs ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> tuple[App, dict[str, str]]:
    """A KB of a 5 MB single-line text (real words at both ends, long words that tokenize cheaply between) and a
    Markdown file whose one section holds 1.4 MB of lines. Synced once (about 20 s on a busy two-core machine)."""
    base = tmp_path_factory.mktemp("huge")
    rnd = random.Random(7)
    filler = " ".join("x" * 150 + str(n) for n in range(5_000_000 // 157))  # each word one [UNK]: few chunks
    line = f"{_words(rnd, 2500)} {filler} {_words(rnd, 2500)}"
    write(base / "docs" / "big.txt", line)
    rules = "\n\n".join(f"Rule {n}: requests of type {n} go to the portal. " + "y" * 180 for n in range(6000))
    write(base / "docs" / "huge.md", f"# Huge\n\n## Only\n\n{rules}\n\n## After\n\nThe end.\n")
    app = _app(base, embedder, {"name": "docs", "description": "Huge things", "paths": [str(base / "docs")]})
    [report] = app.sync()
    assert report.files_failed == 0
    expected = {name: render(parse_file(base / "docs" / name, name)).text for name in ("big.txt", "huge.md")}
    assert expected["big.txt"] == line
    return app, expected


def _check_parts(answers: list[ReadOutput], max_tokens: int, tokenizer: ModelTokenizer) -> None:
    """Each part's text within max_tokens (as the model's tokenizer counts it) and a bounded size in bytes; the
    left-over count falls to 0; each part makes progress."""
    for answer in answers:
        assert tokenizer.count([answer.text])[0] <= max_tokens
        assert len(answer.text) <= _CHARS_PER_TOKEN_MAX * max_tokens
        assert len(answer.text.encode()) <= 4 * _CHARS_PER_TOKEN_MAX * max_tokens
    assert all(answer.text for answer in answers[:-1])  # no empty part before the end (no cursor loop)
    lefts = [answer.tokens_left for answer in answers]
    assert lefts == sorted(lefts, reverse=True) and lefts[-1] == 0 and answers[-1].cursor is None


def test_a_5mb_single_line_read_whole_comes_in_bounded_parts_whose_cursors_rebuild_it_exactly(
    huge: tuple[App, dict[str, str]], tokenizer: ModelTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each part within the budget (tokens and bytes), progress every time, one row read per answer,
    cursors to the very end."""
    app, expected = huge
    text = expected["big.txt"]
    reads: list[tuple[Any, ...]] = []
    read_reading = app.store.read_reading

    def counted(*args: Any) -> dict[str, Any] | None:
        reads.append(args)
        return read_reading(*args)

    monkeypatch.setattr(app.store, "read_reading", counted)
    started = time.monotonic()
    answers = _follow(app, "docs", ReadRequest(kb="docs", path="big.txt", max_tokens=20_000))
    assert time.monotonic() - started < 300  # generous: a busy machine; about 3 s alone
    assert len(reads) == len(answers)
    _check_parts(answers, 20_000, tokenizer)
    # every part but the last holds at least half a budget's worth of text (no crawling a character at a time)
    assert len(answers) <= 2 + len(text) // (20_000 // 2)
    assert all((answer.line_start, answer.line_end, answer.lines) == (1, 1, 1) for answer in answers)
    assert _joined(answers) == text
    small = [app.read("docs", ReadRequest(kb="docs", path="big.txt", max_tokens=200, lines="1"))]
    while len(small) < 5:  # the smallest budget, a few parts in
        small.append(app.read("docs", ReadRequest(kb="docs", cursor=small[-1].cursor, max_tokens=200)))
    for part in small:
        assert 0 < tokenizer.count([part.text])[0] <= 200 and len(part.text) <= _CHARS_PER_TOKEN_MAX * 200
    assert text.startswith(_joined(small))


def test_reading_a_5mb_single_line_through_gives_its_text_exactly(huge: tuple[App, dict[str, str]]) -> None:
    """`mcp-kb read` of a single-line document gives its text exactly (no line end added where a part was cut)."""
    app, expected = huge
    answer = app.read_through("docs", ReadRequest(kb="docs", path="big.txt", max_tokens=20_000))
    assert answer.text.count("\n") == 0
    assert answer.text == expected["big.txt"]


def test_a_huge_section_by_section_and_by_lines_comes_in_parts_that_join_up_exactly(
    huge: tuple[App, dict[str, str]], tokenizer: ModelTokenizer
) -> None:
    """One 1.4 MB section read by its heading and by its lines, budgets 2,000 and 20,000."""
    app, expected = huge
    text = expected["huge.md"]
    section = text[text.index("## Only") : text.index("\n\n## After")]
    [entry] = [
        e
        for e in app.browse("docs", BrowseRequest(kb="docs", path="huge.md", outline=True)).outline
        if e.heading == "Huge › Only"
    ]
    for request in (
        ReadRequest(kb="docs", path="huge.md", section="Huge › Only", max_tokens=20_000),
        ReadRequest(kb="docs", path="huge.md", section="only", max_tokens=2_000),
        ReadRequest(kb="docs", path="huge.md", lines=f"{entry.line_start}-{entry.line_end}", max_tokens=20_000),
    ):
        answers = _follow(app, "docs", request)
        _check_parts(answers, request.max_tokens, tokenizer)
        assert len(answers) <= 2 + len(section) // (request.max_tokens // 2)
        assert _joined(answers) == section
        assert answers[0].line_start == entry.line_start and answers[-1].line_end == entry.line_end
        assert "The end." not in answers[-1].text
    first = app.read("docs", ReadRequest(kb="docs", path="huge.md", section="Only", max_tokens=200))
    assert tokenizer.count([first.text])[0] <= 200 and first.cursor


def test_reading_on_from_a_passage_of_a_single_line_document_shows_that_passage(
    huge: tuple[App, dict[str, str]],
) -> None:
    """Reading on from a passage of a single-line document starts near that passage (not at the line's start,
    which is the document's), and marks it."""
    app, _ = huge
    listed = app.browse("docs", BrowseRequest(kb="docs", path="big.txt")).documents[0]
    index = listed.chunks // 2
    passage = app.chunk_text("docs", "big.txt", index)
    answer = app.read("docs", ReadRequest(kb="docs", path="big.txt", chunk=index, max_tokens=2_000))
    marked = answer.text[answer.passage_start : answer.passage_end]
    assert marked, (answer.passage_start, answer.passage_end, len(answer.text))
    assert passage is not None and marked[:100] in passage


def test_the_document_resource_of_a_huge_document_is_bounded_and_says_how_to_read_on(
    huge: tuple[App, dict[str, str]],
) -> None:
    """Past 4 MB the resource stops and gives a cursor that reads on from where it stopped."""
    app, expected = huge
    text = expected["big.txt"]
    shown = app.document_text("docs", "big.txt")
    assert len(shown) < len(text) and len(shown) <= 4_000_000 + 1_000
    kept = shown[: shown.rindex("\n\n[…")]
    assert text.startswith(kept)
    hint = re.search(r"cursor='([^']+)'", shown[len(kept) :])
    assert hint
    on = app.read("docs", ReadRequest(kb="docs", cursor=hint[1], max_tokens=200))
    assert text[len(kept) :].startswith(on.text[:50]), "the way on the resource gives does not go on from its end"


# ---- the budget as the model receives it ------------------------------------------------------------


def test_every_read_answer_as_the_model_receives_it_fits_max_tokens(
    make_app: MakeApp, tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    """Every answer as read_text renders it (location, text, cursor line) fits max_tokens, from 200 to 20,000."""
    folder = tmp_path / "docs"
    lines = "\n\n".join(f"Line {n} of the short text." for n in range(3000))
    write(folder / "short.md", f"# Short\n\n{lines}\n")
    deep = folder / "departments" / "human-resources" / "policies-and-procedures" / "annual-leave-and-holidays"
    write(
        deep / "the-complete-guide-to-requesting-annual-leave.md",
        f"# The complete guide to requesting annual leave\n\n## Requesting leave when you work part time\n\n{lines}\n",
    )
    app = make_app({"name": "docs", "description": "Short lines", "paths": [str(folder)]})
    app.sync()
    deep_path = app.browse("docs", BrowseRequest(kb="docs", path="departments/")).documents[0].path
    over = []
    for path, section in (("short.md", None), (deep_path, "Requesting leave when you work part time")):
        for max_tokens in (200, 300, 2_000, 20_000):
            answer = app.read("docs", ReadRequest(kb="docs", path=path, section=section, max_tokens=max_tokens))
            then = app.read("docs", ReadRequest(kb="docs", cursor=answer.cursor, max_tokens=max_tokens))
            for part in (answer, then):
                received = tokenizer.count([read_text(part)])[0]
                if received > max_tokens:
                    over.append((path[:20], max_tokens, received))
    assert not over, f"answers over their max_tokens (path, max_tokens, tokens received): {over}"


# ---- 2. many documents -------------------------------------------------------------------------------

_ODD = [
    "a(b).txt",
    "c+d.txt",
    "cost$.txt",
    "back\\slash.txt",
    "what?.txt",
    "star*.txt",
    "br[ack]et.txt",
    "x.y.txt",
    "xAy.txt",
    "caret^.txt",
    "pipe|.txt",
    "brace{1}.txt",
    "空 格.txt",
    "#hash.txt",
    "%2e%2e.txt",
    "dot..txt",
]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> App:
    """A KB of 3,000 tiny notes in 30 folders, and files with regular expressions' metacharacters in their names
    (about 10 s to sync)."""
    base = tmp_path_factory.mktemp("many")
    for n in range(3000):
        write(base / "docs" / f"f{n // 100:02d}" / f"n{n:05d}.txt", f"note {n}")
    for name in _ODD:
        write(base / "docs" / "odd" / name, f"odd file {name}")
    app = _app(base, embedder, {"name": "docs", "description": "Notes", "paths": [str(base / "docs")]})
    [report] = app.sync()
    assert report.files_failed == 0
    return app


def test_paging_thousands_of_documents_lists_each_exactly_once_with_any_limit_and_order(many: App) -> None:
    """Limits 1 to 200, by path and by last change, all or under a prefix or a glob."""
    everything = many.browse_through("docs", BrowseRequest(kb="docs", limit=200), None)
    paths = [d.path for d in everything.documents]
    assert len(paths) == everything.total == 3000 + len(_ODD) and paths == sorted(paths)
    for limit in (7, 199, 200):
        assert _browse_all(many, "docs", BrowseRequest(kb="docs", limit=limit)) == paths
    changed = _browse_all(many, "docs", BrowseRequest(kb="docs", sort="changed", limit=97))
    assert sorted(changed) == paths and len(set(changed)) == len(changed)
    assert changed == [
        d.path for d in many.browse_through("docs", BrowseRequest(kb="docs", sort="changed", limit=200), None).documents
    ]
    folder = [p for p in paths if p.startswith("f07/")]
    assert len(folder) == 100 and _browse_all(many, "docs", BrowseRequest(kb="docs", path="f07/", limit=1)) == folder
    assert _browse_all(many, "docs", BrowseRequest(kb="docs", path="f0?/n*5.txt", limit=13)) == [
        p for p in paths if re.fullmatch(r"f0./n[^/]*5\.txt", p)
    ]
    assert _browse_all(many, "docs", BrowseRequest(kb="docs", path="**", limit=200)) == paths
    assert many.browse("docs", BrowseRequest(kb="docs", path="*.txt")).total == 0  # * stays in one folder
    assert many.browse("docs", BrowseRequest(kb="docs", path="**/*.txt")).total == len(paths)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("odd/a(b).txt", ["odd/a(b).txt"]),
        ("odd/*(*", ["odd/a(b).txt"]),
        ("odd/c+d.txt", ["odd/c+d.txt"]),
        ("odd/*+*", ["odd/c+d.txt"]),
        ("odd/cost$.txt", ["odd/cost$.txt"]),
        ("odd/*$*", ["odd/cost$.txt"]),
        ("odd/back\\slash.txt", ["odd/back\\slash.txt"]),
        ("odd/*\\*", ["odd/back\\slash.txt"]),
        ("odd/x.y.txt", ["odd/x.y.txt"]),
        ("odd/x?y.txt", ["odd/x.y.txt", "odd/xAy.txt"]),
        ("odd/*|*", ["odd/pipe|.txt"]),
        ("odd/*^*", ["odd/caret^.txt"]),
        ("odd/brace{1}.txt", ["odd/brace{1}.txt"]),
        ("odd/*{1}*", ["odd/brace{1}.txt"]),
        ("odd/空*", ["odd/空 格.txt"]),
        ("odd/%2e*", ["odd/%2e%2e.txt"]),
        ("odd/#*", ["odd/#hash.txt"]),
        ("odd/dot..txt", ["odd/dot..txt"]),
        ("odd/.*", []),
        ("odd/a(", ["odd/a(b).txt"]),
        ("odd/*.", []),
        ("(", []),
        ("odd/[", []),
        ("odd/*[*", ["odd/br[ack]et.txt"]),
        ("odd/what?.txt", ["odd/what?.txt"]),
    ],
)
def test_prefixes_and_globs_with_regex_metacharacters_match_literally(
    many: App, pattern: str, expected: list[str]
) -> None:
    """Metacharacters in names and patterns are literal (a malformed pattern is no error either)."""
    assert [
        d.path for d in many.browse("docs", BrowseRequest(kb="docs", path=pattern, limit=200)).documents
    ] == expected


def test_brackets_in_a_glob_are_matched_as_written_as_the_tool_describes(many: App) -> None:
    """The tool promises * ? and ** only: a bracket is a character of the name, never a set."""
    from mcp_kb.api import BrowseRequest as Asked

    assert "[" not in (Asked.model_fields["path"].description or "")
    assert [d.path for d in many.browse("docs", BrowseRequest(kb="docs", path="odd/br[ack]et*")).documents] == [
        "odd/br[ack]et.txt"
    ]
    assert many.browse("docs", BrowseRequest(kb="docs", path="odd/[bc]*")).total == 0


@pytest.fixture
def notes(make_app: MakeApp, tmp_path: Path) -> tuple[App, Path]:
    folder = tmp_path / "notes"
    for n in range(30):
        write(folder / f"n{n:02d}.txt", f"note number {n}")
    app = make_app({"name": "docs", "description": "Notes", "paths": [str(folder)]})
    app.sync()
    return app, folder


def test_a_browse_cursor_replayed_after_documents_were_removed_skips_no_document(notes: tuple[App, Path]) -> None:
    """A listing's cursor is the last entry shown: removing a document already listed skips none of the rest."""
    app, folder = notes
    first = app.browse("docs", BrowseRequest(kb="docs", limit=10))
    seen = [d.path for d in first.documents]
    (folder / "n03.txt").unlink()
    app.sync()
    try:
        rest = _browse_all(app, "docs", BrowseRequest(kb="docs", cursor=first.cursor, limit=10))
    except KBError as refused:  # a clear refusal is fine too
        _one_clear_error(str(refused))
        return
    assert rest == [f"n{n:02d}.txt" for n in range(10, 30)], (seen, rest)


def test_a_browse_cursor_replayed_after_documents_were_added_repeats_no_document(notes: tuple[App, Path]) -> None:
    """... and a document added before the cursor's place lists none twice."""
    app, folder = notes
    first = app.browse("docs", BrowseRequest(kb="docs", limit=10))
    seen = [d.path for d in first.documents]
    write(folder / "a-new.txt", "a new note")
    app.sync()
    try:
        rest = _browse_all(app, "docs", BrowseRequest(kb="docs", cursor=first.cursor, limit=10))
    except KBError as refused:
        _one_clear_error(str(refused))
        return
    assert not set(rest) & set(seen), set(rest) & set(seen)
    assert rest == [f"n{n:02d}.txt" for n in range(10, 30)]


# ---- 3. cursors --------------------------------------------------------------------------------------

SECRET = "The merger with Initech closes on 14 May."


@pytest.fixture
def pair(make_app: MakeApp, tmp_path: Path) -> tuple[App, Path]:
    """Two KBs holding a document at the same path (and one KB's secret document)."""
    write(
        tmp_path / "a" / "guide.md",
        "# Guide A\n\n## Part one\n\n"
        + "\n\n".join(f"A line {n} about leave." for n in range(400))
        + "\n\n## Part two\n\nThe end.\n",
    )
    write(tmp_path / "a" / "secret.md", f"# Secret\n\n{SECRET}\n")
    write(tmp_path / "b" / "guide.md", "# Guide B\n\n" + "\n\n".join(f"B line {n} about travel." for n in range(400)))
    app = make_app(
        {"name": "kb_a", "description": "A", "paths": [str(tmp_path / "a")]},
        {"name": "kb_b", "description": "B", "paths": [str(tmp_path / "b")]},
    )
    app.sync()
    return app, tmp_path


def _variants(cursor: str) -> list[str]:
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    body, signature = raw[:-16], raw[-16:]
    flipped = [
        base64.urlsafe_b64encode(raw[:i] + bytes([raw[i] ^ (1 << bit)]) + raw[i + 1 :]).decode().rstrip("=")
        for i in range(len(raw))
        for bit in (0, 3, 7)
    ]
    place = json.loads(body)
    elsewhere = json.dumps({**place, "p": "secret.md", "a": 0}, separators=(",", ":")).encode()
    whole_range = json.dumps({**place, "a": 0, "e": 10**9}, separators=(",", ":")).encode()
    return [
        *flipped,
        cursor[:-1],
        cursor[:-4],
        cursor[:16],
        cursor[1:],
        cursor + "A",
        cursor + "AAAA",
        cursor + cursor,
        cursor.upper(),
        cursor[::-1],
        base64.urlsafe_b64encode(elsewhere + signature).decode(),
        base64.urlsafe_b64encode(whole_range + signature).decode(),
        base64.urlsafe_b64encode(elsewhere + b"\0" * 16).decode(),
        base64.urlsafe_b64encode(elsewhere).decode(),
        base64.b64encode(raw).decode(),
        "None",
        "none",
        "undefined",
        "0",
        "{}",
        "[]",
        "true",
        "~",
        "==",
        "=",
        "é" * 40,
        "☃" + cursor,
        "\x00" * 8,
        cursor + "\x00",
        "A" * 3999,
        "/" * 100,
        "-" * 100,
    ]


def test_forged_cursors_are_one_clear_error_and_never_reach_other_text(pair: tuple[App, Path]) -> None:
    """Bit flips anywhere, truncation, padding, another path or range under the old signature, no
    signature, huge, non-ASCII, None-like strings: refused in one line (or, for what decodes to the very same
    bytes — padding, whitespace — the genuine answer), never the secret, never an exception of another kind."""
    app, _ = pair
    genuine = app.read("kb_a", ReadRequest(kb="kb_a", path="guide.md", max_tokens=200))
    go_on = app.read("kb_a", ReadRequest(kb="kb_a", cursor=genuine.cursor, max_tokens=200))
    assert genuine.cursor is not None
    for forged in _variants(genuine.cursor):
        try:
            answer = app.read("kb_a", ReadRequest(kb="kb_a", cursor=forged, max_tokens=200))
        except KBError as refused:
            assert _NOT_VALID in str(refused) or "cursor" in str(refused), (forged, refused)
            _one_clear_error(str(refused))
            continue
        assert answer == go_on, forged  # the same bytes, so the same cursor
        assert SECRET not in answer.text
    assert genuine.cursor is not None
    for forged in _variants(genuine.cursor)[:40]:
        with pytest.raises(KBError):
            app.browse("kb_a", BrowseRequest(kb="kb_a", cursor=forged))


def test_a_cursor_works_only_with_its_own_call_and_kb(pair: tuple[App, Path]) -> None:
    """A read cursor given to list_documents, a listing or outline cursor given to read_document, and any
    cursor of kb_a given with kb=kb_b (which has a document at the same path) are refused; none reads kb_b."""
    app, _ = pair
    read_cursor = app.read("kb_a", ReadRequest(kb="kb_a", path="guide.md", max_tokens=200)).cursor
    list_cursor = app.browse("kb_a", BrowseRequest(kb="kb_a", limit=1)).cursor
    outline_cursor = app.browse("kb_a", BrowseRequest(kb="kb_a", path="guide.md", outline=True, limit=1)).cursor
    assert read_cursor and list_cursor and outline_cursor
    for cursor in (list_cursor, outline_cursor):
        with pytest.raises(KBError, match=_NOT_VALID):
            app.read("kb_a", ReadRequest(kb="kb_a", cursor=cursor))
    with pytest.raises(KBError, match=_NOT_VALID):
        app.browse("kb_a", BrowseRequest(kb="kb_a", cursor=read_cursor))
    for cursor in (read_cursor, list_cursor, outline_cursor):
        with pytest.raises(KBError, match=_NOT_VALID):
            app.read("kb_b", ReadRequest(kb="kb_b", cursor=cursor))
        with pytest.raises(KBError, match=_NOT_VALID):
            app.browse("kb_b", BrowseRequest(kb="kb_b", cursor=cursor))


def test_a_read_cursor_after_a_change_a_deletion_or_a_rebuild(pair: tuple[App, Path]) -> None:
    """A rebuild (new generation) of unchanged text goes on exactly; a change, a deletion, or a change then a
    rebuild is one clear error naming the document, never text of another version."""
    app, folder = pair
    first = app.read("kb_a", ReadRequest(kb="kb_a", path="guide.md", max_tokens=200))
    expected = app.read("kb_a", ReadRequest(kb="kb_a", cursor=first.cursor, max_tokens=200))
    generation = app.store.active_generation("kb_a")
    app.sync(SyncRequest(kb="kb_a", full=True))
    assert app.store.active_generation("kb_a") != generation
    again = app.read("kb_a", ReadRequest(kb="kb_a", cursor=first.cursor, max_tokens=200))
    assert again.model_dump(exclude={"indexed_at"}) == expected.model_dump(exclude={"indexed_at"})
    assert again.indexed_at >= expected.indexed_at  # the rebuild indexed it again
    listing = app.browse("kb_a", BrowseRequest(kb="kb_a", limit=1))
    write(folder / "a" / "guide.md", "# Guide A\n\nRewritten: " + "\n\n".join(f"New {n}." for n in range(400)))
    app.sync(SyncRequest(kb="kb_a"))
    with pytest.raises(KBError, match="guide.md changed since this cursor") as changed:
        app.read("kb_a", ReadRequest(kb="kb_a", cursor=first.cursor, max_tokens=200))
    _one_clear_error(str(changed.value))
    app.sync(SyncRequest(kb="kb_a", full=True))
    with pytest.raises(KBError, match="changed since"):
        app.read("kb_a", ReadRequest(kb="kb_a", cursor=first.cursor, max_tokens=200))
    assert [d.path for d in app.browse("kb_a", BrowseRequest(kb="kb_a", cursor=listing.cursor)).documents] == [
        "secret.md"
    ]
    (folder / "a" / "guide.md").unlink()
    app.sync(SyncRequest(kb="kb_a"))
    with pytest.raises(KBError, match="no document 'guide.md'") as deleted:
        app.read("kb_a", ReadRequest(kb="kb_a", cursor=first.cursor, max_tokens=200))
    _one_clear_error(str(deleted.value))


def test_an_outline_cursor_after_the_document_changed_is_refused(make_app: MakeApp, tmp_path: Path) -> None:
    """Fine."""
    write(tmp_path / "d" / "o.md", "# O\n\n" + "\n\n".join(f"## H{n}\n\ntext {n}" for n in range(30)))
    app = make_app({"name": "docs", "description": "O", "paths": [str(tmp_path / "d")]})
    app.sync()
    page = app.browse("docs", BrowseRequest(kb="docs", path="o.md", outline=True, limit=5))
    write(tmp_path / "d" / "o.md", "# O\n\n## Only\n\nshort now")
    app.sync()
    with pytest.raises(KBError, match="changed since"):
        app.browse("docs", BrowseRequest(kb="docs", cursor=page.cursor))


@pytest.mark.anyio
async def test_over_mcp_bad_cursors_are_one_clear_error_and_never_another_kbs_text(pair: tuple[App, Path]) -> None:
    """Through a real client session, forged, cross-call and cross-KB cursors are isError results in one
    line naming no internals."""
    app, _ = pair
    async with Client(build_server(app)) as client:
        read = await client.call_tool("read_document", {"kb": "kb_a", "path": "guide.md", "max_tokens": 200})
        cursor = read.structured_content["cursor"]
        listed = await client.call_tool("list_documents", {"kb": "kb_a", "limit": 1})
        list_cursor = listed.structured_content["cursor"]
        asks = [
            ("read_document", {"kb": "kb_b", "cursor": cursor}),
            ("list_documents", {"kb": "kb_a", "cursor": cursor}),
            ("read_document", {"kb": "kb_a", "cursor": list_cursor}),
            ("list_documents", {"kb": "kb_b", "cursor": list_cursor}),
            ("read_document", {"kb": "kb_a", "cursor": cursor[:-3]}),
            ("read_document", {"kb": "kb_a", "cursor": "é" * 30}),
            ("read_document", {"kb": "kb_a", "cursor": "A" * 5000}),
            ("read_document", {"kb": "kb_a", "cursor": "None"}),
            ("list_documents", {"kb": "kb_a", "cursor": "{}"}),
        ]
        for tool, arguments in asks:
            answer = await client.call_tool(tool, arguments)
            text = text_of(answer.content[0])
            assert answer.is_error, (tool, arguments, text)
            _one_clear_error(text)
            assert "B line" not in text and SECRET not in text


# ---- 3b. cursors of places with long names -------------------------------------------------------------

# 15 folders of 74 Chinese characters: a path of over 1,100 characters (3,300 bytes), under the 2,000 a request takes
_DEEP = "/".join(f"{n:02d}" + "知识库部门资料归档" * 8 for n in range(15))
_LONG_HEADING = "关于年假申请流程的详细说明" * 10
_DEEP_TEXT = (
    "".join(f"{'#' * level} {level}级{_LONG_HEADING}\n\n" for level in range(1, 5))
    + "\n".join(f"第{n}行：年假按工龄计算，每年至少五天。" for n in range(60))
    + "\n\n## 附录\n\n结束。\n"
)


@pytest.fixture
def deep(make_app: MakeApp, tmp_path: Path) -> tuple[App, Path]:
    """Five documents whose paths are over 1,100 Chinese characters, each with a section under four long headings."""
    for n in range(5):
        write(tmp_path / "docs" / _DEEP / f"{n}号文件.md", _DEEP_TEXT)
    app = make_app({"name": "deep", "description": "Deep", "paths": [str(tmp_path / "docs")]})
    app.sync()
    return app, tmp_path / "docs"


def _taken_back(cursors: list[str | None]) -> None:
    """Each cursor is short, and a request takes it (its bound is the requests' own)."""
    for cursor in filter(None, cursors):
        assert len(cursor) <= 1_000, len(cursor)
        ReadRequest(kb="deep", cursor=cursor)


def test_a_document_with_a_long_path_and_long_headings_reads_through_cursors_it_takes_back(
    deep: tuple[App, Path],
) -> None:
    """Read whole and by its deepest section in 200-token parts: every cursor is short and taken back, and the
    parts put end to end are the file, or the section under its full heading path."""
    app, _ = deep
    path = f"{_DEEP}/0号文件.md"
    whole = _follow(app, "deep", ReadRequest(kb="deep", path=path, max_tokens=200))
    assert len(whole) > 1 and _joined(whole) == _DEEP_TEXT
    _taken_back([answer.cursor for answer in whole])
    outline = app.browse("deep", BrowseRequest(kb="deep", path=path, outline=True)).outline
    deepest = outline[3].heading
    assert deepest.endswith(f"4级{_LONG_HEADING}") and len(deepest) > 500
    parts = _follow(app, "deep", ReadRequest(kb="deep", path=path, section=deepest, max_tokens=200))
    assert len(parts) > 1 and {part.section for part in parts} == {deepest}
    assert _joined(parts) == _DEEP_TEXT[_DEEP_TEXT.index("#### ") : _DEEP_TEXT.index("## 附录")].rstrip("\n")
    _taken_back([part.cursor for part in parts])


@pytest.mark.parametrize("sort", ["path", "changed"])
def test_documents_with_long_paths_are_listed_a_page_at_a_time_each_once(deep: tuple[App, Path], sort: str) -> None:
    app, _ = deep
    first = app.browse("deep", BrowseRequest(kb="deep", limit=1, sort=sort))
    listed = _browse_all(app, "deep", BrowseRequest(kb="deep", limit=1, sort=sort))
    assert sorted(listed) == [f"{_DEEP}/{n}号文件.md" for n in range(5)] and len(set(listed)) == 5
    _taken_back([first.cursor])


def test_a_long_prefix_is_listed_on_from_its_cursor_alone(deep: tuple[App, Path]) -> None:
    """A prefix too long to carry is found again from the paths it lists: the cursor alone goes on."""
    app, _ = deep
    listed = _browse_all(app, "deep", BrowseRequest(kb="deep", path=f"{_DEEP}/", limit=2))
    assert listed == [f"{_DEEP}/{n}号文件.md" for n in range(5)]


def test_a_long_glob_goes_on_with_its_path_and_without_it_says_so(deep: tuple[App, Path]) -> None:
    app, _ = deep
    glob = f"{_DEEP}/*号文件.md"
    first = app.browse("deep", BrowseRequest(kb="deep", path=glob, limit=2))
    _taken_back([first.cursor])
    rest = app.browse("deep", BrowseRequest(kb="deep", path=glob, cursor=first.cursor, limit=10))
    assert [d.path for d in first.documents + rest.documents] == [f"{_DEEP}/{n}号文件.md" for n in range(5)]
    with pytest.raises(KBError, match="pass it with the same path") as refused:
        app.browse("deep", BrowseRequest(kb="deep", cursor=first.cursor))
    _one_clear_error(str(refused.value))


def test_an_outline_of_a_long_path_is_paged_by_its_cursor(deep: tuple[App, Path]) -> None:
    app, _ = deep
    path = f"{_DEEP}/3号文件.md"
    pages = [app.browse("deep", BrowseRequest(kb="deep", path=path, outline=True, limit=1))]
    while pages[-1].cursor:
        pages.append(app.browse("deep", BrowseRequest(kb="deep", cursor=pages[-1].cursor, limit=1)))
    _taken_back([page.cursor for page in pages])
    assert [entry.heading.rsplit(" › ", 1)[-1] for page in pages for entry in page.outline] == [
        *(f"{level}级{_LONG_HEADING}" for level in range(1, 5)),
        "附录",
    ]
    assert {page.path for page in pages} == {path}


def test_long_paths_removed_between_pages_skip_nothing_left_and_a_read_of_one_says_it_is_gone(
    deep: tuple[App, Path],
) -> None:
    app, folder = deep
    first = app.browse("deep", BrowseRequest(kb="deep", limit=2))
    read = app.read("deep", ReadRequest(kb="deep", path=f"{_DEEP}/1号文件.md", max_tokens=200))
    (folder / _DEEP / "1号文件.md").unlink()  # the last entry the page showed
    app.sync()
    rest = _browse_all(app, "deep", BrowseRequest(kb="deep", cursor=first.cursor, limit=2))
    # the cursor carries the start of a long path: with the path gone, the listing goes on from where that start
    # sorts, so it may show again what the first page showed; it never skips one
    assert rest == sorted(rest) and set(rest) >= {f"{_DEEP}/{n}号文件.md" for n in (2, 3, 4)}
    with pytest.raises(KBError, match="no longer in 'deep'") as refused:
        app.read("deep", ReadRequest(kb="deep", cursor=read.cursor))
    _one_clear_error(str(refused.value))


def test_paths_whose_cursor_json_is_long_or_past_2000_characters_are_read_and_listed_through_cursors(
    make_app: MakeApp, tmp_path: Path
) -> None:
    """A path of control characters is short in bytes and six times longer in a cursor's JSON (a 4,068-character
    cursor, refused); a path of 2,086 characters was listed and cited but no read took it."""
    names = [("\x01" * 100 + "/") * 5 + f"{n}.md" for n in range(3)] + [("d" * 230 + "/") * 9 + "long.md"]
    for name in names:
        write(tmp_path / "docs" / name, "# Title\n\n" + "\n".join(f"Line {n} of the note." for n in range(80)))
    app = make_app({"name": "deep", "description": "Deep", "paths": [str(tmp_path / "docs")]})
    app.sync()
    for sort in ("path", "changed"):
        first = app.browse("deep", BrowseRequest(kb="deep", limit=1, sort=sort))
        _taken_back([first.cursor])
        assert sorted(_browse_all(app, "deep", BrowseRequest(kb="deep", limit=1, sort=sort))) == sorted(names)
    for name in names:
        parts = _follow(app, "deep", ReadRequest(kb="deep", path=name, max_tokens=200))
        _taken_back([part.cursor for part in parts])
        assert len(parts) > 1 and _joined(parts) == (tmp_path / "docs" / name).read_text()


def test_a_listings_cursor_given_with_outline_goes_on_with_the_listing(deep: tuple[App, Path]) -> None:
    """The cursor says what it continues: a listing's, given with outline=true, was an internal error."""
    app, _ = deep
    first = app.browse("deep", BrowseRequest(kb="deep", path=f"{_DEEP}/", limit=2))
    rest = app.browse("deep", BrowseRequest(kb="deep", cursor=first.cursor, outline=True, limit=10))
    assert [d.path for d in first.documents + rest.documents] == [f"{_DEEP}/{n}号文件.md" for n in range(5)]


@pytest.mark.anyio
async def test_over_mcp_a_model_follows_the_cursors_of_long_paths_with_the_cursor_alone(deep: tuple[App, Path]) -> None:
    """Through a client session, as a model goes on: kb and the answer's cursor, nothing else."""
    app, _ = deep
    async with Client(build_server(app)) as client:
        listed, cursor = [], None
        while True:
            answer = await client.call_tool(
                "list_documents", {"kb": "deep", "limit": 1, **({"cursor": cursor} if cursor else {})}
            )
            assert not answer.is_error, text_of(answer.content[0])
            listed += [d["path"] for d in answer.structured_content["documents"]]
            cursor = answer.structured_content["cursor"]
            if not cursor:
                break
        assert listed == [f"{_DEEP}/{n}号文件.md" for n in range(5)]
        parts, arguments = [], {"kb": "deep", "path": listed[4], "max_tokens": 200}
        while True:
            answer = await client.call_tool("read_document", arguments)
            assert not answer.is_error, text_of(answer.content[0])
            parts.append(answer.structured_content["text"])
            if not answer.structured_content["cursor"]:
                break
            arguments = {"kb": "deep", "cursor": answer.structured_content["cursor"], "max_tokens": 200}
        assert "".join(parts) == _DEEP_TEXT


# ---- 4. sections, pages, lines, paths ---------------------------------------------------------------

GUIDE = """# Guide

## Linux

### Setup

linux setup text

## Setup

top setup text

## Input -> Output

arrow text

## A › B

chevron text

## Notes

first notes

## Other

other text

## Notes

second notes

## 安装指南

中文内容

### 常见问题

问题与解答
"""


@pytest.fixture
def guide(make_app: MakeApp, tmp_path: Path) -> App:
    write(tmp_path / "g" / "guide.md", GUIDE)
    write(tmp_path / "g" / "short.md", "# Short\n\n" + "\n\n".join(f"Line {n}." for n in range(200)))
    app = make_app({"name": "docs", "description": "Guide", "paths": [str(tmp_path / "g")]})
    app.sync()
    return app


def _section(app: App, section: str) -> ReadOutput:
    return app.read("docs", ReadRequest(kb="docs", path="guide.md", section=section))


def test_a_section_named_by_its_full_path_is_that_section_not_a_deeper_one(guide: App) -> None:
    """A full heading path is that section, though the title leads it and a deeper section ends the same way."""
    answer = _section(guide, "Guide › Setup")
    assert answer.section == "Guide › Setup" and answer.text == "## Setup\n\ntop setup text"


def test_headings_holding_chevrons_or_arrows_read_by_the_heading_the_outline_gives(guide: App) -> None:
    """A heading whose own text holds `›` or `>` ('Input -> Output', 'A › B') reads by the heading the outline
    lists."""
    headings = [
        e.heading for e in guide.browse("docs", BrowseRequest(kb="docs", path="guide.md", outline=True)).outline
    ]
    assert "Guide › Input -> Output" in headings and "Guide › A › B" in headings
    assert _section(guide, "Guide › Input -> Output").text == "## Input -> Output\n\narrow text"
    assert _section(guide, "Guide › A › B").text == "## A › B\n\nchevron text"


def test_each_outline_entry_read_as_a_section_reads_that_entrys_lines(guide: App) -> None:
    """Two headings with the same path are two outline entries, the second numbered ('Guide › Notes (2)'), and each
    reads as its own section, named as the outline names it (a read of 'Notes (2)' said 'Notes')."""
    outline = guide.browse("docs", BrowseRequest(kb="docs", path="guide.md", outline=True, limit=200)).outline
    wrong: list[tuple[object, ...]] = []
    for entry in outline:
        try:
            answer = _section(guide, entry.heading)
        except KBError as refused:
            wrong.append((entry.heading, entry.line_start, str(refused)[:80]))
            continue
        if (answer.line_start, answer.line_end, answer.section) != (entry.line_start, entry.line_end, entry.heading):
            wrong.append((entry.heading, entry.line_start, answer.line_start, answer.section))
    assert not wrong, wrong
    assert any(entry.heading.endswith("(2)") for entry in outline)


def test_a_heading_the_outline_clips_reads_by_the_name_it_shows(make_app: MakeApp, tmp_path: Path) -> None:
    """The outline clips a 1,000-character heading (`…`); reading by that name said "no section"."""
    long = "Rules about annual leave and how to apply for it " * 20
    write(tmp_path / "g" / "long.md", f"# Guide\n\n## {long}\n\nthe long one\n\n## Short\n\nthe short one\n")
    app = make_app({"name": "docs", "description": "Guide", "paths": [str(tmp_path / "g")]})
    app.sync()
    shown = app.browse("docs", BrowseRequest(kb="docs", path="long.md", outline=True)).outline[1].heading
    assert shown.endswith("…") and len(shown) < len(long)
    answer = app.read("docs", ReadRequest(kb="docs", path="long.md", section=shown))
    assert answer.text.endswith("the long one") and answer.section == f"Guide › {long.strip()}"
    write(tmp_path / "g" / "twins.md", f"# Guide\n\n## {long}\n\nthe first\n\n## {long}\n\nthe second\n")
    app.sync()
    first, second = app.browse("docs", BrowseRequest(kb="docs", path="twins.md", outline=True)).outline[1:]
    assert first.heading != second.heading and second.heading.endswith("… (2)")  # clipped, its number kept
    for entry, said in ((first, "the first"), (second, "the second")):
        assert app.read("docs", ReadRequest(kb="docs", path="twins.md", section=entry.heading)).text.endswith(said)


def test_chinese_headings_case_and_a_leading_title_or_path_find_the_section(guide: App) -> None:
    """Fine."""
    assert _section(guide, "安装指南 › 常见问题").text == "### 常见问题\n\n问题与解答"
    assert _section(guide, "guide.md › Guide › 安装指南").section == "Guide › 安装指南"
    assert _section(guide, "  guide > linux >  SETUP ").section == "Guide › Linux › Setup"
    assert _section(guide, "Guide").line_start == 1
    for nothing in ("", "›", " > > ", "Nope", "Guide › Nope", "x" * 2000):
        with pytest.raises(KBError, match="no section") as refused:
            _section(guide, nothing)
        _one_clear_error(str(refused.value))
        assert len(str(refused.value)) < 3000


def test_lines_outside_the_document_or_backwards_are_one_clear_error(guide: App) -> None:
    """'0-5' and '5-1' are refused, and lines past the end say how many lines the document has."""
    for lines in ("0-5", "5-1", "0"):
        with pytest.raises(KBError, match="give a number from 1"):
            guide.read("docs", ReadRequest(kb="docs", path="short.md", lines=lines))
    tail = guide.read("docs", ReadRequest(kb="docs", path="short.md", lines="401-99999999"))
    assert tail.text == "Line 199." and (tail.line_start, tail.line_end, tail.lines) == (401, 401, 401)
    with pytest.raises(KBError, match="401") as refused:
        guide.read("docs", ReadRequest(kb="docs", path="short.md", lines="99999999-99999999"))
    _one_clear_error(str(refused.value))


def test_chunk_indexes_out_of_range_are_one_clear_error(guide: App) -> None:
    """Fine."""
    chunks = guide.browse("docs", BrowseRequest(kb="docs", path="short.md")).documents[0].chunks
    with pytest.raises(KBError, match=f"has {chunks} passages") as refused:
        guide.read("docs", ReadRequest(kb="docs", path="short.md", chunk=chunks))
    _one_clear_error(str(refused.value))
    last = guide.read("docs", ReadRequest(kb="docs", path="short.md", chunk=chunks - 1, max_tokens=20_000))
    assert last.text.endswith("Line 199.") and last.passage_end == len(last.text)


@pytest.fixture
def gaps(make_app: MakeApp, tmp_path: Path) -> App:
    """A five-page PDF whose pages 1, 3 and 5 are blank."""
    folder = tmp_path / "pdf"
    folder.mkdir()
    text_pdf(folder / "gaps.pdf", ["", "Second page about hiring.", "", "Fourth page about travel.", ""])
    app = make_app({"name": "docs", "description": "PDF", "paths": [str(folder)]})
    app.sync()
    return app


def test_a_blank_pdf_page_read_is_never_labelled_as_another_page(gaps: App) -> None:
    """A blank page asked alone says it has no text (naming the pages that have); pages 2-3 and 3-5 read what they
    should."""
    two_three = gaps.read("docs", ReadRequest(kb="docs", path="gaps.pdf", pages="2-3"))
    assert "hiring" in two_three.text and "travel" not in two_three.text
    three_five = gaps.read("docs", ReadRequest(kb="docs", path="gaps.pdf", pages="3-5"))
    assert "travel" in three_five.text and "hiring" not in three_five.text
    try:
        blank = gaps.read("docs", ReadRequest(kb="docs", path="gaps.pdf", pages="3"))
    except KBError as refused:
        _one_clear_error(str(refused))
        assert "3" in str(refused)
        return
    assert blank.text == "" and blank.page_start == blank.page_end == 3, blank.location


def test_a_pdf_whose_last_page_is_blank_counts_all_its_pages(gaps: App) -> None:
    """A five-page PDF ending in a blank page is listed and read as five pages."""
    [entry] = gaps.browse("docs", BrowseRequest(kb="docs")).documents
    assert entry.pages == 5
    assert gaps.read("docs", ReadRequest(kb="docs", path="gaps.pdf")).pages == 5


@pytest.mark.anyio
async def test_over_mcp_hostile_paths_and_numbers_are_one_clear_error(guide: App) -> None:
    """`..`, NUL, %2e%2e, absolute paths, URLs, SQL quotes read as documents that are not there; negative or
    huge numbers are refused by the tool's schema."""
    async with Client(build_server(guide)) as client:
        missing = text_of((await client.call_tool("read_document", {"kb": "docs", "path": "nope.md"})).content[0])
        for path in (
            "..",
            "../guide.md",
            "guide.md/..",
            "./guide.md",
            "/etc/passwd",
            "C:\\Windows\\win.ini",
            "guide.md\x00",
            "a\x00b",
            "%2e%2e/guide.md",
            "https://example.com/guide.md",
            "file:///etc/passwd",
            "' OR 1=1 --",
            "guide.md' OR path LIKE '%",
            "\\",
            "*",
            "guide.md ›",
        ):
            answer = await client.call_tool("read_document", {"kb": "docs", "path": path})
            text = text_of(answer.content[0])
            assert answer.is_error, (path, text)
            _one_clear_error(text)
            assert text.replace(repr(path), "X") == missing.replace("'nope.md'", "X"), (path, text)
            outline = await client.call_tool("list_documents", {"kb": "docs", "path": path, "outline": True})
            assert outline.is_error and text_of(outline.content[0]) == text
        for arguments, field in (
            ({"chunk": -1}, "chunk"),
            ({"chunk": 10**12}, "chunk"),
            ({"max_tokens": -5}, "max_tokens"),
            ({"max_tokens": 0}, "max_tokens"),
            ({"lines": "-3"}, "lines"),
            ({"pages": "-1"}, "pages"),
            ({"lines": "1-2-3"}, "lines"),
            ({"lines": "1e9"}, "lines"),
            ({"chunk": 1.5}, "chunk"),
            ({"chunk": "3"}, "chunk"),
        ):
            answer = await client.call_tool("read_document", {"kb": "docs", "path": "short.md", **arguments})
            assert answer.is_error and field in text_of(answer.content[0]), (arguments, text_of(answer.content[0]))
            _one_clear_error(text_of(answer.content[0]))
        for arguments in ({"limit": -1}, {"limit": 0}, {"limit": 201}, {"sort": "size"}):
            answer = await client.call_tool("list_documents", {"kb": "docs", **arguments})
            assert answer.is_error, arguments
            _one_clear_error(text_of(answer.content[0]))


# ---- 5. a KB's filter hides documents -----------------------------------------------------------------


@pytest.fixture
def hidden(make_app: MakeApp, tmp_path: Path) -> tuple[App, App]:
    """A KB whose `[kb.search] filter` shows only staff documents; the board minutes hide."""
    folder = tmp_path / "docs"
    write(
        folder / "leave.md",
        "---\naudience: staff\n---\n# Leave\n\n## Annual\n\n" + "\n\n".join(f"Leave rule {n}." for n in range(300)),
    )
    write(
        folder / "board" / "minutes.md",
        f"---\naudience: board\n---\n# Minutes\n\n## Merger\n\n{SECRET}\n\n"
        + "\n\n".join(f"Board line {n}." for n in range(300)),
    )
    kb = {
        "name": "docs",
        "description": "Staff",
        "paths": [str(folder)],
        "filterable": {"audience": {"type": "string"}},
    }
    open_app = make_app(kb, server={"cursor_secret": "shared-by-replicas"})  # the same index, no filter
    open_app.sync()
    app = make_app({**kb, "search": {"filter": {"audience": "staff"}}}, server={"cursor_secret": "shared-by-replicas"})
    return app, open_app


def test_a_hidden_document_cannot_be_read_listed_or_outlined_and_looks_missing(hidden: tuple[App, App]) -> None:
    """Every way in answers as for a document that does not exist."""
    app, _ = hidden

    def refusal(path: str, **part: Any) -> str:
        with pytest.raises(KBError) as refused:
            app.read("docs", ReadRequest(kb="docs", path=path, **part))
        return str(refused.value).replace(repr(path), "X")

    for part in ({}, {"section": "Merger"}, {"lines": "1-5"}, {"chunk": 0}, {"pages": "1"}):
        assert refusal("board/minutes.md", **part) == refusal("board/nope.md", **part)
    with pytest.raises(KBError) as outline:
        app.browse("docs", BrowseRequest(kb="docs", path="board/minutes.md", outline=True))
    assert "no document 'board/minutes.md'" in str(outline.value)
    with pytest.raises(KBError, match="no document 'board/minutes.md'"):
        app.document_text("docs", "board/minutes.md")
    for pattern in ("", "board", "board/", "board/minutes.md", "**", "**/*.md", "*/*", "board/*", "b*/m?nutes.md"):
        listed = app.browse("docs", BrowseRequest(kb="docs", path=pattern, limit=200))
        assert "board/minutes.md" not in [d.path for d in listed.documents]
        assert listed.total == len(listed.documents) <= 1
    assert not [
        hit
        for hit in app.search("docs", SearchRequest(query="merger Initech board", top_k=20)).hits
        if hit.source == "board/minutes.md"
    ]


def test_a_cursor_to_a_hidden_document_reaches_nothing(hidden: tuple[App, App]) -> None:
    """A genuine cursor (same cursor_secret, e.g. another replica without the filter) to the hidden
    document is refused as that document being missing; a listing cursor lists nothing hidden."""
    app, open_app = hidden
    cursor = open_app.read("docs", ReadRequest(kb="docs", path="board/minutes.md", max_tokens=200)).cursor
    with pytest.raises(KBError, match="no document 'board/minutes.md'") as refused:
        app.read("docs", ReadRequest(kb="docs", cursor=cursor, max_tokens=200))
    assert SECRET not in str(refused.value)
    outline = open_app.browse("docs", BrowseRequest(kb="docs", path="board/minutes.md", outline=True, limit=1))
    if outline.cursor:
        with pytest.raises(KBError, match="no document"):
            app.browse("docs", BrowseRequest(kb="docs", cursor=outline.cursor))
    listing = open_app.browse("docs", BrowseRequest(kb="docs", limit=1))
    assert listing.cursor
    rest = app.browse("docs", BrowseRequest(kb="docs", cursor=listing.cursor))
    assert "board/minutes.md" not in [d.path for d in rest.documents]


@pytest.mark.anyio
async def test_over_mcp_a_hidden_document_is_not_offered_by_path_completion(hidden: tuple[App, App]) -> None:
    """Completing the document resource's path offers only what the KB's filter lets callers see."""
    app, _ = hidden
    ref = ResourceTemplateReference(type="ref/resource", uri="kb://{name}/documents/{+path}")
    async with Client(build_server(app)) as client:
        offered = (
            await client.complete(ref, {"name": "path", "value": ""}, context_arguments={"name": "docs"})
        ).completion.values
        board = (
            await client.complete(ref, {"name": "path", "value": "board/"}, context_arguments={"name": "docs"})
        ).completion
    assert offered == ["leave.md"]
    assert board.values == [] and not board.total


@pytest.mark.anyio
async def test_over_mcp_a_hidden_document_answers_as_a_missing_one_everywhere(hidden: tuple[App, App]) -> None:
    """Read_document, list_documents (prefix, glob, outline) and the document resource."""
    app, _ = hidden
    async with Client(build_server(app)) as client:

        async def read(path: str) -> str:
            answer = await client.call_tool("read_document", {"kb": "docs", "path": path, "section": "Merger"})
            assert answer.is_error
            return text_of(answer.content[0]).replace(repr(path), "X")

        assert await read("board/minutes.md") == await read("board/gone.md")
        for path in ("board/", "board/*", "**/minutes.md", "**"):
            listed = await client.call_tool("list_documents", {"kb": "docs", "path": path})
            assert [d["path"] for d in listed.structured_content["documents"]] in ([], ["leave.md"])
            assert "Minutes" not in text_of(listed.content[0]) and "minutes.md —" not in text_of(listed.content[0])
        outline = await client.call_tool("list_documents", {"kb": "docs", "path": "board/minutes.md", "outline": True})
        assert outline.is_error and "Merger" not in text_of(outline.content[0])
        with pytest.raises(Exception) as resource:
            await client.read_resource("kb://docs/documents/board/minutes.md")
        assert SECRET not in str(resource.value) and "no document" in str(resource.value)
        across = (
            await client.call_tool("search_knowledge_bases", {"query": "merger Initech"})
            if "search_knowledge_bases" in {t.name for t in (await client.list_tools()).tools}
            else None
        )
        assert across is None or SECRET not in text_of(across.content[0])


# ---- 6. search across KBs -----------------------------------------------------------------------------


@pytest.fixture
def across(make_app: MakeApp, tmp_path: Path) -> App:
    write(
        tmp_path / "hr" / "guide.md",
        "---\nyear: 2024\n---\n# HR guide\n\nAnnual leave is requested in the HR portal two weeks ahead.\n",
    )
    write(tmp_path / "it" / "guide.md", "# IT guide\n\nReset your password in the self-service portal.\n")
    app = make_app(
        {
            "name": "hr",
            "description": "HR",
            "paths": [str(tmp_path / "hr")],
            "filterable": {"year": {"type": "integer"}},
        },
        {"name": "it", "description": "IT", "paths": [str(tmp_path / "it")]},
        {"name": "later", "description": "Not synced yet", "paths": [str(tmp_path / "it")]},
    )
    app.sync(SyncRequest(kb="hr"))
    app.sync(SyncRequest(kb="it"))
    return app


def test_search_across_keeps_same_paths_apart_and_says_what_it_left_out(across: App) -> None:
    """One path in two KBs is two hits, each with its own KB's text; duplicate names count once; a KB not
    synced is left out with a note; a field only one KB has is refused; no match is an empty answer."""
    result = across.search_across(["hr", "it", "hr"], SearchRequest(query="portal", mode="keyword", top_k=10))
    by_kb = {hit.kb: hit for hit in result.hits}
    assert sorted(by_kb) == ["hr", "it"] and len(result.hits) == 2
    assert "Annual leave" in by_kb["hr"].text and "password" in by_kb["it"].text
    assert all(hit.source == "guide.md" for hit in result.hits)
    with_later = across.search_across(["hr", "later"], SearchRequest(query="annual leave"))
    assert with_later.hits and "later: not synced yet, left out" in with_later.notes
    with pytest.raises(KBError, match="unknown filter field 'year'") as refused:
        across.search_across(["hr", "it"], SearchRequest(query="leave", filters={"year": 2024}))
    _one_clear_error(str(refused.value))
    assert across.search_across(["hr"], SearchRequest(query="leave", filters={"year": 2024})).hits
    nothing = across.search_across(["hr", "it"], SearchRequest(query="zzqxjv", mode="keyword"))
    assert nothing.hits == []
    with pytest.raises(KBError, match="synced"):
        across.search_across(["later"], SearchRequest(query="leave"))


@pytest.mark.anyio
async def test_over_mcp_search_across_with_empty_duplicate_or_unsynced_kbs(across: App) -> None:
    """Kbs=[] searches every KB the caller sees (as kbs left out does), duplicates count once, an unknown KB
    is one clear error, a filter field one KB lacks is refused by the schema, no match is no error."""
    async with Client(build_server(across)) as client:

        async def search(**arguments: Any) -> CallToolResult:
            return await client.call_tool("search_knowledge_bases", {"query": "portal", "mode": "keyword", **arguments})

        everything, empty = await search(), await search(kbs=[])
        assert not empty.is_error and empty.structured_content == everything.structured_content
        assert "later: not synced yet, left out" in empty.structured_content["notes"]
        twice = await search(kbs=["hr", "hr", "it", "it"])
        assert sorted((h["kb"], h["source"]) for h in twice.structured_content["results"]) == [
            ("hr", "guide.md"),
            ("it", "guide.md"),
        ]
        unknown = await search(kbs=["hr", "nope"])
        assert unknown.is_error and "nope" in text_of(unknown.content[0])
        _one_clear_error(text_of(unknown.content[0]))
        filtered = await search(kbs=["hr", "it"], filters={"year": 2024})
        assert filtered.is_error and "year" in text_of(filtered.content[0])
        none = await client.call_tool("search_knowledge_bases", {"query": "zzqxjv", "mode": "keyword"})
        assert not none.is_error and none.structured_content["results"] == []
        assert text_of(none.content[0]).startswith("No passages found") or "No passages found" in text_of(
            none.content[0]
        )
