"""What a client sends never reaches the logs raw and never makes a 500, under gunicorn as the README starts it.

Each test runs on the configured worker with text logs and on a threaded worker with JSON logs.
"""
import json
import re

import pytest

from tests.support.apps import NO_RATE_LIMITS
from tests.support.processes import exchange, gunicorn, wait_for
from tests.support.workers import THREADED

# Each starts gunicorn (child processes, seconds each).
pytestmark = pytest.mark.slow

NOT_FOUND = {"error": {"type": "not_found_error", "code": "resource_missing", "param": None,
                       "message": "Unrecognized request URL. See the API reference for the available paths."}}
BAD_HEADER = {"error": {"type": "invalid_request_error", "code": "invalid_parameter", "param": None,
                        "message": "A request header is not valid HTTP."}}
# A token that was never made: shaped as `tokens create` makes them.
STRANGER_TOKEN = "sv_" + "Q7" * 20


class Served:
    """A running gunicorn: its address, log format, the demo's token and the files its logs go to."""

    def __init__(self, base, log_format, token, folder):
        self.base, self.log_format, self.token = base, log_format, token
        self.access_log, self.error_log = folder / "access.log", folder / "gunicorn.log"

    def exchange(self, data):
        """Raw bytes in, (status, headers by lowercase name, body) out; read until the server closes."""
        status, headers, body = exchange(self.base, data, seconds=30)
        return status, {name.lower(): value for name, value in headers.items()}, body

    def access_lines(self, request_id):
        """The access log's lines of one request (waited for: gunicorn writes them after the answer)."""
        def lines():
            text = self.access_log.read_bytes().decode("utf-8") if self.access_log.exists() else ""
            return [line for line in text.splitlines() if request_id in line]

        wait_for(lines, 10)
        return lines()


@pytest.fixture(scope="module", params=[("text", ()), ("json", THREADED)], ids=["text-configured", "json-threaded"])
def served(request, demo_database, tmp_path_factory):
    log_format, options = request.param
    folder = tmp_path_factory.mktemp("hostile")
    with gunicorn(demo_database.url, folder, workers=2, options=("--access-logfile", str(folder / "access.log"),
                                                                 *options),
                  RATE_LIMITS=NO_RATE_LIMITS, LOG_FORMAT=log_format) as base:
        yield Served(base, log_format, demo_database.headers["Authorization"].removeprefix("Bearer "), folder)


def request(line, *headers, body=b""):
    """A request's bytes: its line, Host, the given header lines, Connection: close, the body."""
    return b"\r\n".join([line, b"Host: 127.0.0.1", *headers, b"Connection: close", b"", body])


def test_a_path_cannot_split_forge_or_color_an_access_line(served):
    request_id = f"r-path-{served.log_format}"
    target = b"/x%0a1.2.3.4%20GET%20/forged%20route=x%1b[31m%00%c3%a9"
    status, headers, body = served.exchange(request(b"GET " + target + b" HTTP/1.1",
                                                    b"X-Request-Id: " + request_id.encode()))
    assert (status, headers["content-type"], json.loads(body)) == (404, "application/json", NOT_FOUND)
    [line] = served.access_lines(request_id)
    written = "/x%0A1.2.3.4%20GET%20/forged%20route=x%1B%5B31m%00%C3%A9"
    if served.log_format == "json":
        entry = json.loads(line)
        # The field is the path as the application saw it (WSGI: the bytes as latin-1), JSON-escaped.
        assert entry["path"] == "/x\n1.2.3.4 GET /forged route=x\x1b[31m\x00\u00c3\u00a9"
        line = entry["message"]
    assert re.fullmatch(rf"127\.0\.0\.1 GET {re.escape(written)} route=unmatched status=404 duration_ms=[0-9.]+ "
                        rf"request_id={request_id} token_id=- bytes=161", line), line
    # No line forged, no escape sequence or NUL anywhere (grep would call the file binary).
    log = served.access_log.read_bytes()
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", log)
    assert [line for line in log.splitlines() if b"forged" in line] == [line.encode()] if served.log_format == "text" \
        else len([line for line in log.splitlines() if b"forged" in line]) == 1


def test_no_token_reaches_a_log_even_in_a_malformed_header_line(served):
    token = served.token.encode()
    for malformed in (b"Authorization Bearer " + token, b"Authorization Bearer " + token + b": x",
                      b"Authorization: Bearer " + token + b"\x01", b"Authorization Basic dXNlcjpwYXNzd29yZA=="):
        status, headers, body = served.exchange(request(b"GET /organization HTTP/1.1", malformed))
        assert (status, headers["content-type"], json.loads(body)) == (400, "application/json", BAD_HEADER)
    request_id = f"r-token-path-{served.log_format}"
    status, _headers, body = served.exchange(request(f"GET /{STRANGER_TOKEN} HTTP/1.1".encode(),
                                                     b"X-Request-Id: " + request_id.encode()))
    assert (status, json.loads(body)) == (404, NOT_FOUND)
    [line] = served.access_lines(request_id)
    path = "/sv_[redacted]"
    assert (json.loads(line)["path"] if served.log_format == "json" else line.split()[2]) == path
    wait_for(lambda: served.error_log.read_text().count("Invalid request from") >= 4, 10)
    logged = served.error_log.read_text() + served.access_log.read_text()
    for secret in (served.token, STRANGER_TOKEN, "dXNlcjpwYXNzd29yZA=="):
        assert secret not in logged
    warnings = [line for line in served.error_log.read_text().splitlines() if "Invalid request from" in line]
    if served.log_format == "json":
        warnings = [json.loads(line)["message"] for line in warnings]
    assert [warning[warning.index("Invalid request from"):] for warning in warnings] == [
        "Invalid request from ip=127.0.0.1: Invalid HTTP Header: [not shown]",
        "Invalid request from ip=127.0.0.1: Invalid HTTP header name: [not shown]",
        "Invalid request from ip=127.0.0.1: Invalid HTTP Header: [not shown]",
        "Invalid request from ip=127.0.0.1: Invalid HTTP Header: [not shown]"]


@pytest.mark.parametrize("forwarded", [b"SCRIPT_NAME: /x", b"SCRIPT_NAME: /organization", b"PATH_INFO: /shipments",
                                       b"Script_Name: /x"])
def test_forwarder_headers_from_a_client_are_ignored(served, forwarded):
    authorization = b"Authorization: Bearer " + served.token.encode()
    plain = served.exchange(request(b"GET /organization HTTP/1.1", authorization))
    status, headers, body = served.exchange(request(b"GET /organization HTTP/1.1", authorization, forwarded))
    assert (status, json.loads(body)) == (200, json.loads(plain[2]))
    assert json.loads(body)["object"] == "organization"
    status, headers, body = served.exchange(request(b"GET /nowhere HTTP/1.1", forwarded))
    assert (status, headers["content-type"], json.loads(body)) == (404, "application/json", NOT_FOUND)
    assert "Traceback" not in served.error_log.read_text()


@pytest.mark.parametrize("body", [b"[" * 30000 + b"]" * 30000, b'{"a":' * 10000 + b"1" + b"}" * 10000,
                                  b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
                                  + b"[" * 5000 + b"]" * 5000 + b"}}"],
                         ids=["arrays", "objects", "inside-a-message"])
def test_json_nested_deeper_than_any_parser_reads_is_a_parse_error(served, body):
    status, headers, answer = served.exchange(request(
        b"POST /mcp HTTP/1.1", b"Authorization: Bearer " + served.token.encode(), b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream", b"Content-Length: %d" % len(body), body=body))
    assert (status, headers["content-type"]) == (400, "application/json")
    message = json.loads(answer)
    assert message == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message["error"]["message"]}}
    assert re.fullmatch(r"Parse error: recursion limit exceeded at line 1 column \d+", message["error"]["message"])
    # The same body as any other JSON that cannot be read.
    status, _headers, answer = served.exchange(request(
        b"POST /mcp HTTP/1.1", b"Authorization: Bearer " + served.token.encode(), b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream", b"Content-Length: 1", body=b"{"))
    assert (status, json.loads(answer)) == (400, {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": "Parse error: EOF while parsing an object at line 1 column 1"}})
    assert "Traceback" not in served.error_log.read_text()
