"""`python -m mcp_kb`: the command line."""

from .cli import main

main()
