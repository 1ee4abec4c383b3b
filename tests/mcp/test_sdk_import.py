"""A stdio server imports the MCP SDK without its HTTP stack (mcp/sdk_import.py), and still answers as the SDK does;
what it imports before its first answer leaves out the model runtime, Arrow and LanceDB (they load after).

The server runs in a fresh interpreter (the test process has imported the whole SDK already) through
`mcp-kb serve`, as a client launches it; what it imported is read when it exits.
"""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from helpers import MakeApp, text_of

SHIM = "mcp_kb/mcp/sdk_import.py"
HTTP_STACK = ("starlette", "sse_starlette", "uvicorn", "h11", "httpx2")  # httpx2: the SDK's HTTP client
SDK_HTTP_PARTS = (
    "mcp.server.auth.",
    "mcp.server.sse",
    "mcp.server.streamable_http",
    "mcp.server.transport_security",
    "mcp.client",
)
SDK_AUTH_SETTINGS = "mcp.server.auth.settings"  # a plain pydantic model typing a field of MCPServer's settings

_SERVE_AND_REPORT = textwrap.dedent("""
    import atexit, json, runpy, sys

    report_path, config = sys.argv[1:]

    def report():
        loaded = sorted(sys.modules)  # before the call below, which imports nothing once run_server called it
        from mcp_kb.mcp.sdk_import import import_sdk_for_stdio
        with open(report_path, "w", encoding="utf-8") as out:
            json.dump({"loaded": loaded, "stepped_aside": import_sdk_for_stdio()}, out)

    atexit.register(report)
    sys.argv = ["mcp-kb", "serve", "-c", config]
    runpy.run_module("mcp_kb", run_name="__main__")
""")


def _http_parts(loaded: list[str]) -> list[str]:
    return [
        name
        for name in loaded
        if name != SDK_AUTH_SETTINGS and (name.partition(".")[0] in HTTP_STACK or name.startswith(SDK_HTTP_PARTS))
    ]


def test_the_rule_names_the_http_parts() -> None:
    assert _http_parts(
        [
            "starlette.routing",
            "mcp.server.auth.provider",
            "mcp.server.streamable_http_manager",
            "mcp.client.stdio",
            "httpx2",
            SDK_AUTH_SETTINGS,
            "mcp.server.auth",
            "mcp.server.stdio",
            "mcp.server.lowlevel.server",
            "httpx",
        ]
    ) == [
        "starlette.routing",
        "mcp.server.auth.provider",
        "mcp.server.streamable_http_manager",
        "mcp.client.stdio",
        "httpx2",
    ]


@pytest.fixture
def served_config(make_app: MakeApp, tmp_path: Path) -> Path:
    """A synced KB and the kb.toml that serves it (the server's start-up sync has nothing to do)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("# Leave\n\nAnnual leave is fifteen days a year.\n", encoding="utf-8")
    app = make_app({"name": "docs", "description": "Policies", "paths": [str(tmp_path / "docs")]})
    app.sync()
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{app.config.storage.uri}"\n[[kb]]\nname = "docs"\ndescription = "Policies"\n'
        f'paths = ["{tmp_path / "docs"}"]\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.anyio
async def test_a_stdio_session_answers_from_the_sdk_without_importing_the_http_stack(
    served_config: Path, tmp_path: Path
) -> None:
    report = tmp_path / "imported.json"
    params = StdioServerParameters(
        command=sys.executable, args=["-c", _SERVE_AND_REPORT, str(report), str(served_config)], env=os.environ.copy()
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        found = await client.call_tool("search_docs", {"query": "annual leave"})
    assert "search_docs" in names
    assert not found.is_error, text_of(found.content[0])
    imported = json.loads(report.read_text(encoding="utf-8"))
    assert imported["stepped_aside"] is None, f"{SHIM}: the SDK was imported whole: {imported['stepped_aside']}"
    assert _http_parts(imported["loaded"]) == [], f"{SHIM}: a stdio server imported the HTTP stack"


_ANSWER_AND_REPORT = textwrap.dedent("""
    import json, sys
    from mcp_kb.mcp.sdk_import import import_sdk_for_stdio
    import_sdk_for_stdio()
    import anyio, mcp_kb.cli, mcp_kb.serve
    from mcp import Client
    from mcp_kb.api import App
    from mcp_kb.mcp import server
    from mcp_kb.settings import load_config

    server._warm_up = lambda app: None  # what it loads is the point: the answers must not need it

    async def answer():
        async with Client(server.build_server(App(load_config(sys.argv[1]), serving=True), handshake_wait=600),
                          mode="legacy") as client:
            await client.list_tools()

    anyio.run(answer)
    print(json.dumps(sorted(sys.modules)))
""")
LOADED_AFTER_THE_HANDSHAKE = ("numpy", "pyarrow", "lancedb", "onnxruntime", "tokenizers", "fastembed")


def test_a_server_answers_its_handshake_and_tools_list_without_a_model_runtime_arrow_or_lancedb(
    served_config: Path,
) -> None:
    """Each costs a tenth of a second or more on a client's way to tools/list; the warm-up loads them once that
    is answered (here it loads nothing)."""
    import subprocess

    answered = subprocess.run(
        [sys.executable, "-c", _ANSWER_AND_REPORT, str(served_config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert answered.returncode == 0, answered.stderr
    loaded = json.loads(answered.stdout.strip().splitlines()[-1])
    assert [name for name in LOADED_AFTER_THE_HANDSHAKE if name in loaded] == []
