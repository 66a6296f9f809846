"""Slow clients cannot starve the service: gunicorn as the README starts it, alone or behind monitoring.md's fronts.

Eight clients send requests a byte a second (their heads, or the bodies of POST /mcp, half with a token)
while probes of GET /healthz and GET /organization count the answers that came within 2 s. Clients reading
a large document file at 64 bytes a second, more of them than the pool has connections, leave the API
answering; one that never reads is cut at its response's deadline. Seventy clients trickling the bodies of
POST /mcp through haproxy wait there, not in gunicorn's threads.
"""
import json
import threading
import time
from contextlib import contextmanager

import pytest
import requests

from serving import REQUEST_SECONDS
from tests.support import operations
from tests.support.factories import insert, make_org, make_shipment, make_token
from tests.support.processes import gunicorn, wait_for
from tests.support.slow_clients import SlowClients, SlowReaders, probe, slow_body, slow_head, trickled_body

SLOW_CLIENTS = 8
# Long enough for every slow client's first request to be cut (REQUEST_SECONDS), and the service seen after.
PROBE_SECONDS = REQUEST_SECONDS + 4
TIMED_OUT = {"error": {"type": "invalid_request_error", "code": "invalid_parameter",
                       "message": f"The request did not arrive whole within {REQUEST_SECONDS} seconds.",
                       "param": None}}


# A document file of several megabytes: far more than the kernel's buffers take off gunicorn's hands.
FILE_BYTES = 8 * 1024 * 1024
# Bounds of the waits for an answer: generous, since only "answered at all" is asserted.
ANSWER_SECONDS = 10


@contextmanager
def served(front, database_url, tmp_path, workers=2, **settings):
    """The base URL clients use: gunicorn -w 2 itself, or the front in front of it (both instances on it)."""
    if front != "direct":
        settings["TRUSTED_PROXIES"] = 1
    with gunicorn(database_url, tmp_path, workers=workers, **settings) as base:
        # Listening is not serving: the workers may still be loading the application.
        assert wait_for(lambda: healthy(base), 60)
        if front == "direct":
            yield base
            return
        if operations.HAPROXY is None and front == "haproxy" or operations.NGINX is None and front == "nginx":
            pytest.skip(f"{front} (Debian's package) is not installed")
        start = operations.haproxy if front == "haproxy" else operations.nginx
        address = base.removeprefix("http://")
        with start(tmp_path, (address, address)) as (through, _process):
            yield through


def healthy(base):
    """Whether GET /healthz answers 200."""
    try:
        return requests.get(base + "/healthz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def answer(received):
    """(status, headers by lower-case name, body) of one HTTP response's bytes."""
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.slow
@pytest.mark.parametrize("front", ["direct", "haproxy", "nginx"])
@pytest.mark.parametrize("kind", ["head", "body"])
def test_eight_slow_clients_leave_nine_requests_in_ten_answered_within_2_s(database_url, conn, tmp_path, front, kind):
    organization = make_org(conn)
    probe_token, slow_token = make_token(conn, organization, name="probe"), make_token(conn, organization, name="slow")
    make = slow_head if kind == "head" else slow_body
    with served(front, database_url, tmp_path) as base:
        host, port = base.removeprefix("http://").split(":")
        sends = [make(f"{host}:{port}", slow_token if number % 2 else None) for number in range(SLOW_CLIENTS)]
        with SlowClients((host, int(port)), sends) as slow:
            time.sleep(1)
            counts = probe(base, probe_token, PROBE_SECONDS)
    for path, (answered, sent) in counts.items():
        assert answered >= 0.9 * sent, counts
    first = [client.connections[:1] for client in slow.clients]
    if front == "nginx":
        # nginx reads whole requests itself, a slow one for as long as 60 s: nothing of them reached gunicorn.
        assert first == [[]] * SLOW_CLIENTS
        return
    # Each slow request was cut once its time was up, gunicorn's with its JSON error, haproxy's with its 408.
    for [connection] in first:
        assert REQUEST_SECONDS - 1 < connection.seconds < REQUEST_SECONDS * 1.5
        status, headers, body = answer(connection.received)
        if front == "haproxy":
            assert (status, headers["content-type"]) == (408, "text/html")
        else:
            assert (status, headers["content-type"], headers["connection"]) == (400, "application/json", "close")
            assert json.loads(body) == TIMED_OUT


@pytest.mark.slow
def test_more_requests_at_once_than_the_pool_holds_wait_for_a_connection(database_url, conn, tmp_path):
    """A worker runs many threads but never more requests at once than its database pool holds."""
    token = make_token(conn, make_org(conn))
    statuses = []
    with gunicorn(database_url, tmp_path, workers=1, DATABASE_POOL_SIZE=2) as base:
        def client():
            with requests.Session() as session:
                for _ in range(10):
                    statuses.append(session.get(f"{base}/organization", timeout=30,
                                                headers={"Authorization": f"Bearer {token}"}).status_code)
        threads = [threading.Thread(target=client) for _ in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert statuses == [200] * 120


def large_document(conn, organization, storage):
    """(shipment id, document id) of a downloadable document whose file is FILE_BYTES long, under `storage`."""
    shipment = make_shipment(conn, organization)
    (storage / "docs").mkdir(parents=True)
    (storage / "docs" / "large.pdf").write_bytes(b"%PDF-1.7 " + b"x" * (FILE_BYTES - 9))
    document = insert(conn, "documents", organization_id=organization, shipment_id=shipment, type="packing_list",
                      filename="large.pdf", content_type="application/pdf", byte_size=FILE_BYTES,
                      storage_key="docs/large.pdf", scan_state="clean")
    return shipment, document


def file_request(address, document, token, request_id="slow-reader"):
    """The raw GET of a document's file."""
    return (f"GET /documents/doc_{document}/file HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n"
            f"X-Request-Id: {request_id}\r\n\r\n").encode()


@pytest.mark.slow
@pytest.mark.parametrize("front", ["direct", "haproxy", "nginx"])
def test_slow_readers_of_a_large_file_leave_the_api_answering(database_url, conn, tmp_path, front):
    """Twice as many downloads read at 64 bytes a second as the pool has connections: the API still answers.

    Each download has left the application (and given its connection back) before its file is written.
    """
    organization = make_org(conn)
    token = make_token(conn, organization)
    shipment, document = large_document(conn, organization, tmp_path / "storage")
    pool_size = 2
    with served(front, database_url, tmp_path, workers=1, DATABASE_POOL_SIZE=pool_size,
                STORAGE_DIR=str(tmp_path / "storage")) as base:
        address = base.removeprefix("http://")
        host, port = address.split(":")
        with SlowReaders((host, int(port)), file_request(address, document, token), 2 * pool_size) as readers:
            assert wait_for(readers.started, 30), readers.received
            for _ in range(3):
                answer_of_shipment = requests.get(f"{base}/shipments/shp_{shipment}", timeout=ANSWER_SECONDS,
                                                  headers={"Authorization": f"Bearer {token}"})
                assert (answer_of_shipment.status_code, answer_of_shipment.json()["id"]) == (200, f"shp_{shipment}")
                health = requests.get(f"{base}/healthz", timeout=ANSWER_SECONDS)
                assert (health.status_code, health.json()) == (200, {"status": "ok"})
            # Still reading: what each got is the head and the first bytes of the file, no more.
            assert all(received.startswith(b"HTTP/1.1 200 OK\r\n") for received in readers.received), readers.received
            assert all(len(received) < FILE_BYTES / 100 for received in readers.received)


@pytest.mark.slow
def test_a_response_not_read_by_its_deadline_is_cut_logged_and_counted(database_url, conn, tmp_path):
    """RESPONSE_SECONDS of 1 and a rate that adds nothing: a client that never reads is cut after about 1 s."""
    organization = make_org(conn)
    token = make_token(conn, organization)
    _shipment, document = large_document(conn, organization, tmp_path / "storage")
    with gunicorn(database_url, tmp_path, STORAGE_DIR=str(tmp_path / "storage"), RESPONSE_SECONDS=1,
                  RESPONSE_BYTES_PER_SECOND=10**12) as base:
        assert wait_for(lambda: healthy(base), 60)
        address = base.removeprefix("http://")
        host, port = address.split(":")
        log = tmp_path / "gunicorn.log"
        with SlowReaders((host, int(port)), file_request(address, document, token, "never-read"), 1, rate=0) as never:
            assert wait_for(lambda: "Response of" in log.read_text(), 30), log.read_text()
            received, closed = b"", None
            try:
                while chunk := never.sockets[0].recv(65536):
                    received += chunk
                closed = "end of stream"
            except ConnectionResetError:
                closed = "reset"
        metrics = requests.get(f"{base}/metrics", timeout=ANSWER_SECONDS).text
    # Reset, not closed in order: the kernel drops what it held for the client instead of sending it on.
    assert (closed, received[:17]) == ("reset", b"HTTP/1.1 200 OK\r\n") and len(received) < FILE_BYTES / 100
    [line] = [line for line in log.read_text().splitlines() if "Response of" in line]
    assert "[WARNING] Response of /documents/<document_id>/file cut: the client had not read it within " in line
    assert line.endswith("(RESPONSE_SECONDS plus its length at RESPONSE_BYTES_PER_SECOND); connection closed, "
                         "request_id=never-read")
    assert 'shiptrack_http_responses_cut_total{route="/documents/<document_id>/file"} 1.0' in metrics


@pytest.mark.slow
def test_seventy_trickled_mcp_bodies_wait_in_haproxy_while_healthz_answers(database_url, conn, tmp_path):
    """More trickling bodies than two workers have threads: haproxy holds each whole body, none reaches gunicorn."""
    with served("haproxy", database_url, tmp_path) as base:
        host, port = base.removeprefix("http://").split(":")
        with SlowClients((host, int(port)), [trickled_body()] * 70) as trickling:
            time.sleep(2)
            statuses = []
            for _ in range(16):
                try:
                    statuses.append(requests.get(f"{base}/healthz", timeout=ANSWER_SECONDS / 2).status_code)
                except requests.RequestException as error:
                    statuses.append(type(error).__name__)
                time.sleep(0.5)
    assert statuses == [200] * 16
    # haproxy cut each body after its 10 s (timeout http-request), with its own 408.
    first = [client.connections[0] for client in trickling.clients if client.connections]
    assert first and all(answer(connection.received)[0] == 408 for connection in first)
