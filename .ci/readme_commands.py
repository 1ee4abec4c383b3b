"""Print the README's two quick-start commands exactly as written (the first two `sh` blocks of its "Quick start",
each a fresh venv's install and a job), one per line, for CI to run: what a new user copies is what CI runs, so the
two cannot drift apart."""

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quick_start(readme: str) -> list[str]:
    """The two commands on a fresh machine: the first two `sh` blocks of the README's "Quick start" section."""
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.MULTILINE | re.DOTALL)
    if section is None:
        sys.exit("README.md has no '## Quick start' section")
    blocks = re.findall(r"^```sh\n(.*?)^```", section.group(1), re.MULTILINE | re.DOTALL)
    commands = [block.strip() for block in blocks[:2]]
    if len(commands) != 2 or not all(
        command.startswith("python3 -m venv ") and "\n" not in command for command in commands
    ):
        sys.exit("README.md's quick start must open with two one-line commands, each making a fresh venv")
    return commands


if __name__ == "__main__":
    print("\n".join(quick_start(README.read_text(encoding="utf-8"))))
