"""How a tool reaches the API: a GET through the application's own request handling, with the caller's token."""
import contextvars
import json
from dataclasses import dataclass, field

from werkzeug.test import EnvironBuilder, run_wsgi_app

from api.guard import COUNTED_BY, Authentication

# The API client of the MCP request being served: set by the /mcp view per request, by `flask mcp` once.
CALLER = contextvars.ContextVar("shiptrack_mcp_caller")

# JSON-RPC code of a refusal by the API (401, 429, 503, ...): -32000 to -32099 are the server's own.
API_REFUSED = -32000
# The MCP specification's code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
# Statuses a tool answers as a tool error (the model can correct its arguments); others are MCP errors.
TOOL_ERRORS = frozenset({400, 404})


@dataclass
class Answer:
    """The API's answer to one GET: status, the exact body text, and the body parsed."""

    status: int
    text: str
    body: dict

    def error(self):
        """The API's error object ({type, code, message, param}) of a non-200 answer."""
        return self.body.get("error") or {"code": "unknown", "message": self.text[:200]}

    def refusal(self, code=API_REFUSED):
        """The MCPError carrying this refusal: the API's message, its error body and status as data."""
        from mcp.shared.exceptions import MCPError  # the SDK takes seconds to import: only where it serves

        return MCPError(code, self.error()["message"], data={"status": self.status, **self.body})


@dataclass
class ApiCaller:
    """GET requests to the API for one MCP client: its Authorization and Service-Version, its address.

    Each request is a full request of the application: its WSGI callable, given an environ made by
    werkzeug's EnvironBuilder (as the test client makes it, without the client's cookie jar and
    redirects). The guard authenticates and counts it, the view answers it, errors come in the API's
    words. It runs in a fresh context, so it has its own application context, `g` and database
    connection even inside the /mcp request.
    `counted` is the authentication and count of the /mcp POST the first GET answers (api.guard
    COUNTED_BY): a tool call is one request of the limit and one token check, as the GET alone is.
    `before_request` runs before each (the /mcp view gives its connection back there).
    """

    app: object
    headers: dict
    remote_addr: str = "127.0.0.1"
    before_request: object = None
    counted: Authentication | None = None
    made: list = field(default_factory=list)

    def get(self, path, params=None):
        """The Answer of GET `path` with query `params` (None values left out)."""
        if self.before_request is not None:
            self.before_request()
        query = {key: _query_value(value) for key, value in (params or {}).items() if value is not None}
        environ = {"REMOTE_ADDR": self.remote_addr}
        if self.counted is not None:
            environ[COUNTED_BY], self.counted = self.counted, None
        answer = contextvars.Context().run(self._get, path, query, environ)
        self.made.append(path)
        return answer

    def _get(self, path, query, environ):
        """The Answer of the GET, run through the whole WSGI application."""
        request = EnvironBuilder(path=path, query_string=query, headers=self.headers, environ_base=environ)
        try:
            # Buffered: the application's iterable is read whole and closed before this returns.
            chunks, status, _headers = run_wsgi_app(self.app.wsgi_app, request.get_environ(), buffered=True)
        finally:
            request.close()
        text = b"".join(chunks).decode()
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {}
        return Answer(int(status.split(None, 1)[0]), text, body)


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def caller():
    """The ApiCaller of the MCP request being served."""
    return CALLER.get()
