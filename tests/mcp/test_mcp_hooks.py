"""POST /mcp runs the API's request hooks and error contract, those registered on the API after mounting too."""
from flask import g, request

from tests.support.factories import auth, make_org, make_token

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def test_hooks_registered_on_the_api_after_mounting_run_for_mcp(app, client, conn):
    token = make_token(conn, make_org(conn, "acme"))
    seen = []

    @app.before_request
    def note_before():
        seen.append(("before", request.path, g.principal["organization_id"]))

    @app.after_request
    def mark(response):
        response.headers["X-Hook"] = "after"
        return response

    @app.teardown_request
    def note_teardown(_error=None):
        seen.append(("teardown", request.path))

    response = client.post("/mcp", json=LIST_TOOLS, headers=auth(token, **MCP_HEADERS))
    assert response.status_code == 200
    assert response.headers["X-Hook"] == "after"
    assert response.headers["RateLimit-Policy"] == '"per_token";q=600;w=300'
    assert seen == [("before", "/mcp", 1), ("teardown", "/mcp")]


def test_a_refusal_on_mcp_is_the_apis_error_in_json_rpc(app, client):
    @app.after_request
    def mark(response):
        response.headers["X-Hook"] = "after"
        return response

    response = client.post("/mcp", json=LIST_TOOLS, headers=MCP_HEADERS)
    assert (response.status_code, response.headers["X-Hook"]) == (401, "after")
    assert response.json["error"]["data"]["status"] == 401
    assert client.get("/mcp").status_code == 405
