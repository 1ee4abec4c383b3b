"""The loop an LLM runs, over a real stdio session: search, cite, read exactly what was cited. A hit is cited by the
section or symbol its evidence is in, reading that section (or those lines) returns that evidence and no other
section's, a code file reads back as the file, and an answer never holds more tokens than asked for."""

import os
import sys
from pathlib import Path

from typing import Any

import pytest
from helpers import write, text_of
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult
from mcp_kb.models.fastembed_tokenizer import ModelTokenizer

pytestmark = pytest.mark.anyio

# Pages opening with a one-line intro, then sections too short to be chunks of their own: the chunker merges them.
LEAVE = """# Leave policy

This page covers leave.

## Annual leave

Every employee gets 25 days of paid annual leave per calendar year.

## How to apply

Submit a request in the HR portal at least two weeks before the first day off; your manager approves it.

## Carrying over days

Up to five unused days carry over into the next year and expire on March 31.

## Parental leave

Birth parents get 16 weeks of paid parental leave; partners get 6 weeks.

## Sick leave

Report sickness to your manager before 10:00; from the fourth day a doctor's note is needed.
"""
TRAVEL = """# Travel policy

This page covers business travel.

## Flights

Book economy class for flights under six hours through the travel desk.

## Hotels

Hotel rooms are reimbursed up to 180 euros a night in capital cities.

## Expenses

Claim meals and taxis within 30 days with receipts attached in the expense tool.
"""
# question, document, heading path cited, words of its answer
QUESTIONS = [
    ("how do I apply for time off", "leave.md", "Leave policy › How to apply", "HR portal"),
    ("can unused days carry over into next year", "leave.md", "Leave policy › Carrying over days", "March 31"),
    ("how many weeks of parental leave do partners get", "leave.md", "Leave policy › Parental leave", "16 weeks"),
    ("when is a doctor's note needed for sickness", "leave.md", "Leave policy › Sick leave", "fourth day"),
    ("which class to book for flights", "travel.md", "Travel policy › Flights", "economy class"),
    ("hotel room limit per night", "travel.md", "Travel policy › Hotels", "180 euros"),
    ("claim meals and taxis expenses receipts", "travel.md", "Travel policy › Expenses", "30 days"),
]
ANSWERS = [answer for *_, answer in QUESTIONS] + ["25 days"]

USERS = '''"""Users of the shop."""
import dataclasses


@dataclasses.dataclass
class User:
    name: str
    active: bool = True


class UserStore:
    """Keeps users by name."""

    def __init__(self):
        self.users = {}

    def rename(self, old, new):
        """Give a user a new name."""
        self.users[new] = self.users.pop(old)

    def deactivate(self, name):
        """Turn a user's account off."""
        self.users[name].active = False
'''
ORDERS = '''"""Orders: invoices and carts."""
from decimal import Decimal

TAX_RATE = Decimal("0.2")


class Invoice:
    def __init__(self, lines):
        self.lines = lines

    def total(self):
        return sum(line.price for line in self.lines)

    def tax(self):
        """The tax due on an invoice."""
        return self.total() * TAX_RATE


class Cart:
    def __init__(self):
        self.items = []

    def add_item(self, item):
        """Put an item into the shopping cart."""
        self.items.append(item)

    def total(self):
        return sum(item.price for item in self.items)
'''
# A file read in parts (a read's smallest budget is 200 tokens), with blank lines at its end.
LONG = (
    "".join(
        f'def step_{n}(state):\n    """Step {n} of the pipeline."""\n    return state + {n}\n\n\n' for n in range(40)
    )
    + "\n\n"
)
# question, file, symbol cited, the line its definition starts with
CODE_QUESTIONS = [
    ("rename a user", "users.py", "UserStore › rename", "    def rename(self, old, new):"),
    ("deactivate a user account", "users.py", "UserStore › deactivate", "    def deactivate(self, name):"),
    ("tax of an invoice", "orders.py", "Invoice › tax", "    def tax(self):"),
    ("add an item to the shopping cart", "orders.py", "Cart › add_item", "    def add_item(self, item):"),
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    write(tmp_path / "handbook" / "leave.md", LEAVE)
    write(tmp_path / "handbook" / "travel.md", TRAVEL)
    write(tmp_path / "code" / "users.py", USERS)
    write(tmp_path / "code" / "orders.py", ORDERS)
    write(tmp_path / "code" / "long.py", LONG)
    path = tmp_path / "kb.toml"
    path.write_text(
        f'storage = "{tmp_path / "index"}"\n'
        f'[[kb]]\nname = "handbook"\ndescription = "Company rules"\npaths = ["{tmp_path / "handbook"}"]\n'
        f'[[kb]]\nname = "code"\ndescription = "The shop\'s code"\npaths = ["{tmp_path / "code"}"]\n',
        encoding="utf-8",
    )
    return path


def _stdio(config: Path) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(config)], env=os.environ.copy()
        )
    )


async def _sync(client: Client) -> None:
    result = await client.call_tool("sync_knowledge_base", {})
    assert not result.is_error, text_of(result.content[0])


async def _read(client: Client, **arguments: object) -> dict[str, Any]:
    result = await client.call_tool("read_document", arguments)
    assert not result.is_error, text_of(result.content[0])
    read: dict[str, Any] = result.structured_content
    return read


async def _top_hit(client: Client, tool: str, question: str) -> tuple[CallToolResult, dict[str, Any]]:
    """The search tool's answer to a question (top 3), and its first hit."""
    result = await client.call_tool(tool, {"query": question, "top_k": 3})
    return result, result.structured_content["results"][0]


async def _read_whole(client: Client, kb: str, path: str) -> tuple[str, int]:
    """A document read through its cursors, its parts put end to end."""
    parts = [await _read(client, kb=kb, path=path, max_tokens=200)]
    while parts[-1]["cursor"]:
        parts.append(await _read(client, kb=kb, cursor=parts[-1]["cursor"], max_tokens=200))
    return "".join(part["text"] for part in parts), len(parts)


async def test_a_question_aimed_at_one_section_is_cited_by_it_and_reading_it_returns_its_answer_alone(
    config: Path,
) -> None:
    async with _stdio(config) as client:
        await _sync(client)
        for question, document, heading, answer in QUESTIONS:
            result, top = await _top_hit(client, "search_handbook", question)
            assert (top["source"], top["heading"]) == (document, heading), question
            assert f"{document} › {heading}" in text_of(result.content[0])  # the text cites the same place
            assert heading in [part["heading"] for part in top["parts"]]
            read = await _read(client, kb="handbook", path=document, section=heading)
            assert answer in read["text"], question
            assert [other for other in ANSWERS if other != answer and other in read["text"]] == [], question


async def test_a_method_is_cited_by_its_class_with_the_files_own_lines_and_a_code_file_reads_as_itself(
    config: Path,
) -> None:
    sources = {"users.py": USERS, "orders.py": ORDERS, "long.py": LONG}
    async with _stdio(config) as client:
        await _sync(client)
        for question, document, symbol, definition in CODE_QUESTIONS:
            _, top = await _top_hit(client, "search_code", question)
            assert (top["source"], top["heading"]) == (document, symbol), question
            lines = sources[document].split("\n")
            first, last = top["line_start"], top["line_end"]
            assert lines[first - 1] == definition, question  # the hit's lines are the file's
            read = await _read(client, kb="code", path=document, lines=f"{first}-{last}")
            assert read["text"] == "\n".join(lines[first - 1 : last]) and (read["line_start"], read["line_end"]) == (
                first,
                last,
            )
            assert read["note"] == ""  # nothing to say: these are the file's own lines
            assert top["text"] in sources[document]  # the file's own lines, adjacent symbols as they stand
        for document, source in sources.items():
            whole = await _read(client, kb="code", path=document, max_tokens=20_000)
            assert whole["text"] == source and whole["lines"] == len(source.splitlines())  # byte for byte
            in_parts, count = await _read_whole(client, "code", document)
            assert in_parts == source and (count > 1 or document != "long.py")
        outline = await client.call_tool("list_documents", {"kb": "code", "path": "orders.py", "outline": True})
        entries = {
            entry["heading"]: (entry["line_start"], entry["line_end"])
            for entry in outline.structured_content["outline"]
        }
        assert entries["Invoice › tax"] == (14, 16) and entries["Cart"] == (19, 28)


async def test_a_search_answer_holds_at_most_max_tokens_of_text_citations_included(
    config: Path, tmp_path: Path, tokenizer: ModelTokenizer
) -> None:
    deep = tmp_path / "handbook" / "/".join(f"department-of-{n}-affairs" for n in range(12))
    write(
        deep / "rules.md",
        "# Rules\n\n"
        + "\n\n".join(
            f"### Rule {n} of the very long handbook section about leave\n\nLeave rule {n} says apply in the HR portal "
            f"two weeks ahead, and {n} more words on leave."
            for n in range(40)
        ),
    )
    async with _stdio(config) as client:
        await _sync(client)
        for budget in (100, 150, 300, 600):
            result = await client.call_tool(
                "search_handbook", {"query": "apply for leave", "top_k": 10, "max_tokens": budget}
            )
            [text] = [item.text for item in result.content if item.type == "text"]
            assert tokenizer.count([text])[0] <= budget, text
