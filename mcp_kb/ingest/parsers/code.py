"""Source code cut by its syntax: each function, method and class is a section of its own, named by its
qualified name (`User › get_by_id`), with line ranges for citations.

A syntax tree from tree-sitter (the optional `code` extra: grammars bundled in tree-sitter-language-pack)
is walked by one small generic walker; what each language calls its definitions is data (`_GRAMMARS`).

- A function's blocks are its header (decorators, signature, the comment just above it) and the
  statements of its body, one block each: the chunker packs them, so a long function is cut between
  statements, and its docstring (the first statement) stays with the signature.
- A class's own lines (header, docstring, fields) have the path (Class,); its methods are symbols of
  their own (Class, method). Impls, interfaces, traits, modules and namespaces nest the same way.
- The file's head, up to its last import before the first definition (module docstring, license
  comment, package line, imports), has the path ("imports",); other top-level code keeps the path ()
  and stays in reading order between the symbols.
- Code that does not parse still yields its lines (ERROR nodes are blocks like any other).

Without the grammars, files too large to parse (over 2 MB, or minified), and the languages listed as
plain code (shell, SQL, YAML, ...), text is cut into windows of about 50 lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..document import Block, Document, Heading
from .bounds import check_time
from .text import read_text

if TYPE_CHECKING:
    from tree_sitter import Node, Parser
    from tree_sitter_language_pack import SupportedLanguage

# How the extra is named where a note asks for it.
NO_GRAMMARS = (
    "cut into line windows, not by functions and classes: the syntax grammars are not installed "
    "(pip install 'mcp-kb-server[code]')"
)
TOO_LARGE = "cut into line windows, not by functions and classes: over 2 MB or minified (long lines)"
_SYNTAX_MAX_CHARS = 2_000_000  # a tree of 5 MB of code took 7 s and 640 MB; such files are generated anyway
_SYNTAX_MAX_LINE_MEAN = 400  # characters per line on average: minified code, whose lines hold many symbols
_WINDOW_LINES = (40, 50, 60)  # a window ends at a blank line between its 40th and 60th line, else after its 50th
_MAX_NESTING = 16  # classes in classes deeper than this are kept whole, so no tree can exhaust the stack
_MAX_DECLARATORS = 16  # C declarators wrap each other (pointer, function, parentheses) to find the name
_NAME_CHARS = 120


@dataclass(frozen=True)
class _Grammar:
    """What one language's syntax tree calls its symbols (node types, by tree-sitter's names)."""

    functions: frozenset[str]  # one symbol each, nested functions included
    containers: frozenset[str]  # their members are symbols of their own (classes, impls, namespaces)
    imports: frozenset[str]
    name_fields: tuple[str, ...]  # where the name is: C's is inside its declarator, a Rust impl's is its type


def _grammar(functions: str, containers: str, imports: str, names: str = "name") -> _Grammar:
    return _Grammar(
        frozenset(functions.split()), frozenset(containers.split()), frozenset(imports.split()), tuple(names.split())
    )


_JAVASCRIPT = (
    "function_declaration generator_function_declaration method_definition",
    "class_declaration",
    "import_statement",
)
_TYPESCRIPT = (
    _JAVASCRIPT[0],
    f"{_JAVASCRIPT[1]} abstract_class_declaration interface_declaration internal_module module enum_declaration",
    "import_statement import_alias",
)
_C = ("function_definition type_definition", "struct_specifier union_specifier enum_specifier", "preproc_include")
_GRAMMARS = {
    "python": _grammar(
        "function_definition", "class_definition", "import_statement import_from_statement future_import_statement"
    ),
    "javascript": _grammar(*_JAVASCRIPT),
    "typescript": _grammar(*_TYPESCRIPT),
    "tsx": _grammar(*_TYPESCRIPT),
    "go": _grammar("function_declaration method_declaration", "type_declaration", "import_declaration"),
    "rust": _grammar(
        "function_item macro_definition",
        "impl_item struct_item enum_item union_item trait_item mod_item",
        "use_declaration extern_crate_declaration",
        names="name type",
    ),
    "java": _grammar(
        "method_declaration constructor_declaration compact_constructor_declaration",
        "class_declaration interface_declaration enum_declaration record_declaration annotation_type_declaration",
        "import_declaration",
    ),
    "c": _grammar(*_C, names="name declarator"),
    "cpp": _grammar(
        _C[0], f"{_C[1]} class_specifier namespace_definition", f"{_C[2]} using_declaration", names="name declarator"
    ),
    "csharp": _grammar(
        "method_declaration constructor_declaration destructor_declaration operator_declaration "
        "conversion_operator_declaration",
        "class_declaration struct_declaration interface_declaration record_declaration "
        "enum_declaration namespace_declaration",
        "using_directive",
    ),
    "ruby": _grammar("method singleton_method", "class module", ""),  # imports: `require` calls (_REQUIRES)
    "php": _grammar(
        "function_definition method_declaration",
        "class_declaration interface_declaration trait_declaration enum_declaration namespace_definition",
        "namespace_use_declaration require_expression require_once_expression include_expression "
        "include_once_expression",
    ),
}
LANGUAGE_BY_SUFFIX = {
    **dict.fromkeys([".py", ".pyi"], "python"),
    **dict.fromkeys([".js", ".mjs", ".cjs", ".jsx"], "javascript"),
    ".ts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    # C++'s grammar reads C declarations too, while C's breaks on classes: a .h file is read as C++
    **dict.fromkeys([".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh"], "cpp"),
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
}
# Plain-text code and configuration without a grammar here: line windows.
PLAIN_SUFFIXES = (
    ".sh",
    ".bash",
    ".zsh",
    ".sql",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".kt",
    ".kts",
    ".swift",
    ".scala",
    ".lua",
    ".r",
    ".pl",
    ".pm",
    ".css",
    ".scss",
    ".less",
)

# Nodes that wrap a definition (decorators, `export`, `template <...>`, a TypeScript namespace statement).
_WRAPPERS = frozenset(
    {"decorated_definition", "export_statement", "template_declaration", "expression_statement", "ambient_declaration"}
)
# Nodes whose children are read as if they stood in their place: Go's statement list, Java's enum members,
# C's conditional compilation (an include guard wraps a whole header) and `extern "C" { ... }`.
_TRANSPARENT = frozenset(
    {
        "statement_list",
        "enum_body_declarations",
        "preproc_ifdef",
        "preproc_if",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "declaration_list",
    }
)
# What the next definition takes along when it follows on the very next line.
_ATTACHED = frozenset({"comment", "line_comment", "block_comment", "attribute_item", "decorator", "access_specifier"})
# `const f = () => ...` in JavaScript: a function named by its variable.
_DECLARATIONS = frozenset({"lexical_declaration", "variable_declaration"})
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function", "class"})
_REQUIRES = frozenset({"require", "require_relative"})  # Ruby's imports are method calls
# A unit that only closes what came before (`}`, `end`, `#endif`) joins the block before it, not a chunk of its own.
_CLOSER = re.compile(r"\s*(?:[})\]]|end\b|#\s*endif\b)[\s})\];,]*(?:(?://|#|/\*)[^\n]*)?")
_CLOSER_CHARS = 80


def parse(path: Path, doc_id: str) -> Document:
    text = read_text(path)
    language = LANGUAGE_BY_SUFFIX.get(path.suffix.lower())
    blocks, note = code_blocks(text, language)
    return Document(
        doc_id,
        "code",
        path.name,
        tuple(blocks),
        {"language": language} if language else {},
        notes=(note,) if note else (),
        sections_apart=True,
        source=text,
        headings=symbols(blocks),
    )


def symbols(blocks: list[Block]) -> tuple[Heading, ...]:
    """The outline of code cut by syntax: each symbol (and each class holding some) with the lines of its blocks."""
    spans: dict[tuple[str, ...], list[int]] = {}
    for block in blocks:
        for depth in range(1, len(block.heading_path) + 1):
            span = spans.setdefault(block.heading_path[:depth], [block.line_start or 1, block.line_end or 1])
            span[0], span[1] = min(span[0], block.line_start or 1), max(span[1], block.line_end or 1)
    return tuple(Heading(path, first, last) for path, (first, last) in spans.items())


def code_blocks(text: str, language: str | None) -> tuple[list[Block], str | None]:
    """Blocks of source code: by syntax when the language has a grammar here, else line windows; and a note
    when syntax was wanted but could not be used."""
    if language is None:
        return line_windows(text), None
    parser = _parser(language)
    if parser is None:
        return line_windows(text), NO_GRAMMARS
    if len(text) > _SYNTAX_MAX_CHARS or len(text) > _SYNTAX_MAX_LINE_MEAN * (text.count("\n") + 1):
        return line_windows(text), TOO_LARGE
    return _Walk(text, parser, _GRAMMARS[language]).blocks(), None


def line_windows(text: str) -> list[Block]:
    """Windows of about 50 lines, ended at a blank line where one is near, with their line ranges."""
    lines = text.split("\n")
    shortest, usual, longest = _WINDOW_LINES
    blocks = []
    start = 0
    while start < len(lines):
        check_time()
        end = min(start + longest, len(lines))  # exclusive
        if end < len(lines):
            blank = next((row for row in range(end - 1, start + shortest - 1, -1) if not lines[row].strip()), None)
            end = blank + 1 if blank is not None else start + usual
        block = _lines_block(lines, start, end - 1, ())
        if block is not None:
            blocks.append(block)
        start = end
    return blocks


@cache
def _parser(language: str) -> Parser | None:
    """tree-sitter's parser for a language; None when the `code` extra is not installed."""
    try:
        from tree_sitter_language_pack import get_parser
    except ImportError:
        return None
    return get_parser(cast("SupportedLanguage", language))  # a name from _GRAMMARS, all of which the pack has


@dataclass
class _Unit:
    """Lines (0-based, inclusive) that go into one block, and their heading path."""

    first: int
    last: int
    path: tuple[str, ...]
    is_import: bool = False


@dataclass
class _Walk:
    """One file's walk: its syntax tree read into units, the units into blocks."""

    text: str
    parser: Parser
    grammar: _Grammar
    units: list[_Unit] = field(default_factory=list)
    source: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.source = self.text.encode("utf-8", errors="surrogatepass")

    def blocks(self) -> list[Block]:
        self.members(self.parser.parse(self.source).root_node, set(), (), 0)
        if not self.units:
            return line_windows(self.text)
        self.name_the_head()
        return self.joined(self.text.split("\n"))

    def members(self, node: Node, expand: set[int], path: tuple[str, ...], depth: int) -> None:
        """The units of a file, a class or a namespace: its definitions as symbols, the rest under `path`."""
        waiting: list[Node] = []  # comments and attributes, until it is known whether a definition follows
        for child in _flat(node, expand):
            check_time()
            if child.type in _ATTACHED or (
                waiting
                and not child.is_named  # the `:` of C++'s `private:`
                and child.start_point.row == _last_row(waiting[-1])
            ):
                waiting.append(child)
                continue
            symbol = self.symbol(child) if depth < _MAX_NESTING else None
            attached = _attached(waiting, child) if symbol else []
            for loose in waiting[: len(waiting) - len(attached)]:
                self.add(loose, path)
            waiting = []
            if symbol is None:
                self.add(child, path, is_import=path == () and self.is_import(child))
                continue
            inner, name, body = symbol
            own = path + name
            for comment in attached:
                self.add(comment, own)
            chain = _chain(child, body)
            if inner.type in self.grammar.containers:
                self.members(child, chain, own, depth + 1)
            elif body is None:
                self.add(child, own)
            else:
                for part in _flat(child, chain):
                    self.add(part, own)
        for loose in waiting:
            self.add(loose, path)

    def symbol(self, node: Node) -> tuple[Node, tuple[str, ...], Node | None] | None:
        """(definition, qualified name, body) when `node` defines a function, class or the like worth a
        section; a one-line declaration without a body (an interface's method, `type ID int`) is not."""
        inner, named = _definition(node, self.grammar)
        if inner is None:
            return None
        body = inner.child_by_field_name("body")
        if body is None and node.start_point.row == _last_row(node):
            return None
        name = self.name(named or inner)
        if not name:
            if inner.type in self.grammar.containers and body is not None:
                return inner, (), body  # an anonymous namespace or class: its members are still symbols
            return None
        return inner, name, body

    def name(self, node: Node) -> tuple[str, ...]:
        """A definition's name, split at `::` (C++ `User::save`, Ruby `App::User`); a Go method's is
        prefixed with its receiver's type."""
        for name_field in self.grammar.name_fields:
            named = node.child_by_field_name(name_field)
            for _ in range(_MAX_DECLARATORS):
                inner = named.child_by_field_name("declarator") if named is not None else None
                if inner is None:
                    break
                named = inner
            if named is not None:
                return self.receiver(node) + self.parts(named)
        for child in node.named_children:  # Go's type_spec, JavaScript's variable_declarator
            named = child.child_by_field_name("name")
            if named is not None:
                return self.parts(named)
        return ()

    def receiver(self, node: Node) -> tuple[str, ...]:
        receiver = node.child_by_field_name("receiver")
        if receiver is None:
            return ()
        found = _first_of_type(receiver, "type_identifier")
        return self.parts(found) if found is not None else ()

    def parts(self, node: Node) -> tuple[str, ...]:
        return tuple(part.strip() for part in self.name_text(node).split("::") if part.strip())

    def name_text(self, node: Node) -> str:
        raw = self.source[node.start_byte : min(node.end_byte, node.start_byte + 4 * _NAME_CHARS)]
        return " ".join(raw.decode("utf-8", errors="replace").split())[:_NAME_CHARS]

    def is_import(self, node: Node) -> bool:
        imports = self.grammar.imports
        method = node.child_by_field_name("method") if node.type == "call" else None
        if method is not None:
            return self.name_text(method) in _REQUIRES
        first = node.named_children[0] if node.named_child_count else None  # PHP's `require_once 'x';`
        return node.type in imports or (first is not None and first.type in imports)

    def add(self, node: Node, path: tuple[str, ...], is_import: bool = False) -> None:
        self.units.append(_Unit(node.start_point.row, _last_row(node), path, is_import))

    def name_the_head(self) -> None:
        """The file's head, through its last import before the first symbol, has the path ("imports",)."""
        first_symbol = next((index for index, unit in enumerate(self.units) if unit.path), len(self.units))
        last_import = max((index for index in range(first_symbol) if self.units[index].is_import), default=-1)
        for unit in self.units[: last_import + 1]:
            unit.path = ("imports",)

    def joined(self, lines: list[str]) -> list[Block]:
        """Blocks from the units: units sharing a line are one, a closing brace joins the block before it,
        and no line of text is left out (whatever the tree missed joins the block before it)."""
        merged: list[_Unit] = []
        for unit in self.units:
            check_time()
            if merged and (unit.first <= merged[-1].last or _closes(lines, unit)):
                merged[-1].last = max(merged[-1].last, unit.last)
                continue
            if merged and any(line.strip() for line in lines[merged[-1].last + 1 : unit.first]):
                merged[-1].last = unit.first - 1
            merged.append(_Unit(unit.first, unit.last, unit.path))
        if merged:
            merged[0].first = 0
            merged[-1].last = len(lines) - 1
        blocks = (_lines_block(lines, unit.first, unit.last, unit.path) for unit in merged)
        return [block for block in blocks if block is not None]


def _definition(node: Node, grammar: _Grammar) -> tuple[Node | None, Node | None]:
    """The definition `node` is or wraps (decorators, `export`), and the node holding its name when that is
    not the definition itself (`const f = () => ...`)."""
    for _ in range(4):  # `export default` around `template <...>` around the class at most
        if node.type in grammar.functions or node.type in grammar.containers:
            return node, None
        if node.type in _DECLARATIONS:
            declarators = [child for child in node.named_children if child.type == "variable_declarator"]
            value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
            if value is not None and value.type in _FUNCTION_VALUES:
                return value, declarators[0]
            return None, None
        if node.type not in _WRAPPERS:
            return None, None
        wrapped = next(
            (
                child
                for child in node.named_children
                if child.type in grammar.functions or child.type in grammar.containers or child.type in _DECLARATIONS
            ),
            None,
        )
        if wrapped is None:
            return None, None
        node = wrapped
    return None, None


def _flat(node: Node, expand: set[int]) -> Iterator[Node]:
    """`node`'s children in order, those in `expand` (by id) or transparent replaced by their own children;
    iterative, so however deep the nesting no stack overflows."""
    stack = [iter(node.children)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.id in expand or child.type in _TRANSPARENT:
            stack.append(iter(child.children))
        else:
            yield child


def _chain(outer: Node, body: Node | None) -> set[int]:
    """The ids of the nodes from a definition (or its wrapper) down to its body: read through to its
    statements."""
    chain = {outer.id}
    node = body
    while node is not None and node.id != outer.id and len(chain) < 16:
        chain.add(node.id)
        node = node.parent
    return chain


def _attached(waiting: list[Node], definition: Node) -> list[Node]:
    """The comments (and attributes) right above a definition, with no blank line between."""
    attached: list[Node] = []
    next_row = definition.start_point.row
    for node in reversed(waiting):
        if _last_row(node) + 1 < next_row:
            break
        attached.insert(0, node)
        next_row = node.start_point.row
    return attached


def _first_of_type(node: Node, kind: str) -> Node | None:
    """The first node of a type under `node`, looked for among a bounded number of descendants."""
    queue = [node]
    for _ in range(64):
        if not queue:
            break
        current = queue.pop(0)
        if current.type == kind:
            return current
        queue.extend(current.named_children)
    return None


def _closes(lines: list[str], unit: _Unit) -> bool:
    text = lines[unit.first] if unit.first == unit.last else ""
    return len(text) <= _CLOSER_CHARS and bool(_CLOSER.fullmatch(text))


def _last_row(node: Node) -> int:
    """The last line a node has text on: one that ends with its line break ends at column 0 of the next."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _lines_block(lines: list[str], first: int, last: int, path: tuple[str, ...]) -> Block | None:
    """A block of lines `first` to `last` (0-based), blank lines at either end left out; None when all are blank."""
    while first <= last and not lines[first].strip():
        first += 1
    while last >= first and not lines[last].strip():
        last -= 1
    if first > last:
        return None
    return Block("\n".join(lines[first : last + 1]), heading_path=path, line_start=first + 1, line_end=last + 1)
