"""What gunicorn answers itself (too long, malformed, not HTTP) is the JSON error body, under gunicorn.conf.py."""
import json
import runpy
import socket
import ssl
from types import SimpleNamespace

import pytest

from gunicorn.http import errors as http_errors
from serving import JsonErrorWorker, client_error
from tests.support import ROOT
from tests.support.apps import NO_RATE_LIMITS
from tests.support.longest import encode, longest_value
from tests.support.processes import exchange, gunicorn

CONF = runpy.run_path(str(ROOT / "gunicorn.conf.py"))


def longest_request_lines(document):
    """(operation id, request line) with every parameter at its longest, for every operation."""
    for path, item in document["paths"].items():
        for operation in item.values():
            # The header parameter (a $ref to ServiceVersion) is not in the request line.
            parameters = [p for p in operation.get("parameters", []) if "in" in p]
            url = path
            for parameter in parameters:
                if parameter["in"] == "path":
                    url = url.replace("{%s}" % parameter["name"], longest_value(parameter))
            # The spec lets any path end in `.json`.
            query = "&".join(f"{p['name']}={encode(longest_value(p))}" for p in parameters if p["in"] == "query")
            yield operation["operationId"], f"GET {url}.json{'?' + query if query else ''} HTTP/1.1"


def request(line, *headers):
    """A request's bytes: its line, Host, the given header lines, Connection: close."""
    return b"\r\n".join([line, b"Host: 127.0.0.1", *headers, b"Connection: close", b"", b""])


@pytest.fixture(scope="module")
def served(demo_database, tmp_path_factory):
    """gunicorn with the project's gunicorn.conf.py over the demo data; yields (base URL, token header line)."""
    tmp_path = tmp_path_factory.mktemp("gunicorn")
    with gunicorn(demo_database.url, tmp_path, RATE_LIMITS=NO_RATE_LIMITS) as base:
        yield base, f"Authorization: {demo_database.headers['Authorization']}".encode()


def test_the_longest_described_request_line_fits_the_limit(demo_database):
    document = demo_database.app.test_client().get("/openapi.json").json
    lines = dict(longest_request_lines(document))
    assert set(lines) >= {"list_shipments", "list_alerts", "list_checks", "get_shipment", "get_document_data"}
    longest = max(lines.values(), key=len)
    assert longest.startswith("GET /shipments.json?q=%F0%9F%A5%91")
    # q alone is 500 characters of 12 bytes; the rest of /shipments' parameters add about 1,700.
    assert 7_500 < len(longest) < CONF["limit_request_line"] == 8190


@pytest.mark.slow
def test_the_longest_described_request_is_served(served, demo_database):
    base, token = served
    document = demo_database.app.test_client().get("/openapi.json").json
    line = dict(longest_request_lines(document))["list_shipments"]
    status, headers, body = exchange(base, request(line.encode(), token))
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert json.loads(body) == {"object": "list", "data": [], "has_more": False}
    # A request line of exactly the limit passes too (an unknown parameter pads it).
    start = b"GET /shipments?limit=1&pad="
    padded = start + b"x" * (CONF["limit_request_line"] - len(start) - len(b" HTTP/1.1")) + b" HTTP/1.1"
    assert len(padded) == CONF["limit_request_line"]
    status, _headers, body = exchange(base, request(padded, token))
    assert status == 200 and len(json.loads(body)["data"]) == 1


def invalid(message):
    return {"error": {"type": "invalid_request_error", "code": "invalid_parameter", "message": message,
                      "param": None}}


BAD_LINE = invalid("The request line is not valid HTTP/1.x: METHOD SP path SP HTTP/1.1.")
BAD_HEADER = invalid("A request header is not valid HTTP.")
TOO_LONG = invalid("The request line is longer than 8190 bytes; shorten the query.")
HEADERS_TOO_LARGE = invalid("Too many or too large headers: at most 100 headers of at most 8190 bytes each.")


@pytest.mark.slow
@pytest.mark.parametrize("data, expected", [
    (request(b"GET /shipments?q=" + b"a" * 8200 + b" HTTP/1.1"), TOO_LONG),
    (request(b"GET /shipments?pad=" + b"a" * (8191 - 19 - 9) + b" HTTP/1.1"), TOO_LONG),   # 8191 bytes
    (request(b"GET /organization HTTP/1.1", b"X-Long: " + b"a" * 8190), HEADERS_TOO_LARGE),
    (request(b"GET /organization HTTP/1.1", b"Authorization: Bearer " + b"a" * 8190), HEADERS_TOO_LARGE),
    (request(b"GET /organization HTTP/1.1", *[b"X-%d: 1" % n for n in range(101)]), HEADERS_TOO_LARGE),
    (request(b"GARBAGE"), BAD_LINE),
    (request(b"GET /organization"), BAD_LINE),
    (request(b"GET /organization HTTP/9.9"), BAD_LINE),
    (request(b"GET /organization HTTP/1.1 extra"), BAD_LINE),
    (request(b"G\x00T /organization HTTP/1.1"), BAD_LINE),
    # Bytes that are not ASCII (here not even UTF-8) in the path or query, not percent-encoded.
    (request(b"GET /shipments/\xff\xfe HTTP/1.1"), BAD_LINE),
    (request(b"GET /shipments?q=\xc3 HTTP/1.1"), BAD_LINE),
    (request(b"GET /organization HTTP/1.1", b"Bad Name: 1"), BAD_HEADER),
    (request(b"GET /organization HTTP/1.1", b"X-Nul: a\x00b"), BAD_HEADER),
    (request(b"GET /organization HTTP/1.1", b"Transfer-Encoding: gzip"), BAD_HEADER),
    (request(b"GET /organization HTTP/1.1", b"X-Folded: a", b" b"), BAD_HEADER),
], ids=["line-too-long", "line-one-over", "header-too-long", "authorization-too-long", "too-many-headers",
        "garbage", "no-version", "unknown-version", "extra-token", "nul-in-method", "non-utf8-path",
        "non-utf8-query", "bad-header-name", "nul-in-header", "unsupported-coding", "obsolete-folding"])
def test_what_gunicorn_refuses_is_the_json_error_body(served, data, expected):
    status, headers, body = exchange(served[0], data)
    assert (status, headers["Content-Type"], headers["Connection"]) == (400, "application/json", "close")
    assert int(headers["Content-Length"]) == len(body)
    assert json.loads(body) == expected
    assert "Service-Version" not in headers


@pytest.mark.slow
@pytest.mark.parametrize("target, status, param", [
    # Invalid percent escapes reach the application as they are; undecodable UTF-8 becomes U+FFFD.
    (b"/shipments/%zz", 404, None),
    (b"/shipments/shp_%FF", 404, None),
    (b"/shipments/%", 404, None),
    (b"/shipments?limit=%zz", 400, "limit"),
    (b"/shipments?limit=%FF", 400, "limit"),
    (b"/shipments?starting_after=shp_1%", 400, "starting_after"),
    (b"/shipments?q=%zz%FF%", 200, None),
    (b"/nowhere%zz", 404, None),
])
def test_bad_percent_escapes_reach_the_application(served, target, status, param):
    base, token = served
    got, headers, body = exchange(base, request(b"GET " + target + b" HTTP/1.1", token))
    assert (got, headers["Content-Type"]) == (status, "application/json")
    if status != 200:
        assert json.loads(body)["error"]["param"] == param


def test_an_error_escaping_the_application_is_a_json_500():
    logged = []
    worker = SimpleNamespace(cfg=SimpleNamespace(limit_request_line=8190), log=SimpleNamespace(
        exception=lambda *args: logged.append(args), warning=None, access=None))
    ours, theirs = socket.socketpair()
    with ours, theirs:
        JsonErrorWorker.handle_error(worker, None, ours, ("127.0.0.1", 5), RuntimeError("bug"))
        received = theirs.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 500 Internal Server Error"
    assert b"Content-Type: application/json" in head
    assert json.loads(body) == {"error": {"type": "api_error", "code": "internal_error",
                                          "message": "Something went wrong on our side. Try again later.",
                                          "param": None}}
    assert len(logged) == 1


def test_gunicorns_own_faults_stay_ours_and_every_client_fault_is_a_400():
    cfg = SimpleNamespace(limit_request_line=8190, limit_request_fields=100, limit_request_field_size=8190)
    assert client_error(http_errors.InvalidResponseHeader("X"), cfg) is None
    assert client_error(http_errors.ConfigurationProblem("x"), cfg) is None
    assert client_error(ValueError("x"), cfg) is None
    for exc in (http_errors.InvalidChunkSize(b"x"), http_errors.InvalidProxyLine("x"), ssl.SSLError("x"),
                http_errors.LimitRequestLine(9000, 8190), http_errors.InvalidHTTPVersion("x")):
        error = client_error(exc, cfg)
        assert (error.status, error.code) == (400, "invalid_parameter"), exc
