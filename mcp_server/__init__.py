"""MCP tools over the read API (docs/agents.md): streamable HTTP at /mcp and stdio (`flask --app app mcp`).

`calls.py` reaches the API, `tools.py` declares the tools from the views' documentation, `summaries.py`
writes the concise answers, `server.py` is the SDK's server, `http.py` serves it from the WSGI app.
"""
import logging

# The SDK logs every stateless exchange at INFO (manager started, session terminated, shut down): three
# lines per /mcp request in the service's log. Its warnings and errors still show.
logging.getLogger("mcp").setLevel(logging.WARNING)
