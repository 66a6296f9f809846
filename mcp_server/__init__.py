"""MCP tools over the read API (docs/agents.md): streamable HTTP at /mcp and stdio (`flask --app app mcp`).

`calls.py` reaches the API, `tools.py` declares the tools from the views' documentation, `summaries.py`
writes the concise answers, `server.py` is the SDK's server, `http.py` serves it from the WSGI app.
"""
