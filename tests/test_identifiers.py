"""Keyword search over code identifiers: the spellings of one name find each other, the exact one first.

Real LanceDB and the real model, the search path the tools use (keywords.py analysis, then LanceDB's
lower-casing, stemming and stop words; "by" is one). Identifiers sit glued to punctuation as they do in code
(`api.getUserById(42);`).
"""

import pytest
from helpers import write

from mcp_kb.api import SearchRequest
from mcp_kb.app import App
from mcp_kb.models.fastembed import FastEmbedder

SPELLINGS = {
    "camel.md": "profile = api.getUserById(42); render(profile)\n",
    "snake.md": "profile = self.get_user_by_id(42) or render(profile)\n",
    "pascal.md": "profile = Api::GetUserByID(42); render(profile)\n",
    "prose.md": "To get the user by their id, ask the accounts service first.\n",
}
DISTRACTORS = {  # "get", "user" and "id" again, but not the name
    "name.md": "label = api.getUserName(42); render(label)\n",
    "delete.md": "api->deleteUserById(42); render(nothing)\n",
    "record.md": "Each user record stores an id and a display label.\n",
}
RELEVANT = set(SPELLINGS)
# LanceDB lower-cases terms, so getUserById and GetUserByID are one spelling to it.
CAMEL, SNAKE = {"camel.md", "pascal.md"}, {"snake.md"}
ORDER_BY_QUERY = {  # the exact spelling, then the other spellings of the name, then prose with its words
    "getUserById": [CAMEL, SNAKE, {"prose.md"}],
    "GetUserByID": [CAMEL, SNAKE, {"prose.md"}],
    "get_user_by_id": [SNAKE, CAMEL, {"prose.md"}],
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> App:
    from mcp_kb.settings import build_config

    root = tmp_path_factory.mktemp("identifiers")
    for name, text in {**SPELLINGS, **DISTRACTORS}.items():
        write(root / "docs" / name, text)
    config = build_config(
        {"storage": str(root / "index"), "kb": [{"name": "code", "description": "d", "paths": [str(root / "docs")]}]},
        root,
        None,
    )
    app = App(config, embedder=embedder)
    app.sync()
    return app


def _ranked(app: App, query: str, mode: str = "keyword") -> list[str]:
    hits = app.search("code", SearchRequest(query=query, mode=mode, top_k=10)).hits
    return [hit.source for hit in hits]


def _tiers(ranked: list[str], groups: list[set[str]]) -> list[set[str]]:
    """The ranked sources cut into consecutive sets the sizes of `groups`."""
    tiers: list[set[str]] = []
    start = 0
    for group in groups:
        tiers.append(set(ranked[start : start + len(group)]))
        start += len(group)
    return tiers


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query", list(ORDER_BY_QUERY))
def test_an_identifier_glued_to_punctuation_ranks_its_exact_spelling_first(app: App, query: str, mode: str) -> None:
    ranked = _ranked(app, query, mode)
    assert _tiers(ranked, ORDER_BY_QUERY[query])[0] == ORDER_BY_QUERY[query][0], ranked


@pytest.mark.parametrize("query", list(ORDER_BY_QUERY))
def test_other_spellings_of_the_identifier_rank_next_then_prose(app: App, query: str) -> None:
    """Another spelling shares the whole name (underscores dropped): above prose that only has its words."""
    ranked = _ranked(app, query)
    assert _tiers(ranked, ORDER_BY_QUERY[query]) == ORDER_BY_QUERY[query], ranked


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query", [*ORDER_BY_QUERY, "get user by id"])
def test_every_spelling_and_the_prose_rank_above_the_distractors(app: App, query: str, mode: str) -> None:
    ranked = _ranked(app, query, mode)
    assert set(ranked[: len(RELEVANT)]) == RELEVANT, ranked
