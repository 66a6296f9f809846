"""The isolation the statements were written for, whatever the database's default.

A DBA may make SERIALIZABLE the database's default (`ALTER DATABASE ... SET default_transaction_isolation`).
The service's transactions stay READ COMMITTED, directly and through every kind of pooler, and
REPEATABLE READ where a block asks for one snapshot; under that default, concurrent requests through
gunicorn and two delivery processes answer no 500 and end no process.
"""
import signal
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import psycopg2.errors
import pytest
import requests

from models import db
from tests.support.apps import NO_RATE_LIMITS
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import gunicorn, wait_for
from tests.support.webhooks import TEST_SECRET_KEY, add_endpoint, pass_process

# Where a connection goes: (PgBouncer's pool mode or None for direct, what DATABASE_POOLER says).
ROUTES = {"direct": (None, None), "session pooler": ("session", "session"),
          "transaction pooler": ("transaction", "transaction"), "undeclared pooler": ("transaction", None)}
STATUSES = ("validated", "in_transit", "arrived", "in_warehouse")


@pytest.fixture
def serializable(module_database):
    """(autocommit connection, URL) of a database of its own whose default isolation is SERIALIZABLE."""
    with module_database() as (conn, app):
        with conn.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{conn.info.dbname}" SET default_transaction_isolation = serializable')
        yield conn, app.config["DATABASE_URL"]


def level(conn):
    """The isolation of the transaction a statement on `conn` runs in."""
    with conn.cursor() as cur:
        cur.execute("SELECT current_setting('transaction_isolation') AS level")
        row = cur.fetchone()
        return row["level"] if isinstance(row, dict) else row[0]


@pytest.mark.parametrize("route", list(ROUTES))
def test_transactions_are_read_committed_unless_a_block_asks_for_one_snapshot(serializable, server_url, route):
    mode, declared = ROUTES[route]
    _conn, url = serializable
    bouncer = PgBouncer(server_url, mode).start() if mode else None
    try:
        if bouncer:
            url = bouncer.url(url)
        raw = psycopg2.connect(url)
        assert level(raw) == "serializable", "the database's default, for a connection that does not pin it"
        raw.close()
        conn = db.connect(db.Target(url, pooler=declared))
        try:
            in_transaction = level(conn)  # the CLI's connections: not in autocommit, psycopg2's plain BEGIN
            conn.rollback()
            conn.autocommit = True  # the API's and the delivery script's
            alone = level(conn)
            with db.transaction(conn):
                explicit = level(conn)
            with db.one_snapshot(conn):
                snapshot = level(conn)
            assert (in_transaction, alone, explicit, snapshot, level(conn)) == (
                "read committed", "read committed", "read committed", "repeatable read", "read committed")
        finally:
            conn.close()
    finally:
        if bouncer:
            bouncer.close()


def _change_statuses(url, shipment_ids, count):
    """`count` status changes, one transaction each, as the application writes them: retried on a serialization
    failure, as SERIALIZABLE asks of every writer."""
    writer = psycopg2.connect(url)
    try:
        for number in range(count):
            while True:
                try:
                    with writer, writer.cursor() as cur:
                        cur.execute("UPDATE shipments SET status = %s WHERE id = %s",
                                    (STATUSES[number // len(shipment_ids) % len(STATUSES)],
                                     shipment_ids[number % len(shipment_ids)]))
                    break
                except (psycopg2.errors.SerializationFailure, psycopg2.errors.DeadlockDetected):
                    continue
    finally:
        writer.close()


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


@pytest.mark.slow
def test_a_serializable_default_gives_no_500_and_ends_no_delivery_process(serializable, tmp_path, receiver,
                                                                          ca_bundle):
    conn, url = serializable
    org = make_org(conn, "acme")
    token = make_token(conn, org)
    shipment_ids = [make_shipment(conn, org) for _ in range(8)]
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    changes = 32
    processes = [pass_process(url, ca_bundle, "--watch") for _ in range(2)]
    try:
        with gunicorn(url, tmp_path, workers=2, RATE_LIMITS=NO_RATE_LIMITS, SECRET_KEY=TEST_SECRET_KEY) as base:
            etag = requests.get(base + "/organization", headers=auth(token), timeout=30).headers["ETag"]
            # (path, extra headers, the status it must answer)
            asks = [("/organization", {}, 200), ("/organization", {"If-None-Match": etag}, 304),
                    ("/shipments?limit=5", {}, 200), (f"/shipments/shp_{shipment_ids[0]}", {}, 200),
                    ("/events?limit=5", {}, 200)]

            def ask(number):
                path, headers, expected = asks[number % len(asks)]
                status = requests.get(base + path, headers=auth(token, **headers), timeout=30).status_code
                return path, expected, status
            writing = threading.Thread(target=_change_statuses, args=(url, shipment_ids, changes))
            writing.start()
            with ThreadPoolExecutor(8) as pool:
                answered = list(pool.map(ask, range(400)))
            writing.join(60)
        unexpected = Counter((path, expected, status) for path, expected, status in answered if status != expected)
        assert unexpected == Counter(), unexpected

        assert wait_for(lambda: _rows(conn, "SELECT state, count(*) FROM webhook_deliveries GROUP BY 1")
                        == [{"state": "succeeded", "count": changes}], 60), \
            _rows(conn, "SELECT state, count(*) FROM events GROUP BY 1")
        assert [process.poll() for process in processes] == [None, None], "both delivery processes still run"
    finally:
        outputs = []
        for process in processes:
            process.send_signal(signal.SIGTERM)
            outputs.append(process.communicate(timeout=30)[0].decode())
    assert [process.returncode for process in processes] == [0, 0], outputs
    assert not any("Traceback" in output for output in outputs), outputs
    assert len({request["body"] for request in receiver.requests}) == changes
