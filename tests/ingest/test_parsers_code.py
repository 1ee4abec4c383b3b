"""Source code: symbols as chunks named by their qualified names, with line ranges, in every language read by syntax;
line windows for other code and without the grammars; hostile files never crash the parser."""

import re
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import ROOT, write

from mcp_kb.ingest.chunking import Chunk, chunk_document
from mcp_kb.ingest.document import Document
from mcp_kb.ingest.parsers import code, is_supported, parse_file
from mcp_kb.models.estimate import EstimatedTokens
from mcp_kb.settings import ChunkingConfig

TOKENS = EstimatedTokens(512)  # the model-free count: these tests need no model files

PYTHON = '''import os


class User:
    """A person who signs in."""

    table = "users"

    def get_by_id(self, user_id):
        """Finds one user by id."""
        return self.rows[user_id]

    def save(self):
        """Stores the user."""
        self.rows.append(self)
'''
JAVASCRIPT = """import fs from "fs";

/** A person who signs in. */
export class User {
  /** Finds one user by id. */
  getById(userId) {
    return this.rows[userId];
  }

  /** Stores the user. */
  save() {
    this.rows.push(this);
  }
}
"""
TYPESCRIPT = """import { Row } from "./db";

/** A person who signs in. */
export class User {
  /** Finds one user by id. */
  getById(userId: number): User {
    return this.rows[userId];
  }

  /** Stores the user. */
  save(): void {
    this.rows.push(this);
  }
}
"""
TSX = """import React from "react";

/** A person who signs in. */
export class User extends React.Component<Props> {
  /** Finds one user by id. */
  getById(userId: number): User {
    return this.rows[userId];
  }

  /** Stores the user. */
  save(): JSX.Element {
    return <div>{this.rows.push(this)}</div>;
  }
}
"""
GO = """package models

import "fmt"

// User is a person who signs in.
type User struct {
	ID int
}

// GetByID finds one user by id.
func (u *User) GetByID(id int) *User {
	return u.rows[id]
}

// Save stores the user.
func (u *User) Save() {
	fmt.Println(u.rows, u)
}
"""
RUST = """use std::fmt;

/// A person who signs in.
pub struct User {
    id: u32,
}

impl User {
    /// Finds one user by id.
    pub fn get_by_id(id: u32) -> User {
        self.rows[id]
    }

    /// Stores the user.
    pub fn save(&self) {
        self.rows.push(self);
    }
}
"""
JAVA = """package app;

import java.util.List;

/** A person who signs in. */
public class User {
    private int id;

    /** Finds one user by id. */
    public User getById(int id) {
        return rows.get(id);
    }

    /** Stores the user. */
    public void save() {
        rows.add(this);
    }
}
"""
C = """#include <stdio.h>

/* A person who signs in. */
struct user {
    int id;
};

/* Finds one user by id. */
struct user *user_get_by_id(int id) {
    return &rows[id];
}

/* Stores the user. */
void user_save(struct user *u) {
    rows_push(rows, u);
}
"""
CPP = """#include <string>

namespace app {

// A person who signs in.
class User {
 public:
  // Finds one user by id.
  User* getById(int id) {
    return rows[id];
  }

  // Stores the user.
  void save() {
    rows.push_back(this);
  }

 private:
  int id_;
};

}  // namespace app
"""
CSHARP = """using System;

namespace App
{
    /// <summary>A person who signs in.</summary>
    public class User
    {
        /// <summary>Finds one user by id.</summary>
        public User GetById(int id)
        {
            return rows[id];
        }

        /// <summary>Stores the user.</summary>
        public void Save()
        {
            rows.Add(this);
        }
    }
}
"""
RUBY = """require "json"

# A person who signs in.
class User
  attr_reader :id

  # Finds one user by id.
  def get_by_id(id)
    @rows[id]
  end

  # Stores the user.
  def save
    @rows << self
  end
end
"""
PHP = """<?php
use App\\Db;

/** A person who signs in. */
class User {
    private $id;

    /** Finds one user by id. */
    public function getById($id) {
        return $this->rows[$id];
    }

    /** Stores the user. */
    public function save() {
        $this->rows[] = $this;
    }
}
"""

# file name, source, the class's path, then each method's path and lines (the comment above it to its end)
LANGUAGES = {
    "python": ("models.py", PYTHON, ("User",), ("User", "get_by_id"), (9, 11), ("User", "save"), (13, 15)),
    "javascript": ("user.js", JAVASCRIPT, ("User",), ("User", "getById"), (5, 8), ("User", "save"), (10, 14)),
    "typescript": ("user.ts", TYPESCRIPT, ("User",), ("User", "getById"), (5, 8), ("User", "save"), (10, 14)),
    "tsx": ("user.tsx", TSX, ("User",), ("User", "getById"), (5, 8), ("User", "save"), (10, 14)),
    "go": ("user.go", GO, ("User",), ("User", "GetByID"), (10, 13), ("User", "Save"), (15, 18)),
    "rust": ("user.rs", RUST, ("User",), ("User", "get_by_id"), (9, 12), ("User", "save"), (14, 18)),
    "java": ("User.java", JAVA, ("User",), ("User", "getById"), (9, 12), ("User", "save"), (14, 18)),
    "c": ("user.c", C, ("user",), ("user_get_by_id",), (8, 11), ("user_save",), (13, 16)),
    "cpp": ("user.cpp", CPP, ("app", "User"), ("app", "User", "getById"), (7, 11), ("app", "User", "save"), (13, 16)),
    "csharp": (
        "User.cs",
        CSHARP,
        ("App", "User"),
        ("App", "User", "GetById"),
        (8, 12),
        ("App", "User", "Save"),
        (14, 20),
    ),
    "ruby": ("user.rb", RUBY, ("User",), ("User", "get_by_id"), (7, 10), ("User", "save"), (12, 16)),
    "php": ("User.php", PHP, ("User",), ("User", "getById"), (8, 11), ("User", "save"), (13, 17)),
}


def _chunks(tmp_path: Path, name: str, text: str, **settings: Any) -> tuple[Document, list[Chunk]]:
    document = parse_file(write(tmp_path / name, text), name)
    return document, chunk_document(document, ChunkingConfig(**settings), TOKENS)


def _lines(text: str, first: int | None, last: int | None) -> str:
    assert first is not None
    return "\n".join(text.split("\n")[first - 1 : last])


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_method_is_a_chunk_named_by_its_class_with_its_comment_and_lines(tmp_path: Path, language: str) -> None:
    name, text, owner, first, first_lines, second, second_lines = LANGUAGES[language]
    document, chunks = _chunks(tmp_path, name, text)
    assert document.kind == "code" and document.title == name and document.metadata == {"language": language}
    by_path: dict[tuple[str, ...], Chunk] = {}
    for chunk in chunks:
        by_path.setdefault(chunk.heading_path, chunk)
    assert "person who signs in" in by_path[owner].text  # the class's own lines, its comment with them
    for path, (line_start, line_end), doc, other in (
        (first, first_lines, "finds one user by id", "stores"),
        (second, second_lines, "stores the user", "finds one"),
    ):
        chunk = by_path[path]
        assert (chunk.line_start, chunk.line_end) == (line_start, line_end)
        assert chunk.text == _lines(text, line_start, line_end)  # as written: no line added, none lost
        assert doc in chunk.text.lower() and other not in chunk.text.lower()
    starts = [c.line_start for c in chunks if c.line_start is not None]
    assert [c.line_start for c in chunks] == starts == sorted(starts)  # in reading order


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_language_has_its_imports_as_the_first_chunk(tmp_path: Path, language: str) -> None:
    name, text = LANGUAGES[language][:2]
    _, chunks = _chunks(tmp_path, name, text)
    head = "\n\n".join(text.split("\n\n")[: 2 if language in ("go", "java") else 1])  # a package line, then imports
    assert (chunks[0].heading_path, chunks[0].text) == (("imports",), head)


def test_citation_names_the_file_and_the_qualified_symbol(tmp_path: Path) -> None:
    _, chunks = _chunks(tmp_path, "pkg/models.py", PYTHON)
    method = next(chunk for chunk in chunks if chunk.heading_path == ("User", "get_by_id"))
    assert method.heading == "User › get_by_id" and method.embed_text.startswith("User › get_by_id\n")


def test_module_docstring_and_imports_are_one_chunk_of_their_own(tmp_path: Path) -> None:
    text = (
        '"""Billing: invoices and their totals."""\n\nimport os\nfrom decimal import Decimal\n\nRATE = 3\n\n\n'
        "def total(lines):\n    return sum(lines)\n"
    )
    _, chunks = _chunks(tmp_path, "billing.py", text)
    assert [chunk.heading_path for chunk in chunks] == [("imports",), (), ("total",)]
    imports = chunks[0]
    assert imports.text == '"""Billing: invoices and their totals."""\n\nimport os\nfrom decimal import Decimal'
    assert (imports.line_start, imports.line_end) == (1, 4)


def test_top_level_code_between_definitions_stays_in_reading_order_packed_together(tmp_path: Path) -> None:
    text = "def first():\n    return 1\n\nA = 1\nB = 2\nregistry = {}\n\ndef second():\n    return 2\n"
    _, chunks = _chunks(tmp_path, "steps.py", text)
    assert [(c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        (("first",), 1, 2),
        ((), 4, 6),
        (("second",), 8, 9),
    ]
    assert chunks[1].text == "A = 1\nB = 2\nregistry = {}"


def test_two_tiny_functions_never_share_a_chunk(tmp_path: Path) -> None:
    text = "def a(): pass\ndef b(): pass\nclass C:\n    def d(self): pass\n    def e(self): pass\n"
    _, chunks = _chunks(tmp_path, "tiny.py", text, min_tokens=50)  # far above their size
    assert [chunk.heading_path for chunk in chunks] == [("a",), ("b",), ("C",), ("C", "d"), ("C", "e")]


def test_a_long_function_is_cut_between_statements(tmp_path: Path) -> None:
    statements = "".join(f"    total += compute(\n        weight_{i},\n        factor_{i},\n    )\n" for i in range(60))
    text = (
        f'def long_function(compute):\n    """Adds up sixty weighted factors."""\n    total = 0\n{statements}'
        f"    return total\n"
    )
    _, chunks = _chunks(tmp_path, "long.py", text, max_tokens=64, overlap=0)
    assert len(chunks) > 5 and {chunk.heading_path for chunk in chunks} == {("long_function",)}
    assert "Adds up sixty" in chunks[0].text and chunks[0].text.startswith("def long_function")
    for chunk in chunks[1:]:
        assert re.match(r" {4}(total \+= compute\(|return total)", chunk.text), chunk.text[:40]
        assert chunk.text.rstrip().endswith((")", "return total"))
    for before, after in zip(chunks, chunks[1:]):
        assert before.line_end is not None and after.line_start == before.line_end + 1  # nothing skipped between them
    assert chunks[-1].line_end == text.count("\n")


def test_a_syntax_error_still_yields_every_line_and_the_symbols_around_it(tmp_path: Path) -> None:
    text = "def ok():\n    return 1\n\ndef broken(:\n    pass\n    )]}\n\ndef fine():\n    return 2\n"
    document = parse_file(write(tmp_path / "broken.py", text), "broken.py")
    paths = [block.heading_path for block in document.blocks]
    assert ("ok",) in paths and ("fine",) in paths
    kept = "\n".join(block.text for block in document.blocks)
    assert all(line in kept for line in text.splitlines())


def test_classes_nested_deeper_than_the_limit_are_kept_whole(tmp_path: Path) -> None:
    depth = 400
    text = "".join(" " * level + f"class Level{level}:\n" for level in range(depth)) + " " * depth + "x = 1\n"
    document = parse_file(write(tmp_path / "deep.py", text), "deep.py")
    assert max(len(block.heading_path) for block in document.blocks) <= 20
    assert "x = 1" in document.blocks[-1].text


@pytest.mark.parametrize(
    "name, text",
    [
        ("brackets.py", "x = " + "[" * 50_000 + "]" * 50_000 + "\n"),
        ("unclosed.js", "let x = " + "(" * 50_000 + "\nfunction after() { return 1; }\n"),
        ("braces.c", "int main() " + "{" * 50_000 + "}" * 50_000 + "\n"),
        ("nul.py", "def f():\n    return 'a\x00b'\n\x00\x00\ndef g():\n    return 2\n"),
    ],
    ids=["50k nested brackets", "50k unclosed parentheses", "50k nested blocks", "NUL bytes"],
)
def test_hostile_code_is_parsed_without_crashing(tmp_path: Path, name: str, text: str) -> None:
    document = parse_file(write(tmp_path / name, text), name)
    kept = "".join(block.text for block in document.blocks)
    assert "".join(kept.split()) == "".join(text.split())  # every character kept, in order


def test_a_five_megabyte_line_is_cut_into_windows_with_a_note(tmp_path: Path) -> None:
    text = "var a = function () { return 1; };" * 150_000  # 5 MB of minified code on one line
    document = parse_file(write(tmp_path / "bundle.min.js", text), "bundle.min.js")  # never given to the grammar
    assert [block.text for block in document.blocks] == [text]
    assert document.blocks[0].line_start == document.blocks[0].line_end == 1
    assert document.notes == (code.TOO_LARGE,)


def test_invalid_utf8_is_decoded_and_still_parsed(tmp_path: Path) -> None:
    (tmp_path / "legacy.py").write_bytes(b"def greet():\n    return 'caf\xe9 \xff\xfe'\n\ndef other():\n    pass\n")
    document = parse_file(tmp_path / "legacy.py", "legacy.py")
    assert list(dict.fromkeys(block.heading_path for block in document.blocks)) == [("greet",), ("other",)]
    assert "return 'caf" in document.blocks[1].text


def test_other_code_and_config_files_are_cut_into_windows_of_about_fifty_lines(tmp_path: Path) -> None:
    lines = [f"step_{number}: run --flag {number}" for number in range(1, 131)]
    lines[44] = ""  # a blank line between the 40th and 60th line ends the first window there
    text = "\n".join(lines) + "\n"
    document = parse_file(write(tmp_path / "pipeline.yaml", text), "pipeline.yaml")
    assert document.kind == "code" and document.notes == ()
    ranges = [(block.line_start, block.line_end) for block in document.blocks]
    assert ranges == [(1, 44), (46, 95), (96, 130)]
    assert all(block.text == _lines(text, block.line_start, block.line_end) for block in document.blocks)
    chunks = chunk_document(document, ChunkingConfig(), TOKENS)
    assert chunks[0].line_start == 1 and chunks[-1].line_end == 130


@pytest.mark.parametrize("suffix", [*code.LANGUAGE_BY_SUFFIX, *code.PLAIN_SUFFIXES, ".ipynb"])
def test_code_suffixes_are_supported(suffix: str) -> None:
    assert is_supported(suffix)


@pytest.fixture
def without_grammars(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As on a machine without the `code` extra: importing tree-sitter-language-pack fails."""
    monkeypatch.setitem(sys.modules, "tree_sitter_language_pack", None)
    code._parser.cache_clear()
    yield
    code._parser.cache_clear()


def test_the_repositories_page_says_what_a_sync_without_the_code_extra_does() -> None:
    page = " ".join((ROOT / "docs" / "repositories.md").read_text(encoding="utf-8").split())
    assert "pip install 'mcp-kb-server[code]'" in page and code.NO_GRAMMARS.split(":")[0] in page


def test_without_the_grammars_code_is_cut_into_windows_with_one_note(tmp_path: Path, without_grammars: None) -> None:
    text = PYTHON + "".join(f"\n\ndef helper_{number}():\n    return {number}\n" for number in range(30))
    document, chunks = _chunks(tmp_path, "models.py", text)
    assert document.notes == (code.NO_GRAMMARS,) and "pip install 'mcp-kb-server[code]'" in code.NO_GRAMMARS
    assert all(block.heading_path == () for block in document.blocks)
    assert document.blocks[0].line_start == 1 and document.blocks[-1].line_end == text.count("\n")
    assert all(
        block.line_end is not None and block.line_start is not None and block.line_end - block.line_start < 60
        for block in document.blocks
    )
    assert chunks and "get_by_id" in chunks[0].text


def test_a_five_thousand_line_file_gives_each_function_its_own_section(tmp_path: Path) -> None:
    text = "".join(f"def function_{i}(a, b):\n    '''Adds.'''\n    c = a + b\n    return c\n\n" for i in range(1000))
    path = write(tmp_path / "big.py", text)
    document = parse_file(path, "big.py")  # speed: benchmarks/code_search.py; a 5,000-line file parses in ~0.05 s
    assert len({block.heading_path for block in document.blocks}) == 1000
