"""Failover with a real primary and hot standby (tests/support/replication.py): the API under gunicorn, the
delivery process and the CLI on a multi-host DATABASE_URL through a planned switchover and an unplanned
failover, and a multi-host URL whose first host does not answer."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import psycopg2.extensions
import pytest
import requests

from models import breaker, db, deadline
from tests.support import ROOT
from tests.support.databases import apply_schema
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.outages import UNAVAILABLE, client_deadline
from tests.support.processes import gunicorn, stop, wait_for
from tests.support.replication import Server, multi_host_url
from tests.support.webhooks import TEST_SECRET_KEY, add_endpoint, pass_process

SHIPMENTS = 5  # each write changes one shipment's status in a transaction of its own: one event each
NO_RATE_LIMITS = {"window_seconds": 300, "per_token": 100000, "per_ip": 100000, "anonymous_per_ip": 100000}


@pytest.fixture
def pair():
    """A primary holding the schema in its database `shiptrack`, and a hot standby streaming from it.

    Their folders are not under pytest's: each new pytest session (another run on the machine) makes its
    root private again, and the servers' OS user could then no longer reach them.
    """
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-failover-"))
    primary = Server.primary(folder / "primary")
    servers = [primary]
    try:
        admin = primary.connect()
        admin.cursor().execute("CREATE DATABASE shiptrack")
        admin.close()
        conn = db.connect(primary.url("shiptrack"))
        apply_schema(conn)
        conn.commit()
        conn.close()
        servers.append(primary.standby(folder / "standby"))
        yield servers
    finally:
        for server in servers:
            server.remove()
        shutil.rmtree(folder, ignore_errors=True)


def _arrange(primary, receiver):
    """An organization with a token, an endpoint at `receiver` and SHIPMENTS shipments; (token, shipment ids)."""
    conn = db.connect(primary.url("shiptrack"))
    conn.autocommit = True
    try:
        org = make_org(conn, "acme")
        add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
        return make_token(conn, org), [make_shipment(conn, org) for _ in range(SHIPMENTS)]
    finally:
        conn.close()


def _write(url, shipments, status):
    """Set each shipment's status in a transaction of its own, through the multi-host URL (libpq chooses)."""
    conn = db.connect(url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for sid in shipments:
                cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (status, sid))
    finally:
        conn.close()


def _rendered(server):
    """The bodies of the events rendered on `server`'s database `shiptrack`."""
    with server.connect("shiptrack") as conn, conn.cursor() as cur:
        cur.execute("SELECT body FROM events WHERE state = 'rendered'")
        rows = [body for (body,) in cur.fetchall()]
    conn.close()
    return rows


@contextmanager
def _polling(base, token):
    """GET /shipments again and again on two threads; yields the list of (started, finished, status, body)."""
    seen, done = [], threading.Event()

    def poll():
        while not done.is_set():
            started = time.time()
            response = requests.get(base + "/shipments", headers=auth(token), timeout=30)
            seen.append((started, time.time(), response.status_code, response.json()))
            time.sleep(0.02)
    threads = [threading.Thread(target=poll, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        yield seen
    finally:
        done.set()
        for thread in threads:
            thread.join(30)


@contextmanager
def _delivering(url, ca_bundle):
    """`python -m delivery --watch` on `url`; yields a function giving its output so far (ends with SIGTERM, exit 0)."""
    process = pass_process(url, ca_bundle, "--watch")
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        yield lambda: b"".join(lines).decode()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        finally:
            stop(process)
            reader.join(10)
            process.stdout.close()
    assert process.returncode == 0, b"".join(lines).decode()


def _arrivals(receiver):
    """(arrival time, webhook-id, body) of every request the receiver got."""
    return [(request["arrived"], request["headers"]["webhook-id"], request["body"].decode())
            for request in list(receiver.requests)]


@pytest.mark.slow
def test_a_planned_switchover(pair, receiver, ca_bundle, tmp_path):
    primary, standby = pair
    token, shipments = _arrange(primary, receiver)
    url = multi_host_url([primary, standby], "shiptrack", target_session_attrs="read-write")
    with (gunicorn(url, tmp_path, workers=2, RATE_LIMITS=NO_RATE_LIMITS, SECRET_KEY=TEST_SECRET_KEY) as base,
          _delivering(url, ca_bundle) as output, _polling(base, token) as seen):
        _write(url, shipments, "validated")
        assert wait_for(lambda: len(receiver.requests) == SHIPMENTS and len(seen) >= 10, 30), output()
        assert standby.replayed(primary)
        stopping = time.time()
        primary.stop("fast")
        assert wait_for(lambda: any(status == 503 for _s, finished, status, _b in seen if finished > stopping), 20)
        standby.promote()
        promoted = time.time()
        _write(url, shipments, "in_transit")
        assert wait_for(lambda: len(receiver.requests) == 2 * SHIPMENTS, 30), output()
        assert wait_for(lambda: sum(1 for started, *_rest in seen if started > promoted + 1) >= 10, 20)
    after = [(started, status) for started, _finished, status, _body in seen if started >= promoted]
    first_200 = min(started for started, status in after if status == 200) - promoted
    webhooks_again = min(arrived for arrived, _id, body in _arrivals(receiver)
                         if json.loads(body)["data"]["object"]["status"] == "in_transit") - promoted
    print(f"\nplanned switchover: first 200 {first_200:.2f} s and webhooks again {webhooks_again:.2f} s "
          f"after the promotion")
    # 503 only between the stop and the promotion: what answered after the promotion is 200 at once.
    for started, finished, status, body in seen:
        assert status in (200, 503), (status, body)
        if status == 503:
            assert body == UNAVAILABLE and finished > stopping and started < promoted, (started, finished)
    assert [status for _started, status in after] == [200] * len(after)
    assert webhooks_again < 10  # measured in bench/failover.py: about a second
    # Every event delivered once: each body the new primary holds, under a webhook-id of its own.
    arrivals = _arrivals(receiver)
    assert len({webhook_id for _arrived, webhook_id, _body in arrivals}) == len(arrivals) == 2 * SHIPMENTS
    assert sorted(body for _arrived, _id, body in arrivals) == sorted(_rendered(standby))
    assert f"database connection restored; recording 0 outcomes kept host=127.0.0.1 port={standby.port}" in output()


@pytest.mark.slow
def test_an_unplanned_failover_that_loses_what_the_standby_had_not_received(pair, receiver, ca_bundle, tmp_path):
    primary, standby = pair
    token, shipments = _arrange(primary, receiver)
    url = multi_host_url([primary, standby], "shiptrack", target_session_attrs="read-write")
    with (gunicorn(url, tmp_path, workers=2, RATE_LIMITS=NO_RATE_LIMITS, SECRET_KEY=TEST_SECRET_KEY) as base,
          _delivering(url, ca_bundle) as output):
        _write(url, shipments, "validated")
        assert wait_for(lambda: len(receiver.requests) == SHIPMENTS, 30), output()
        assert standby.replayed(primary)
        # The standby stops receiving; the primary commits (and delivers) what will be lost, then crashes.
        standby.stop("fast")
        _write(url, shipments, "error")
        assert wait_for(lambda: len(receiver.requests) == 2 * SHIPMENTS, 30), output()
        primary.stop("immediate")
        standby.start()
        standby.promote()
        _write(url, shipments, "in_transit")
        # The service answers from the new primary: its history, without the lost commits.
        response = requests.get(base + "/shipments", headers=auth(token), timeout=30)
        assert response.status_code == 200, response.text
        assert [shipment["status"] for shipment in response.json()["data"]] == ["in_transit"] * SHIPMENTS
        # Every event of the new history is delivered, the ones committed while the process reconnected too.
        assert wait_for(lambda: len(_rendered(standby)) == 2 * SHIPMENTS, 30), output()
        history = _rendered(standby)
        assert wait_for(lambda: set(history) <= {body for _a, _id, body in _arrivals(receiver)}, 30), output()
    lost = [body for _a, _id, body in _arrivals(receiver) if json.loads(body)["data"]["object"]["status"] == "error"]
    assert len(lost) == SHIPMENTS and not set(lost) & set(history), "sent, then lost with the primary's WAL"


def _flask(url, *command):
    return subprocess.run([sys.executable, "-m", "flask", "--app", "app", *command], check=False, cwd=ROOT,
                          env={**os.environ, "DATABASE_URL": url, "SHIPTRACK_SECRET_KEY": json.dumps(TEST_SECRET_KEY)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_cli_on_a_multi_host_url_reads_and_writes_on_the_primary(pair, receiver):
    primary, standby = pair
    _arrange(primary, receiver)
    assert standby.replayed(primary)
    # The standby first: libpq skips it for the primary, which a write needs.
    url = multi_host_url([standby, primary], "shiptrack", target_session_attrs="read-write")
    created = _flask(url, "tokens", "create", "--org", "acme", "--user", "admin@acme.example", "--name", "deploy",
                     "--expires", "never")
    assert created.returncode == 0, created.stderr
    listed = _flask(url, "tokens", "list", "--org", "acme")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[1:4] for line in listed.stdout.splitlines() if "deploy" in line]
    assert rows == [["deploy", "admin@acme.example", "active"]], listed.stdout


@pytest.mark.slow
def test_a_first_host_that_does_not_answer_is_passed_for_the_next_then_tried_last(pair, monkeypatch):
    # libpq waiting by itself tries each host for connect_timeout; the client deadline (models/deadline.py),
    # which every process installs, waits instead of libpq and makes the connection again without that host.
    primary, _standby = pair
    monkeypatch.setattr(deadline, "_silent", {})
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections and never answers
    hosts = f"127.0.0.1:{silent.getsockname()[1]},127.0.0.1:{primary.port}"
    url = f"postgresql://postgres@{hosts}/shiptrack?target_session_attrs=read-write"
    tried, connect = [], psycopg2.connect
    monkeypatch.setattr(psycopg2, "connect", lambda dsn, **kwargs: tried.append(dsn) or connect(dsn, **kwargs))
    try:
        with client_deadline(8):
            for _time in range(2):
                conn = db.connect(db.Target(url, connect_timeout=2))
                assert conn.info.port == primary.port
                conn.close()
            assert not breaker.is_open(), "a host passed for the next is not the database away"
            # The first connect waited at the silent host, then tried the other; the second tried it last.
            ports = [psycopg2.extensions.parse_dsn(dsn).get("port") for dsn in tried]
            silent_port = silent.getsockname()[1]
            assert ports == [f"{silent_port},{primary.port}", str(primary.port), f"{primary.port},{silent_port}"]
            with pytest.raises(db.DatabaseTimeout, match=r"^timeout expired: the database did not answer within 2 s "
                                                         r"\(connect_timeout\)$"):
                db.connect(db.Target(url.replace(f",127.0.0.1:{primary.port}", ""), connect_timeout=2))
            assert breaker.is_open(), "the only host does not answer"
    finally:
        silent.close()


@pytest.mark.slow
def test_readyz_passes_a_first_host_that_does_not_answer(pair, monkeypatch):
    # Its check bounds each wait to SHIPTRACK_PROBE_TIMEOUT_SECONDS (2 s): passed at the silent host, the next is tried.
    from app import create_app

    primary, _standby = pair
    monkeypatch.setattr(deadline, "_silent", {})
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"postgresql://postgres@127.0.0.1:{silent.getsockname()[1]},127.0.0.1:{primary.port}/shiptrack"
        app = create_app({"TESTING": True, "DATABASE_URL": url + "?target_session_attrs=read-write"})
        with client_deadline(8):
            response = app.test_client().get("/readyz")
        assert (response.status_code, response.get_json()["status"]) == (200, "ready"), response.get_json()
    finally:
        silent.close()
        db.close_pool()
