"""The MCP face: the server (tools, resources, prompt), its tool schemas and HTTP protection."""
