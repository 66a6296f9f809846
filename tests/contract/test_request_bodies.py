"""Request bodies are bounded before anything reads them, and every edge of /mcp answers strict JSON (gunicorn).

A refused request (401, 413, 429, 400) never has its body read or parsed; a body over MAX_CONTENT_LENGTH is
refused on its Content-Length, or, streamed without one (chunked), once the limit is counted as it streams.
"""
import json
import os
import select
import socket
import time
from pathlib import Path

import pytest

from config import DEFAULTS
from tests.support.apps import NO_RATE_LIMITS
from tests.support.factories import make_org, make_token
from tests.support.longest import longest_value
from tests.support.processes import gunicorn

LIMIT = DEFAULTS["MAX_CONTENT_LENGTH"]
# A body far over the limit, cheap to send and costly to parse: 42 MB of `[{},{},...]`, in pieces of 64 KiB.
PIECE = b"{}," * (65536 // 3)
PIECES = 42 * 1024 * 1024 // len(PIECE)
ACCEPT = b"Accept: application/json, text/event-stream"
JSON = b"Content-Type: application/json"


def strict_json(body):
    """json.loads refusing Infinity, -Infinity and NaN, which are not JSON (RFC 8259)."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(body, parse_constant=refuse)


@pytest.fixture(scope="module")
def served(module_database, tmp_path_factory):
    """gunicorn (one worker) over a database with one token: (base URL, token header line, worker pid)."""
    with module_database() as (conn, app):
        token = make_token(conn, make_org(conn, "acme"))
        with gunicorn(app.config["DATABASE_URL"], tmp_path_factory.mktemp("bodies"),
                      RATE_LIMITS=NO_RATE_LIMITS) as base:
            authorization = f"Authorization: Bearer {token}".encode()
            # The first /mcp imports the SDK: done now, so that what the tests measure is the refusals alone.
            status, _headers, _body, _seconds = exchange(base, post([authorization, ACCEPT, JSON], b'{"jsonrpc": '
                                                        b'"2.0", "id": 1, "method": "tools/list"}'))
            assert status == 200
            yield base, authorization, worker_pid(base)


def worker_pid(base):
    """The pid of the one gunicorn worker serving `base`: a child of the master, whose parent is this process.

    The master listens before it forks its worker, so on a busy machine the worker may not be there yet.
    """
    deadline = time.monotonic() + 30
    while len(workers := _workers(base)) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(workers) == 1, workers
    return workers[0]


def _workers(base):
    bind = base.removeprefix("http://").encode()
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and bind in (entry / "cmdline").read_bytes():
                found[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except OSError:
            continue
    masters = [pid for pid, parent in found.items() if parent == os.getpid()]
    return [pid for pid, parent in found.items() if parent in masters]


def peak_memory_kb(pid):
    """VmHWM of a process: the most resident memory it ever had."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1])


def post(headers, body=b"", path=b"/mcp", method=b"POST"):
    """A request's bytes with a Content-Length body."""
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1", *headers, b"Content-Length: %d" % len(body)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def chunked(pieces):
    """The chunked framing of `pieces`, then its last chunk."""
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def exchange(base, head, pieces=()):
    """Send `head`, then `pieces` while reading the answer as it comes (as curl does): (status, headers, body, s).

    The seconds are those from the first byte sent to the last byte of the answer.
    """
    host, port = base.removeprefix("http://").split(":")
    pieces = iter(pieces)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(head)
        sock.setblocking(False)
        sending, pending, received, answered = True, b"", b"", None
        while answered is None:
            readable, writable, _ = select.select([sock], [sock] if sending else [], [], 10)
            assert readable or writable, "no answer within 10 seconds"
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    data = b""
                received += data
                # Complete, or cut short (the assertions on it then fail).
                answered = received if complete(received) or not data else None
                continue
            pending = pending or next(pieces, None)
            if pending is None:
                sending = False
                continue
            try:
                pending = pending[sock.send(pending):]
            except (BrokenPipeError, ConnectionResetError):
                sending = False  # the server answered and closed: the answer is read next
        seconds = time.monotonic() - started
    head, _, body = answered.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body, seconds


def complete(received):
    """Whether `received` holds a whole answer: its head and Content-Length bytes of body."""
    head, found, body = received.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), None)
    return bool(found) and length is not None and len(body) >= length


def refused(status, code, message=None):
    """The JSON-RPC error of a refused /mcp request: id null, the API's error in data."""
    def check(body):
        answer = strict_json(body)
        assert answer["id"] is None and answer["error"]["code"] == -32000, answer
        assert (answer["error"]["data"]["status"], answer["error"]["data"]["error"]["code"]) == (status, code)
        assert message is None or answer["error"]["message"] == message
    return check


@pytest.mark.slow
@pytest.mark.parametrize("with_token", [False, True], ids=["no-token", "token"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_large_body_is_refused_before_it_is_read(served, with_token, framing):
    base, authorization, worker = served
    headers = [authorization] if with_token else []
    before = peak_memory_kb(worker)
    if framing == "content-length":
        head = post([*headers, ACCEPT, JSON]).replace(b"Content-Length: 0",
                                                      b"Content-Length: %d" % (len(PIECE) * PIECES))
        status, answer_headers, body, seconds = exchange(base, head, [PIECE] * PIECES)
    else:
        head = post([*headers, ACCEPT, JSON, b"Transfer-Encoding: chunked"]).replace(b"Content-Length: 0\r\n", b"")
        status, answer_headers, body, seconds = exchange(base, head, chunked([PIECE] * PIECES))
    # A declared length is refused before the token is checked; a streamed body is read only with a valid token.
    too_large = with_token or framing == "content-length"
    expected = (413, "request_too_large") if too_large else (401, "missing_token")
    assert (status, answer_headers["content-type"]) == (expected[0], "application/json")
    refused(*expected)(body)
    # Refused as soon as the head is read (or, chunked, once the limit is counted), not after 42 MB.
    assert seconds < 1.0
    assert peak_memory_kb(worker) - before <= 16 * 1024


WRONG_TYPE = "POST /mcp takes one JSON-RPC message: send it as Content-Type: application/json."
@pytest.mark.slow
def test_a_large_body_of_a_request_refused_for_its_headers_is_never_read(served):
    base, authorization, worker = served
    before = peak_memory_kb(worker)
    head = post([authorization, ACCEPT, JSON, b"Service-Version: 1999-01-01", b"Transfer-Encoding: chunked"]
                ).replace(b"Content-Length: 0\r\n", b"")
    status, headers, body, seconds = exchange(base, head, chunked([PIECE] * PIECES))
    assert (status, headers["content-type"]) == (400, "application/json")
    refused(400, "invalid_version")(body)
    assert seconds < 1.0 and peak_memory_kb(worker) - before <= 16 * 1024


@pytest.mark.slow
def test_a_large_body_past_the_limit_without_a_token_is_never_read(module_database, tmp_path):
    limits = {**NO_RATE_LIMITS, "anonymous_per_ip": 1}
    with module_database() as (_conn, app), gunicorn(app.config["DATABASE_URL"], tmp_path, RATE_LIMITS=limits) as base:
        worker = worker_pid(base)
        assert exchange(base, post([ACCEPT, JSON], b"{}"))[0] == 401   # the budget without a token, spent
        before = peak_memory_kb(worker)
        head = post([ACCEPT, JSON, b"Transfer-Encoding: chunked"]).replace(b"Content-Length: 0\r\n", b"")
        status, headers, body, seconds = exchange(base, head, chunked([PIECE] * PIECES))
        assert (status, headers["content-type"]) == (429, "application/json")
        refused(429, "rate_limited")(body)
        assert seconds < 1.0 and peak_memory_kb(worker) - before <= 16 * 1024


TOO_LARGE = (f"The request body is larger than {LIMIT} bytes, the most this service reads. POST /mcp takes "
             f"one JSON-RPC message; the API's GET requests take no body.")


def api_error(status, code):
    """The API's error object (not JSON-RPC): where the protocol has nothing to say (405, a GET's body)."""
    def check(body):
        assert strict_json(body)["error"]["code"] == code
    return check


def jsonrpc_error(code):
    """A JSON-RPC error of the SDK (parse error, invalid request, media type), id null."""
    def check(body):
        answer = strict_json(body)
        assert answer["id"] is None and answer["error"]["code"] == code, answer
    return check


def token_request(*headers, body=b"", **kwargs):
    """A request carrying the module's token (filled in by the test)."""
    return lambda authorization: post([authorization, *headers], body, **kwargs)


EDGES = {
    # method not POST: 405 with Allow: POST, the API's error object
    "get": (token_request(ACCEPT, method=b"GET"), 405, api_error(405, "method_not_allowed")),
    "delete-no-token": (lambda _: post([], method=b"DELETE"), 405, api_error(405, "method_not_allowed")),
    "put": (token_request(JSON, body=b"{}", method=b"PUT"), 405, api_error(405, "method_not_allowed")),
    "options": (lambda _: post([b"Origin: https://example.com"], method=b"OPTIONS"), 405,
                api_error(405, "method_not_allowed")),
    # refused before the body is read: id null, never the body's
    "infinite-id-no-token": (lambda _: post([ACCEPT, JSON], b'{"jsonrpc": "2.0", "id": 1e999999, "method": "x"}'),
                             401, refused(401, "missing_token")),
    "nan-no-token": (lambda _: post([ACCEPT, JSON], b'{"id": NaN}'), 401, refused(401, "missing_token")),
    "too-large": (token_request(ACCEPT, JSON, body=b" " * (LIMIT + 1)), 413,
                  refused(413, "request_too_large", TOO_LARGE)),
    # read and answered by the protocol
    "infinite-id": (token_request(ACCEPT, JSON, body=b'{"jsonrpc": "2.0", "id": 1e999999, "method": "tools/list"}'),
                    400, jsonrpc_error(-32700)),
    "nan-id": (token_request(ACCEPT, JSON, body=b'{"jsonrpc": "2.0", "id": NaN, "method": "tools/list"}'),
               400, jsonrpc_error(-32700)),
    "infinite-argument": (token_request(ACCEPT, JSON, body=b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", '
                                        b'"params": {"name": "search_shipments", "arguments": {"limit": -1e400}}}'),
                          400, jsonrpc_error(-32700)),
    "malformed": (token_request(ACCEPT, JSON, body=b'{"jsonrpc": '), 400, jsonrpc_error(-32700)),
    "wrong-content-type": (token_request(ACCEPT, b"Content-Type: text/plain", body=b"{}"), 415,
                           refused(415, "invalid_parameter", WRONG_TYPE)),
    "form-content-type": (token_request(ACCEPT, b"Content-Type: application/x-www-form-urlencoded", body=b"a=1"),
                          415, refused(415, "invalid_parameter", WRONG_TYPE)),
    "no-content-type": (token_request(ACCEPT, body=b"{}"), 415, refused(415, "invalid_parameter", WRONG_TYPE)),
    "no-accept": (token_request(JSON, body=b"{}"), 406, jsonrpc_error(-32600)),
    # a body on the API's GETs
    "get-body-too-large": (token_request(body=b" " * (LIMIT + 1), path=b"/organization", method=b"GET"), 413,
                           api_error(413, "request_too_large")),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EDGES))
def test_every_edge_of_mcp_is_strict_json(served, name):
    base, authorization, _worker = served
    make, status, check = EDGES[name]
    got, headers, body, _seconds = exchange(base, make(authorization))
    assert (got, headers["content-type"]) == (status, "application/json"), body
    check(body)
    if status == 405:
        assert headers["allow"] == "POST"
        assert strict_json(body)["error"]["message"] == ("Only POST is supported: /mcp takes one JSON-RPC "
                                                          "message per request.")


@pytest.mark.slow
@pytest.mark.parametrize("pieces, status, code", [
    ([b"{" * (LIMIT // 2), b"}" * (LIMIT // 2), b" "], 413, "request_too_large"),   # one byte over, streamed
    ([b'{"jsonrpc": "2.0", "id": 1e999999, "method": "tools/list"}'], 400, None),
], ids=["over-the-limit", "infinite-id"])
def test_a_chunked_body_is_counted_as_it_streams(served, pieces, status, code):
    base, authorization, _worker = served
    head = post([authorization, ACCEPT, JSON, b"Transfer-Encoding: chunked"]).replace(b"Content-Length: 0\r\n", b"")
    got, headers, body, _seconds = exchange(base, head, chunked(pieces))
    assert (got, headers["content-type"]) == (status, "application/json")
    answer = strict_json(body)
    assert code is None or answer["error"]["data"]["error"]["code"] == code


@pytest.mark.slow
def test_a_broken_chunked_body_is_a_json_400(served):
    base, authorization, _worker = served
    head = post([authorization, ACCEPT, JSON, b"Transfer-Encoding: chunked"]).replace(b"Content-Length: 0\r\n", b"")
    got, headers, body, _seconds = exchange(base, head + b"zz\r\n{}\r\n0\r\n\r\n")
    assert (got, headers["content-type"]) == (400, "application/json")
    refused(400, "invalid_parameter", "The request body's chunked framing is not valid HTTP.")(body)


def test_the_largest_real_message_fits_the_limit_with_room(client):
    """A tools/call of the tool with the most arguments, every one at its longest, JSON-escaped."""
    document = client.get("/openapi.json").json
    largest = 0
    for item in document["paths"].values():
        for operation in item.values():
            arguments = {parameter["name"]: longest_value(parameter)
                         for parameter in operation.get("parameters", []) if "in" in parameter}
            message = {"jsonrpc": "2.0", "id": 2 ** 53, "method": "tools/call",
                       "params": {"name": "list_shipment_packing_lists", "arguments": {**arguments, "full": False},
                                  "_meta": {"progressToken": 2 ** 53}}}
            largest = max(largest, len(json.dumps(message, indent=2).encode()))
    # About 8 KB (q alone is 500 characters escaped as 12 bytes each): the limit is eight times that.
    assert 7_000 < largest < LIMIT // 8


# A body whose length gunicorn cannot tell (RFC 9112 6.3): refused before the application is called.
BAD_FRAMING = [b"Content-Length: -1", b"Content-Length: 1x", b"Content-Length: 2\r\nContent-Length: 3",
               b"Transfer-Encoding: chunked\r\nContent-Length: 2"]


@pytest.mark.slow
@pytest.mark.parametrize("framing", BAD_FRAMING, ids=["negative", "not-a-number", "two-lengths", "both"])
def test_body_framing_gunicorn_refuses_is_the_json_error_body(served, framing):
    base, authorization, _worker = served
    head = b"\r\n".join([b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1", authorization, ACCEPT, JSON, framing])
    got, headers, body, _seconds = exchange(base, head + b"\r\n\r\n{}")
    assert (got, headers["content-type"]) == (400, "application/json")
    assert strict_json(body)["error"]["code"] == "invalid_parameter"
