"""The MCP server (the SDK's low-level Server): tools and `shipment://` resources, each answered by the API."""
import re

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mcp_server.calls import RESOURCE_NOT_FOUND, TOOL_ERRORS, caller
from mcp_server.summaries import shipment_line, summarize
from mcp_server.tools import tool_specs

NAME = "shiptrack"
INSTRUCTIONS = ("Read-only tools over one organization's shipments (the organization of the API token): search "
                "shipments, then follow ids (shp_, doc_, ...) into timelines, free-time clocks, documents, packing "
                "lists, alerts and checks. Answers are summary lines; pass full=true for the API's JSON.")
SHIPMENT_URI = re.compile(r"shipment://(?P<id>[^/?#]+)")
RESOURCE_PAGE = 100


async def list_tools(_ctx, _params):
    """Every tool, described from its view's documentation."""
    return types.ListToolsResult(tools=[spec.tool for spec in tool_specs(caller().app).values()],
                                 cache_scope="public")


async def call_tool(_ctx, params):
    """One GET of the API; 400 and 404 come back as tool errors, other refusals as MCP errors."""
    spec = tool_specs(caller().app).get(params.name)
    if spec is None:
        return _tool_error(f"Unknown tool {params.name!r}.")
    arguments = dict(params.arguments or {})
    try:
        path, query = spec.request(arguments)
    except ValueError as error:
        return _tool_error(str(error))
    answer = caller().get(path, query)
    if answer.status in TOOL_ERRORS:
        error = answer.error()
        return _tool_error(f"{error.get('code')}: {error.get('message')}", answer.body)
    if answer.status != 200:
        raise answer.refusal()
    text = answer.text.rstrip("\n") if arguments.get("full") else summarize(answer.body, spec.name)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=False)


def _tool_error(message, body=None):
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True,
                                structured_content=body or None)


async def list_resources(_ctx, params):
    """Active shipments as `shipment://shp_<n>`, newest first, 100 a page (the cursor is the last id)."""
    cursor = params.cursor if params is not None else None
    answer = caller().get("/shipments", {"limit": RESOURCE_PAGE, "starting_after": cursor})
    if answer.status != 200:
        raise answer.refusal()
    items = answer.body["data"]
    resources = [types.Resource(uri=f"shipment://{item['id']}", name=item["reference"], title=item["reference"],
                                description=shipment_line(item), mime_type="application/json") for item in items]
    return types.ListResourcesResult(resources=resources, cache_scope="private",
                                     next_cursor=items[-1]["id"] if answer.body["has_more"] else None)


async def list_resource_templates(_ctx, _params):
    """`shipment://{shipment_id}`: any shipment by id, archived ones included."""
    return types.ListResourceTemplatesResult(cache_scope="public", resource_templates=[types.ResourceTemplate(
        name="shipment", title="Shipment", uri_template="shipment://{shipment_id}", mime_type="application/json",
        description="A shipment as GET /shipments/{shipment_id} returns it (JSON).")])


async def read_resource(_ctx, params):
    """A shipment's JSON, as GET /shipments/{shipment_id} answers it."""
    uri = str(params.uri)
    match = SHIPMENT_URI.fullmatch(uri)
    if match is None:
        raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource {uri!r}: resources are shipment://shp_<n>.")
    answer = caller().get(f"/shipments/{re.sub(r'[^A-Za-z0-9_]', '-', match['id'])}")
    if answer.status != 200:
        raise answer.refusal(RESOURCE_NOT_FOUND) if answer.status == 404 else answer.refusal()
    return types.ReadResourceResult(cache_scope="private", contents=[
        types.TextResourceContents(uri=uri, mime_type="application/json", text=answer.text.rstrip("\n"))])


def build_server():
    """A new low-level Server with the tools and resources; the API client is read from calls.CALLER."""
    return Server(NAME, version="1", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_resource_templates, on_read_resource=read_resource)
