"""Slow clients cannot starve the service: gunicorn as the README starts it, alone or behind monitoring.md's fronts.

Eight clients send requests a byte a second (their heads, or the bodies of POST /mcp, half with a token)
while probes of GET /healthz and GET /organization count the answers that came within 2 s.
"""
import json
import threading
import time
from contextlib import contextmanager

import pytest
import requests

from serving import REQUEST_SECONDS
from tests.support import operations
from tests.support.factories import make_org, make_token
from tests.support.processes import gunicorn, wait_for
from tests.support.slow_clients import SlowClients, probe, slow_body, slow_head

SLOW_CLIENTS = 8
# Long enough for every slow client's first request to be cut (REQUEST_SECONDS), and the service seen after.
PROBE_SECONDS = REQUEST_SECONDS + 4
TIMED_OUT = {"error": {"type": "invalid_request_error", "code": "invalid_parameter",
                       "message": f"The request did not arrive whole within {REQUEST_SECONDS} seconds.",
                       "param": None}}


@contextmanager
def served(front, database_url, tmp_path):
    """The base URL clients use: gunicorn -w 2 itself, or the front in front of it (both instances on it)."""
    settings = {"TRUSTED_PROXIES": 1} if front != "direct" else {}
    with gunicorn(database_url, tmp_path, workers=2, **settings) as base:
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
