"""WSGI middleware around the whole service: request ids, request metrics, and the probe endpoints.

Every response (the API's, /mcp's, the probes') carries X-Request-Id: the client's own when it is
safe to repeat in headers and logs, else one made here. The id is the request's X-Request-Id for the
code behind (an MCP tool call's GETs pass it on) and names every log line written meanwhile (logs.py).
"""
import re
import secrets
import time
from http import HTTPStatus

from flask import g, request

from api import metrics
from api.probes import Probes
from api.waiting import HOLDING
from logs import ENVIRON_REQUEST_ID, ENVIRON_ROUTE, ENVIRON_TOKEN_ID, REQUEST_ID
from rendering.ids import PREFIXES, format_id

HEADER = "X-Request-Id"
# What a client's id may be: enough for a UUID, a trace id or a proxy's id, nothing that could split
# a header or a log line. /openapi.json states the same bounds (api/openapi.py).
REQUEST_ID_CHARACTERS = "A-Za-z0-9._-"
REQUEST_ID_MAX_LENGTH = 200
SAFE_REQUEST_ID = re.compile(f"[{REQUEST_ID_CHARACTERS}]{{1,{REQUEST_ID_MAX_LENGTH}}}")
# A made id is this many random bytes in lowercase hex (32 digits): inside the same bounds.
MADE_REQUEST_ID_BYTES = 16


def request_id(given):
    """The client's id when it is safe, else a new one (32 hex digits)."""
    if given is not None and SAFE_REQUEST_ID.fullmatch(given):
        return given
    return secrets.token_hex(MADE_REQUEST_ID_BYTES)


def note_request(response):
    """after_request: the URL rule and the token's id, in the environ for the metrics and the access log.

    Flask clears the request from the environ when it ends, so what the middleware reads afterwards
    is written here (it runs for error responses too).
    """
    if request.url_rule is not None:
        request.environ[ENVIRON_ROUTE] = request.url_rule.rule
    authentication = g.get("authentication")
    principal = authentication.principal if authentication is not None else None
    if principal is not None:
        request.environ[ENVIRON_TOKEN_ID] = format_id(PREFIXES["token"], principal["token_id"])
    return response


class Observe:
    """Wraps the service's WSGI callable (inside ProxyFix, so addresses are the clients')."""

    def __init__(self, app):
        self.wsgi_app = app.wsgi_app
        # The connection settings the API's requests use (an extension where the app keeps them), else its URL.
        self.probes = Probes(app.config, app.extensions.get("database") or app.config["DATABASE_URL"])
        self.recording = bool(app.config["METRICS_ENABLED"])

    def __call__(self, environ, start_response):
        given = request_id(environ.get("HTTP_X_REQUEST_ID"))
        environ["HTTP_X_REQUEST_ID"] = environ[ENVIRON_REQUEST_ID] = given
        answered = []

        def start(status, headers, exc_info=None):
            headers.append((HEADER, given))
            answered[:] = [status, headers]
            return start_response(status, headers, exc_info)

        token = REQUEST_ID.set(given)
        try:
            probe = self.probes.answer(environ)
            if probe is not None:
                return self._probe(environ, start, probe)
            started = time.perf_counter()
            body = self.wsgi_app(environ, start)
            route = environ.setdefault(ENVIRON_ROUTE, metrics.UNMATCHED_ROUTE)
            # A request held (api/waiting.py) is recorded once, when it is answered.
            if self.recording and answered and not environ.get(HOLDING):
                self._record(environ, route, answered, time.perf_counter() - started)
            return body
        finally:
            REQUEST_ID.reset(token)

    @staticmethod
    def _probe(environ, start, probe):
        status, headers, body = probe
        environ[ENVIRON_ROUTE] = environ.get("PATH_INFO")
        start(f"{status} {HTTPStatus(status).phrase}", list(headers) + [("Content-Length", str(len(body)))])
        return [b"" if environ.get("REQUEST_METHOD") == "HEAD" else body]

    @staticmethod
    def _record(environ, route, answered, seconds):
        status_line, headers = answered
        status = int(status_line[:3])
        metrics.observe_request(route, environ.get("REQUEST_METHOD"), status, seconds)
        if status == 429:
            limit = next((value for name, value in headers if name.lower() == "ratelimit"), None)
            metrics.RATE_LIMIT_REFUSALS.labels(metrics.refused_limit(limit)).inc()
