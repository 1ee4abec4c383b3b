"""Build the MCP Bundle (`mcp-kb.mcpb`) that Claude Desktop installs, from this repository (stdlib only).

    python bundle/build.py                                # writes dist/mcp-kb.mcpb
    python bundle/build.py --out X.mcpb --folder STAGE    # and leaves the unpacked bundle in STAGE

The bundle is a zip: `manifest.json` (bundle/manifest.json with the version, licence and Python floor taken from
pyproject.toml), and the project as uv builds it: pyproject.toml, README.md (its `readme`) and the mcp_kb package.
`mcpb validate STAGE` and `mcpb pack STAGE` (the official CLI, .ci/mcpb) read the folder; .ci/ship runs both.

Why `server.type = "uv"` (manifest 0.4): the host installs the dependencies from pyproject.toml with uv, for the
user's own platform. A "python" bundle must carry its dependencies, and lancedb, pyarrow and onnxruntime are
compiled wheels of one platform each (hundreds of MB, and a bundle built on Linux fails on macOS); a "python"
bundle running `uvx` instead needs the user to have installed uv and a Python where the host finds them. Claude
Desktop installs uv bundles itself (it manages uv and Python for them); the mcpb CLI validates manifest 0.4. Hosts
that know only manifest 0.3 and older (Claude Code's plugin loader, older Claude Desktop releases) refuse "uv":
they get mcp-kb from PyPI or a clone instead (docs/install.md).

`mcp_config` is given although a uv bundle may leave it to the host: it carries the user's settings to the
server (`serve FOLDER`, and the model and index variables). The optional settings default to "" so a host
substitutes an empty value, which mcp-kb reads as unset, rather than leaving `${user_config.…}` in the variable.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PACKAGE = "mcp_kb"
_NOT_SHIPPED = shutil.ignore_patterns("__pycache__", "*.py[co]")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the same sources make the same bundle, byte for byte


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist" / "mcp-kb.mcpb", help="the bundle to write")
    parser.add_argument("--folder", type=Path, help="also leave the unpacked bundle here (emptied first)")
    arguments = parser.parse_args(argv)
    bundle = build(arguments.out, arguments.folder)
    print(f"bundle: {bundle}")
    return 0


def build(out: Path, folder: Path | None = None) -> Path:
    """Write the bundle to `out` (and leave its files in `folder`, when given); the bundle's path."""
    with tempfile.TemporaryDirectory() as scratch:
        stage = folder or Path(scratch) / "bundle"
        stage_bundle(stage)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_zip(stage, out)
    return out.resolve()


def stage_bundle(stage: Path) -> None:
    """The bundle's files, unpacked, in `stage`."""
    if stage.exists() and any(stage.iterdir()) and not (stage / "manifest.json").is_file():
        raise SystemExit(f"{stage}: not empty and not a bundle folder: name a new folder (it is emptied first)")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    project = _pyproject()
    shutil.copy2(REPO / "pyproject.toml", stage / "pyproject.toml")
    shutil.copy2(REPO / project["readme"], stage / project["readme"])
    shutil.copytree(REPO / PACKAGE, stage / PACKAGE, ignore=_NOT_SHIPPED)
    (stage / "manifest.json").write_text(json.dumps(manifest(), indent=2, ensure_ascii=False) + "\n",
                                         encoding="utf-8")


def manifest() -> dict[str, Any]:
    """bundle/manifest.json with what pyproject.toml decides: the version, the licence, the lowest Python."""
    template: dict[str, Any] = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
    project = _pyproject()
    template["version"] = project["version"]
    template["license"] = project["license"]
    template["compatibility"]["runtimes"]["python"] = project["requires-python"]
    return template


def write_zip(stage: Path, out: Path) -> None:
    """Zip `stage` into `out` as a client unpacks it: paths relative to the bundle's root, modes kept."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(stage.rglob("*")):
            if path.is_file():
                entry = zipfile.ZipInfo(path.relative_to(stage).as_posix(), date_time=_ZIP_TIME)
                entry.external_attr = (path.stat().st_mode & 0o777) << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, path.read_bytes())


def _pyproject() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project


if __name__ == "__main__":
    sys.exit(main())
