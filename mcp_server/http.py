"""POST /mcp: the SDK's streamable HTTP transport (stateless, JSON responses) served by the WSGI application.

/mcp is answered by a small Flask app of its own, mounted in front of the API's routes, so that the API's
url_map (what /openapi.json describes) keeps only GET operations. It runs the API's own request hooks and
error handlers (api.hooks.share_request_hooks): the guard authenticates and counts each POST with the
same token, limits and messages as any API request. The view then hands the request to the SDK's ASGI
handler on an event loop of its own, in the same thread; each tool answers with a GET of the API
(mcp_server/calls.py), which takes the POST's authentication and count as its own (one request of the
limit, one token check: the GET alone costs as much) and the POST's pooled connection, given back
before it. Refusals of the guard become JSON-RPC errors carrying the API's message; the body is read only
once the request is accepted, and only up to MAX_CONTENT_LENGTH.
"""
import json
import math

import anyio
from flask import Blueprint, Flask, Response, current_app, g, request
from gunicorn.http.errors import ParseException
from werkzeug.wsgi import get_input_stream

from api.context import release_conn
from api.errors import (ApiError, InvalidParameter, RequestTooLarge, ServiceUnavailable, UnsupportedMediaType,
                        conflict_refusal, error_response)
from api.hooks import share_request_hooks
from mcp_server.calls import API_REFUSED, CALLER, ApiCaller
from models import db

PATH = "/mcp"
API_APP = "shiptrack_api_app"
SERVER = "shiptrack_mcp_server"
# The request headers a tool's GET carries over from the POST.
FORWARDED_HEADERS = ("Authorization", "Service-Version", "X-Request-Id")
# A request body is read in pieces of this size, up to MAX_CONTENT_LENGTH.
READ_SIZE = 65536
# JSON-RPC 2.0, section 5.1: invalid JSON was received.
PARSE_ERROR = -32700

bp = Blueprint("mcp", __name__)


class McpEndpoint:
    """WSGI middleware: `/mcp` goes to the MCP endpoint app, every other path to the API."""

    def __init__(self, api, endpoint):
        self.api = api
        self.endpoint = endpoint

    def __call__(self, environ, start_response):
        target = self.endpoint if environ.get("PATH_INFO") == PATH else self.api
        return target(environ, start_response)


def mount(app):
    """The WSGI callable serving /mcp beside `app.wsgi_app` (wrap it: `app.wsgi_app = mount(app)`)."""
    endpoint = Flask(__name__, static_folder=None)
    endpoint.config = app.config
    endpoint.json.sort_keys = False
    endpoint.json.compact = True
    # The API's settings and database target are the endpoint's.
    endpoint.extensions = app.extensions
    share_request_hooks(app, endpoint)
    endpoint.register_blueprint(bp)
    endpoint.extensions[API_APP] = app
    return McpEndpoint(app.wsgi_app, endpoint.wsgi_app)


@bp.route(PATH, methods=["POST"], provide_automatic_options=False)
def serve():
    """One JSON-RPC message in, its answer out (202 for a notification), through the SDK's server."""
    body = read_message()
    refused_number = non_finite_number(body)
    if refused_number is not None:
        return refused_number
    caller = ApiCaller(current_app.extensions[API_APP],
                       {name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers},
                       remote_addr=request.remote_addr or "unknown", before_request=release_conn,
                       counted=g.authentication)
    token = CALLER.set(caller)
    try:
        return anyio.run(_exchange, _server(), _scope(), body)
    finally:
        CALLER.reset(token)


def read_message():
    """The request body, read only up to MAX_CONTENT_LENGTH, whether its length is declared or it streams."""
    # The SDK checks the type after the body is read, and answers a wrong one in plain text.
    if request.mimetype != "application/json":
        raise UnsupportedMediaType("POST /mcp takes one JSON-RPC message: send it as Content-Type: "
                                   "application/json.")
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    # Not request.get_data(): werkzeug stops a streamed body at the limit without saying more followed.
    stream = get_input_stream(request.environ)
    body = bytearray()
    try:
        while len(body) <= limit and (piece := stream.read(min(READ_SIZE, limit + 1 - len(body)))):
            body += piece
    except ParseException:
        # gunicorn reads the chunked framing as the body is read; it is the client's, as a bad header is.
        raise InvalidParameter("The request body's chunked framing is not valid HTTP.") from None
    if len(body) > limit:
        raise RequestTooLarge(limit)
    return bytes(body)


def non_finite_number(body):
    """The JSON-RPC parse error answering a message holding NaN, Infinity or a number beyond a double, else None.

    Python's JSON (and the SDK's) would read such a number as a float no answer can carry back as JSON.
    """
    try:
        json.loads(body, parse_float=_finite, parse_constant=_finite)
    except NonFiniteNumber as error:
        return Response(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": PARSE_ERROR, "message": f"Parse error: {error}"}}), status=400, mimetype="application/json")
    except (ValueError, RecursionError):
        pass  # not JSON at all, or nested deeper than Python reads: the SDK answers its own parse error
    return None


class NonFiniteNumber(ValueError):
    """A JSON number that is not a finite double."""


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(f"{text[:40]} is not a finite number (JSON numbers must fit a double).")
    return value


def prepare(app):
    """Build the MCP server and its tools for `app` now, not on the first POST /mcp.

    Importing the SDK takes seconds, which a process serving /mcp pays once: a gunicorn worker pays it
    as it starts (gunicorn.conf.py, post_worker_init), so no client waits for it. Commands and tests that
    never serve /mcp do not.
    """
    from mcp_server.tools import tool_specs

    with app.app_context():
        _server()
    tool_specs(app)


def _server():
    if SERVER not in current_app.extensions:
        from mcp_server.server import build_server  # the SDK takes seconds to import: only where /mcp is served

        current_app.extensions[SERVER] = build_server()
    return current_app.extensions[SERVER]


def _scope():
    host, _, port = request.host.partition(":")
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.scheme, "path": PATH, "raw_path": PATH.encode(), "root_path": "",
            "query_string": request.query_string,
            "headers": [(name.lower().encode("latin-1"), value.encode("latin-1"))
                        for name, value in request.headers.items()],
            "client": (request.remote_addr or "unknown", 0),
            "server": (host, int(port) if port.isdigit() else 80)}


async def _exchange(server, scope, body):
    """The Response of the SDK's stateless JSON-response handler to one request."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    answered = anyio.Event()
    sent = {"status": 500, "headers": [], "body": []}
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the whole answer is written.
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
            sent["headers"] = [(name.decode("latin-1"), value.decode("latin-1"))
                               for name, value in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            sent["body"].append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return Response(b"".join(sent["body"]), status=sent["status"],
                    headers=[(name, value) for name, value in sent["headers"] if name.lower() != "content-length"])


@bp.errorhandler(ApiError)
def refused(error):
    """A refusal (401, 413, 429, ...) as a JSON-RPC error; status and headers are the API's.

    Its id is null (JSON-RPC 2.0, section 5: the id could not be read): a refused body is never read.
    """
    response = error_response(error)
    response.set_data(json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": API_REFUSED, "message": error.message, "data": {"status": error.status, **error.body()}}}))
    return response


@bp.errorhandler(db.DatabaseUnavailable)
def database_unavailable(_error):
    """The database away: the API's 503, as a JSON-RPC error."""
    return refused(ServiceUnavailable(current_app.config["DATABASE_RETRY_AFTER"]))


def database_conflict(error):
    """A deadlock or serialization failure past its retries: the API's 503, as a JSON-RPC error."""
    return refused(conflict_refusal(error))


for _conflict in db.TransientConflict:  # more specific than db.Error, as in api/errors.py
    bp.register_error_handler(_conflict, database_conflict)
