"""The README is a front door a newcomer reads in minutes, and what it shows works: its links reach pages and
headings that exist, its test command is the one CI runs, and its client snippets start a server a client can
list the tools of (the quick start's first command: tests/test_cli.py::test_quick_start_on_the_bundled_examples)."""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, write
from mcp import Client, StdioServerParameters

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return re.sub(r"\s+", "-", text.strip())


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= 200


def test_every_link_of_the_readme_reaches_a_file_and_heading_that_exist() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", README)
    assert links
    for target, anchor in links:
        if target.startswith("http"):
            continue
        path = ROOT / target
        assert path.is_file(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
            assert anchor in {_slug(heading) for heading in headings}, f"{target}#{anchor}"


# Every place a user reads a pointer to the docs: what the code prints (help, errors, warnings), the starter file
# `init` writes, the example config, the README and the docs themselves.
_POINTING = [
    ROOT / "README.md",
    ROOT / "kb.toml.example",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(path for path in (ROOT / "mcp_kb").rglob("*") if path.suffix in (".py", ".toml", ".html", ".js")),
]
_EXAMPLE_PATHS = {"docs/guide.md", "docs/leave.md"}  # a user's own files in examples (`mcp-kb chunks docs/guide.md`)


def test_every_docs_page_the_code_the_starter_and_the_docs_point_to_exists_with_its_heading() -> None:
    """A pointer to a page or section that is gone sends a user nowhere (the starter pointed at a README section
    removed when the README was shortened): each `docs/PAGE.md#anchor` must exist, and nothing points into the
    README's sections, which are few and move."""
    seen = 0
    for path in _POINTING:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"README(?:'s|:) *\"?[A-Z]", text), f"{path.name} points to a README section"
        for page, anchor in re.findall(r"(?<![\w./-])(docs/[\w-]+\.md)(?:#([\w-]+))?", text):
            if page in _EXAMPLE_PATHS:
                continue
            seen += 1
            assert (ROOT / page).is_file(), f"{path.relative_to(ROOT)} points to {page}, which does not exist"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(encoding="utf-8"), re.MULTILINE)
                assert anchor in {_slug(heading) for heading in headings}, f"{path.relative_to(ROOT)}: {page}#{anchor}"
    assert seen >= 10


def test_ci_runs_the_readmes_two_commands_as_written() -> None:
    """CI reads the quick start's commands from the README and runs each as it stands, so neither can drift: the
    first runs a job, the second installs the test extra only and runs the suite."""
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    first, tests = module.quick_start(README)
    assert f"```sh\n{first}\n```" in README and f"```sh\n{tests}\n```" in README
    assert "mcp-kb sync -c kb.toml.example" in first
    assert tests.endswith("pip install -e '.[test]' && .venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_commands=$(python3 .ci/readme_commands.py)" in ci
    assert 'bash -c "$first_command"' in ci and 'pytest_ran bash -c "$test_command"' in ci


def _snippets() -> list[dict[str, Any]]:
    """Every client configuration the README shows, as a client reads it."""
    blocks = re.findall(r"```json\n(.*?)```", README, re.DOTALL)
    servers: list[dict[str, Any]] = []
    for block in blocks:
        config = json.loads(block)
        servers += list((config.get("mcpServers") or config.get("servers")).values())
    return servers


@pytest.mark.parametrize("snippet", range(2), ids=["claude-desktop", "cursor-vs-code"])
def test_a_client_snippet_starts_a_server_a_client_can_use(snippet: int, tmp_path: Path) -> None:
    server = _snippets()[snippet]
    write(tmp_path / "docs" / "leave.md", "# Leave\n\nAnnual leave is 25 days a year.\n")
    (tmp_path / "kb.toml").write_text(
        '[[kb]]\nname = "handbook"\ndescription = "Handbook"\npaths = ["docs"]\n', encoding="utf-8"
    )
    assert server["command"].endswith("/.venv/bin/mcp-kb") and server["args"][:2] == ["serve", "-c"]
    env = {**os.environ, **server.get("env", {}), "MCP_KB_STORAGE": str(tmp_path / "index")}
    for model_variable in ("MCP_KB_EMBEDDING_MODEL", "MCP_KB_EMBEDDING_MODEL_PATH"):  # this machine's model
        if model_variable in os.environ:
            env[model_variable] = os.environ[model_variable]
    # the snippet's command as this checkout installs it, and its config where this test wrote one
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", *server["args"][:2], str(tmp_path / "kb.toml")], env=env
    )

    async def tools() -> list[str]:
        async with Client(parameters) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert anyio.run(tools) == ["search_handbook", "read_document", "list_documents", "sync_knowledge_base"]


def test_the_worked_example_names_every_tool_the_server_lists_for_it(tmp_path: Path) -> None:
    """docs/clients.md said "the model gets two tools" of a server that lists three search tools: the worked
    example's paragraph names exactly the tools a client lists for kb.toml.example."""
    page = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    paragraph = page.split("### A worked example with two knowledge bases")[1].split("\n\n")[1]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"product_docs", "policy_docs", "year", "tags"}
    env = {**os.environ, "MCP_KB_STORAGE": str(tmp_path / "index")}
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_kb", "serve", "-c", str(ROOT / "kb.toml.example")], env=env
    )

    async def tools() -> set[str]:
        async with Client(parameters) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert anyio.run(tools) == named


def test_every_kb_toml_example_of_the_docs_is_a_valid_configuration(tmp_path: Path) -> None:
    """Each ```toml block of the README and the docs pages loads as kb.toml does (a block listing alternatives,
    each after a blank line and a comment, is each of them)."""
    import tomllib

    from mcp_kb.settings import build_config

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [
        block
        for page in pages
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    ]
    examples = [part for block in blocks for part in re.split(r"\n\n(?=# )", block)]
    assert len(examples) >= 8
    for example in examples:
        build_config(tomllib.loads(example), base_dir=tmp_path, source=None)
