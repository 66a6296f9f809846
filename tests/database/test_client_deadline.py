"""The worker's own deadline (models/deadline.py): a statement that never reaches the database, queued in
a transaction pooler whose every server connection is taken, is a JSON 503 after DATABASE_CLIENT_TIMEOUT
instead of a request that hangs until gunicorn kills the worker; the same worker answers once the pooler
has a connection again (after the breaker's probe finds it so)."""
import os
import time

import psycopg2
import pytest
import requests

from tests.support.apps import NO_RATE_LIMITS
from tests.support.factories import auth, make_org, make_token
from tests.support.outages import assert_unavailable, client_deadline
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import gunicorn, wait_for


@pytest.fixture
def bouncer(database_url):
    """PgBouncer in transaction mode with one server connection for the test database."""
    made = PgBouncer(database_url, "transaction", pool_size=1).start()
    yield made
    made.close()


@pytest.mark.slow
def test_a_statement_queued_in_the_pooler_is_a_503_after_the_client_timeout(database_url, conn, bouncer, tmp_path):
    token = make_token(conn, make_org(conn))
    url = bouncer.url(database_url)
    with gunicorn(url, tmp_path, DATABASE_POOLER="transaction", DATABASE_CLIENT_TIMEOUT=2,
                  RATE_LIMITS=NO_RATE_LIMITS) as base:
        first = requests.get(base + "/shipments", headers=auth(token), timeout=30)
        assert first.status_code == 200
        holder = psycopg2.connect(url)          # an open transaction holds the pooler's one server connection
        with holder.cursor() as cur:
            cur.execute("SELECT 1")
        try:
            started = time.monotonic()
            queued = requests.get(base + "/shipments", headers=auth(token), timeout=30)
            waited = time.monotonic() - started
            assert_unavailable(queued)
            assert 2 <= waited < 10, waited
        finally:
            holder.rollback()
            holder.close()
        # Meanwhile the breaker is open (models/breaker.py): the next requests are 503 at once until one
        # of them finds the database answering, within seconds.
        again = []

        def answered():
            again.append(requests.get(base + "/shipments", headers=auth(token), timeout=30))
            return again[-1].status_code == 200
        assert wait_for(answered, 12), again[-1].json()
        assert again[-1].json() == first.json()
        for response in again[:-1]:
            assert_unavailable(response)
    assert "WORKER TIMEOUT" not in (tmp_path / "gunicorn.log").read_text()


def test_the_deadline_is_a_timeout_and_closes_the_connection(database_url):
    from models import db, db_errors

    conn = db.connect(database_url)
    conn.autocommit = True
    try:
        with client_deadline(0.5), pytest.raises(db.DatabaseTimeout) as caught, \
                conn.cursor() as cur:
            cur.execute("SELECT pg_sleep(5)")
        assert (db_errors.classify(caught.value, conn), bool(conn.closed)) == (db_errors.TIMEOUT, True)
        assert str(caught.value) == "the database did not answer within 0.5 s (DATABASE_CLIENT_TIMEOUT)"
    finally:
        conn.close()
    fresh = db.connect(database_url)
    with fresh.cursor() as cur:
        cur.execute("SELECT 1 AS one")
        assert cur.fetchone() == {"one": 1}
    fresh.close()


def test_a_connection_numbered_past_1023_is_waited_on(database_url):
    # A gthread worker holds up to 1,000 client sockets, so its database connections can be numbered 1024 or
    # above, which select() refuses (ValueError: a 500, an uncaught exception in the delivery loop).
    from models import db

    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        conn = db.connect(database_url)
    finally:
        for filler in fillers:
            os.close(filler)
    conn.autocommit = True
    try:
        assert conn.fileno() >= 1024
        with client_deadline(5), conn.cursor() as cur:
            cur.execute("SELECT 1 AS one")
            assert cur.fetchone() == {"one": 1}
        with client_deadline(0.5), pytest.raises(db.DatabaseTimeout), conn.cursor() as cur:
            cur.execute("SELECT pg_sleep(5)")
    finally:
        conn.close()
