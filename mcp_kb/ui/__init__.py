"""The admin page: a person's view of the knowledge bases (status, live sync progress, failures, a search
playground, health charts), served over HTTP behind the same grants as the MCP endpoint."""
