"""`flask mcp`: the MCP server over stdio for a local agent, with the API token from $SHIPTRACK_TOKEN."""
import os

import anyio
import click
from flask import current_app

TOKEN_VARIABLE = "SHIPTRACK_TOKEN"


@click.command("mcp")
@click.option("--service-version", default=None, metavar="YYYY-MM-DD",
              help="Service-Version for every request (default: the organization's pin).")
def mcp_command(service_version):
    """Serve the MCP tools over standard input and output, as the token in $SHIPTRACK_TOKEN.

    Every tool call is one request of the API through its own request handling: authenticated,
    counted against the token's rate limits, answered in the API's words (docs/agents.md).
    """
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise click.UsageError(f"Set {TOKEN_VARIABLE} to an API token (flask --app app tokens create ...).")
    # The SDK takes seconds to import: only this command and /mcp load it.
    from mcp.server.stdio import stdio_server

    from mcp_server.calls import CALLER, ApiCaller
    from mcp_server.server import build_server

    headers = {"Authorization": f"Bearer {token}"}
    if service_version:
        headers["Service-Version"] = service_version
    CALLER.set(ApiCaller(current_app._get_current_object(), headers))
    server = build_server()

    async def serve():
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
