"""The MCP server through the SDK's own client, over streamable HTTP (gunicorn, /mcp) and stdio (`flask mcp`).

Every tool is called on the demo data and its full answer compared with the matching API request; wrong
tokens and exhausted limits are MCP errors in the API's words; other organizations' and hidden shipments
are never found. The SDK is imported inside the tests: it takes seconds, and every worker collects this module.
"""
import json
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psycopg2
import pytest
import requests

from models import db, organizations, tokens
from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS
from tests.support.counting import statement_counts
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.processes import gunicorn, wait_for
from tests.support.windows import within_one_window

TOOLS = {"search_shipments", "get_shipment", "get_shipment_timeline", "get_shipment_free_time",
         "list_free_time_at_risk", "list_shipment_documents", "get_document_data", "list_shipment_packing_lists",
         "list_alerts", "list_checks", "list_changes", "get_organization"}
INVALID_TOKEN = "The API token is invalid, expired or revoked, or its user left the organization."
LIMITED = {"window_seconds": 300, "per_token": 3, "per_ip": 100000, "anonymous_per_ip": 100000}
TRANSPORTS = ["http", "stdio"]


@pytest.fixture(scope="module")
def served(demo_database, tmp_path_factory):
    """gunicorn over the demo data without limits that matter; yields the base URL."""
    with gunicorn(demo_database.url, tmp_path_factory.mktemp("mcp"), RATE_LIMITS=NO_RATE_LIMITS) as base:
        yield base


@pytest.fixture(scope="module")
def demo(demo_database):
    """Ids of the demo data the tests follow: acme's, globex's and acme's hidden shipments."""
    conn = psycopg2.connect(demo_database.url)
    try:
        with conn.cursor() as cursor:
            def one(sql):
                cursor.execute(sql)
                return cursor.fetchone()[0]
            acme = "(SELECT id FROM organizations WHERE slug = 'acme')"
            found = {
                "shipment": "shp_" + str(one(f"SELECT s.id FROM shipments s WHERE s.organization_id = {acme} "
                                             "AND NOT s.awaiting_approval AND NOT s.owned_elsewhere AND NOT s.archived "
                                             "AND EXISTS (SELECT 1 FROM packing_lists p WHERE p.shipment_id = s.id) "
                                             "ORDER BY s.id DESC LIMIT 1")),
                "globex": "shp_" + str(one("SELECT min(id) FROM shipments WHERE organization_id = "
                                           "(SELECT id FROM organizations WHERE slug = 'globex')")),
                "hidden": [(f"shp_{number}", reference) for number, reference in _rows(
                    cursor, f"SELECT id, reference FROM shipments WHERE organization_id = {acme} "
                            "AND (awaiting_approval OR owned_elsewhere) ORDER BY id")],
            }
        conn.rollback()
    finally:
        conn.close()
    assert found["hidden"]
    return found


def _rows(cursor, sql):
    cursor.execute(sql)
    return cursor.fetchall()


def token_of(demo_database):
    return demo_database.headers["Authorization"].removeprefix("Bearer ")


@asynccontextmanager
async def connect(kind, base, token, mode="auto", **settings):
    """An SDK client session on `kind` ("http": base + /mcp; "stdio": `flask mcp` on the demo database)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if kind == "http":
        http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http_client, Client(streamable_http_client(f"{base}/mcp", http_client=http_client),
                                       mode=mode) as client:
            yield client
    else:
        # Limits that matter only to the test about them: the demo token serves other modules too.
        settings = {"RATE_LIMITS": NO_RATE_LIMITS, **settings}
        env = {"DATABASE_URL": base, "SHIPTRACK_TOKEN": token, "PATH": os.environ["PATH"],
               **{f"SHIPTRACK_{key}": json.dumps(value) for key, value in settings.items()}}
        parameters = StdioServerParameters(command=str(Path(sys.executable).parent / "flask"),
                                           args=["--app", "app", "mcp"], env=env, cwd=str(ROOT))
        async with Client(parameters, mode=mode) as client:
            yield client


def target(kind, served, demo_database):
    """What connect() needs for `kind`: the served base URL, or the database the stdio process opens."""
    return served if kind == "http" else demo_database.url


def run(work):
    return anyio.run(work)


def found_in(error, kind):
    """The exception of type `kind` in `error` or in the exception groups it nests."""
    if isinstance(error, kind):
        return error
    for inner in getattr(error, "exceptions", ()):
        if (found := found_in(inner, kind)) is not None:
            return found
    return None


def text(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_lists_the_tools_with_the_views_documentation(kind, served, demo_database):
    async def work():
        async with connect(kind, target(kind, served, demo_database), token_of(demo_database)) as client:
            return (await client.list_tools()).tools

    listed = {tool.name: tool for tool in run(work)}
    assert set(listed) == TOOLS
    document = requests.get(f"{served}/openapi.json", timeout=10).json()
    operation = document["paths"]["/shipments"]["get"]
    search = listed["search_shipments"]
    assert search.description.startswith(operation["summary"] + "\n\n" + operation["description"])
    assert search.annotations.read_only_hint is True
    properties = search.input_schema["properties"]
    assert set(properties) == {"q", "status", "labels", "archived", "created_after", "created_before",
                               "eta_after", "eta_before", "limit", "starting_after", "full"}
    assert properties["q"]["description"] == next(p for p in operation["parameters"] if p.get("name") == "q")["description"]
    assert listed["get_shipment"].input_schema["required"] == ["shipment_id"]


def api(served, demo_database, path, **params):
    """The API's own answer to the matching request (the exact text a tool's `full` answer gives)."""
    response = requests.get(f"{served}{path}", params=params, headers=demo_database.headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.text.rstrip("\n")


def calls(demo):
    """(tool, arguments, the matching API path and query, a line the summary must hold) for every tool."""
    shipment = demo["shipment"]
    return [
        ("search_shipments", {"limit": 3}, ("/shipments", {"limit": 3}), "More: call search_shipments again"),
        ("search_shipments", {"q": "avocado", "status": "in_transit,arrived", "archived": "any", "limit": 5},
         ("/shipments", {"q": "avocado", "status": "in_transit,arrived", "archived": "any", "limit": 5}), "shp_"),
        ("get_shipment", {"shipment_id": shipment}, (f"/shipments/{shipment}", {}), f"{shipment} · SHIP-"),
        ("get_shipment_timeline", {"shipment_id": shipment}, (f"/shipments/{shipment}/timeline", {}),
         f"Timeline of {shipment}"),
        ("get_shipment_free_time", {"shipment_id": shipment}, (f"/shipments/{shipment}/free_time", {}), shipment),
        ("list_free_time_at_risk", {}, ("/free_time/at_risk", {}), "AT RISK"),
        ("list_shipment_documents", {"shipment_id": shipment}, (f"/shipments/{shipment}/documents", {}), "doc_"),
        ("list_shipment_packing_lists", {"shipment_id": shipment}, (f"/shipments/{shipment}/packing_lists", {}),
         "pkl_"),
        ("list_alerts", {"limit": 2}, ("/alerts", {"limit": 2}), "More: call list_alerts again with starting_after=alr_"),
        ("list_checks", {"limit": 4}, ("/checks", {"limit": 4}), "chk_"),
        ("list_checks", {"status": "failed", "shipment": shipment}, ("/checks", {"status": "failed", "shipment": shipment}),
         ""),
        ("list_changes", {"limit": 2}, ("/changes", {"limit": 2}), "next_since: "),
        ("get_organization", {}, ("/organization", {}), "Acme"),
    ]


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_every_tool_answers_on_the_demo_data_as_the_api_does(kind, served, demo_database, demo):
    cases = calls(demo)

    async def work():
        answers = []
        async with connect(kind, target(kind, served, demo_database), token_of(demo_database)) as client:
            for tool, arguments, _request, _line in cases:
                answers.append((await client.call_tool(tool, arguments),
                                await client.call_tool(tool, {**arguments, "full": True})))
            documents = json.loads(text(answers[6][1]))["data"]
            with_data = next(document["id"] for document in documents if document["data_available"])
            answers.append((await client.call_tool("get_document_data", {"document_id": with_data}),
                            await client.call_tool("get_document_data", {"document_id": with_data, "full": True})))
            cases.append(("get_document_data", {}, (f"/documents/{with_data}/data", {}), "Data of " + with_data))
        return answers

    answers = run(work)
    assert {tool for tool, *_rest in cases} == TOOLS
    for (tool, arguments, (path, query), line), (summary, full) in zip(cases, answers):
        assert not summary.is_error and not full.is_error, (tool, text(summary))
        assert text(full) == api(served, demo_database, path, **query), tool
        assert line in text(summary), (tool, text(summary))
        # Concise: the summary is shorter than the JSON, one line per listed item at least.
        assert len(text(summary)) < len(text(full)), tool
        body = json.loads(text(full))
        if body["object"] == "list":
            for item in body["data"]:
                assert item.get("id", item.get("shipment_id")) in text(summary), (tool, item)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_shipments_are_resources(kind, served, demo_database, demo):
    async def work():
        async with connect(kind, target(kind, served, demo_database), token_of(demo_database)) as client:
            first = await client.list_resources()
            second = await client.list_resources(cursor=first.next_cursor)
            templates = await client.list_resource_templates()
            read = await client.read_resource(f"shipment://{demo['shipment']}")
            return first, second, templates, read

    first, second, templates, read = run(work)
    page = json.loads(api(served, demo_database, "/shipments", limit=100))
    assert [resource.uri for resource in first.resources] == [f"shipment://{item['id']}" for item in page["data"]]
    assert first.next_cursor == page["data"][-1]["id"]
    assert second.resources[0].uri == f"shipment://{json.loads(api(served, demo_database, '/shipments', limit=1, starting_after=first.next_cursor))['data'][0]['id']}"
    assert [template.uri_template for template in templates.resource_templates] == ["shipment://{shipment_id}"]
    assert read.contents[0].mime_type == "application/json"
    assert read.contents[0].text == api(served, demo_database, f"/shipments/{demo['shipment']}")


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_another_organizations_ids_and_hidden_shipments_are_not_found(kind, served, demo_database, demo):
    from mcp.shared.exceptions import MCPError

    hidden = demo["hidden"]

    async def work():
        found = {}
        async with connect(kind, target(kind, served, demo_database), token_of(demo_database)) as client:
            for shipment in [demo["globex"]] + [number for number, _reference in hidden]:
                for tool in ("get_shipment", "get_shipment_timeline", "get_shipment_free_time",
                             "list_shipment_documents", "list_shipment_packing_lists"):
                    found[tool, shipment] = await client.call_tool(tool, {"shipment_id": shipment})
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(f"shipment://{shipment}")
                found["resource", shipment] = refused.value
                found["alerts", shipment] = await client.call_tool("list_alerts", {"shipment": shipment, "full": True})
                found["checks", shipment] = await client.call_tool(
                    "list_checks", {"shipment": shipment, "status": "pending,passed,failed,skipped,warning", "full": True})
            for _number, reference in hidden:
                found["search", reference] = await client.call_tool(
                    "search_shipments", {"q": reference, "archived": "any", "full": True})
            found["document"] = await client.call_tool("get_document_data", {"document_id": "doc_999999999"})
        return found

    found = run(work)
    for key, answer in found.items():
        if key[0] == "resource":
            assert answer.code == -32002 and answer.message.startswith("No such shipment"), key
            assert answer.data["error"]["code"] == "resource_missing"
        elif key[0] in ("alerts", "checks", "search"):
            assert json.loads(text(answer))["data"] == [], key
        else:
            assert answer.is_error, key
            assert text(answer).startswith("resource_missing: No such "), (key, text(answer))


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_a_wrong_token_is_an_mcp_error_in_the_apis_words(kind, served, demo_database):
    from mcp.shared.exceptions import MCPError

    wrong = "sv_" + "x" * 40

    async def work():
        if kind == "http":
            # /mcp refuses the first message as the API refuses any request: 401, its message, its body.
            try:
                async with connect(kind, served, wrong):
                    pass
            except BaseException as error:  # the SDK's task groups wrap it in exception groups
                return found_in(error, MCPError)
            raise AssertionError("connected with a wrong token")
        async with connect(kind, demo_database.url, wrong) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_organization", {})
            return refused.value

    error = run(work)
    assert error.message == INVALID_TOKEN
    assert error.data["status"] == 401 and error.data["error"]["code"] == "invalid_token"
    if kind == "http":
        response = requests.post(f"{served}/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                                 headers={"Accept": "application/json, text/event-stream"}, timeout=10)
        assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer realm=")
        # A refused body is never read: the id is null (JSON-RPC 2.0, section 5), which the SDK's client matches.
        assert response.json()["id"] is None and response.json()["error"]["data"]["error"]["code"] == "missing_token"


@pytest.fixture
def limited_token(demo_database):
    """A token of acme's owner whose count starts at zero; deleted afterwards (the demo database is shared)."""
    conn = db.connect(demo_database.url)
    conn.autocommit = True
    try:
        organization_id = organizations.get_organization_by_slug(conn, "acme")["id"]
        user_id = organizations.get_membership(conn, organization_id, "owner@acme.example")["user_id"]
        value, row = tokens.create_token(conn, organization_id, user_id, "mcp limit test", "never")
        yield value
        db.execute(conn, "DELETE FROM tokens WHERE id = %(id)s", {"id": row["id"]})
    finally:
        conn.close()


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_an_exhausted_limit_is_an_mcp_error_in_the_apis_words(kind, demo_database, limited_token, tmp_path):
    from mcp.shared.exceptions import MCPError

    async def work(base):
        async with connect(kind, base, limited_token, RATE_LIMITS=LIMITED) as client:
            answers = []
            for _attempt in range(5):
                try:
                    answers.append(await client.call_tool("get_organization", {}))
                except MCPError as error:
                    return answers, error
            return answers, None

    if kind == "http":
        with gunicorn(demo_database.url, tmp_path, RATE_LIMITS=LIMITED) as base:
            within_one_window(30, LIMITED["window_seconds"])
            answers, error = run(lambda: work(base))
    else:
        within_one_window(30, LIMITED["window_seconds"])
        answers, error = run(lambda: work(demo_database.url))
    assert error is not None and error.message.startswith("Too many requests."), error
    assert error.data["status"] == 429 and error.data["error"]["code"] == "rate_limited"
    # A tool call counts once (its POST, whose count its GET takes as its own). Over HTTP the handshake's
    # POSTs (discover, or initialize and initialized) count too; over stdio nothing but the GETs does.
    assert 1 <= len(answers) <= 2 if kind == "http" else len(answers) == 3


def test_mcp_has_no_stream_to_open_and_the_api_keeps_its_routes(served, demo_database):
    # GET /mcp would open the optional server-to-client stream: 405, which the protocol allows.
    response = requests.get(f"{served}/mcp", headers=demo_database.headers, timeout=10)
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
    assert response.headers["Allow"] == "POST"
    # /mcp is not an operation of the description, and nothing else moved.
    assert "/mcp" not in requests.get(f"{served}/openapi.json", timeout=10).json()["paths"]
    assert requests.get(f"{served}/mcp.json", headers=demo_database.headers, timeout=10).status_code == 404


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_handshake_era_and_the_per_request_era_both_work(mode, served, demo_database):
    async def work():
        async with connect("http", served, token_of(demo_database), mode=mode) as client:
            return client.protocol_version, await client.call_tool("get_organization", {})

    version, answer = run(work)
    assert version == ("2025-11-25" if mode == "legacy" else mode)
    assert not answer.is_error and "Acme" in text(answer)


def test_a_tool_call_costs_one_token_check_and_one_count_as_its_get_does(app, client, conn):
    token = make_token(conn, make_org(conn, "acme"))
    shipment = f"shp_{make_shipment(conn, 1)}"
    recorder = statement_counts(app)
    api = client.get(f"/shipments/{shipment}", headers=auth(token))     # pins the version, stores the rendering
    recorder.clear()
    api = client.get(f"/shipments/{shipment}", headers=auth(token))
    assert (api.status_code, recorder) == (200, [1])                    # the page (the guard's from memory)
    before = int(api.headers["RateLimit"].split(";r=")[1].split(";")[0])
    recorder.clear()
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "get_shipment", "arguments": {"shipment_id": shipment, "full": True}}}
    response = client.post("/mcp", json=message, headers=auth(
        token, Accept="application/json, text/event-stream", **{"MCP-Protocol-Version": "2025-11-25"}))
    assert response.status_code == 200
    result = response.json["result"]
    assert result["isError"] is False and result["content"][0]["text"] == api.get_data(as_text=True).rstrip("\n")
    # The POST's guard checks the token and counts it; its GET takes both as its own and reads the page.
    assert recorder == [1]
    assert response.headers["RateLimit"] == f'"per_token";r={before - 1};t=' + \
        response.headers["RateLimit"].rpartition("t=")[2]


def test_each_worker_builds_the_server_before_serving(database_url, tmp_path):
    """A worker imports the SDK and builds the server as it starts (gunicorn.conf.py, post_worker_init), so no
    client's first POST /mcp waits seconds for it: the SDK is in every worker before any /mcp was sent."""
    import psutil

    with gunicorn(database_url, tmp_path, workers=2, options=("--pid", str(tmp_path / "gunicorn.pid"))):
        master = psutil.Process(int((tmp_path / "gunicorn.pid").read_text()))
        assert wait_for(lambda: len(master.children()) == 2, 30)
        workers = master.children()
        # No request at all was sent: a worker that built it on first use would never load it.
        assert wait_for(lambda: all(_sdk_loaded(worker.pid) for worker in workers), 30), \
            [(worker.pid, _sdk_loaded(worker.pid)) for worker in workers]


def _sdk_loaded(pid):
    """Whether the process has loaded pydantic's compiled core, which only the MCP SDK imports."""
    return "_pydantic_core" in Path(f"/proc/{pid}/maps").read_text()
