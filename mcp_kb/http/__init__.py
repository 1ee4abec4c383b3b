"""The HTTP edge of the server, shared by `/mcp` and the admin page: where it listens and whom it
answers (network.py), who a request comes from and how a refusal reads (edge.py), and the limits on
connections that keep a flood from locking valid callers out (limits.py)."""
