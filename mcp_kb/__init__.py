"""mcp-kb: folders of documents as knowledge bases for any MCP client."""

__version__ = "0.1.0"
