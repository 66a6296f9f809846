"""A database that answers, slowly (every round trip 3 s longer, each statement still within its timeouts), is a
slow service, not an outage: a request that cannot get a new connection (which needs longer than the connect
timeout) waits for one of its process's own, the breaker (models/breaker.py) stays closed while statements answer,
and /readyz says the database is slow without closing a pooled connection."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import pytest
import requests

from models import breaker, db, principals
from tests.support.apps import NO_RATE_LIMITS
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.outages import client_deadline, proxy_to
from tests.support.processes import gunicorn, wait_for

# Each way: a round trip 3 s longer. A new connection takes two (TLS offer, then start-up): over the connect
# timeout of 5 s. A statement takes one: within the statement timeout and the client deadline.
LATENCY_SECONDS = 1.5


@pytest.fixture
def proxy(database_url):
    """A TCP proxy to the test server, forwarding."""
    made = proxy_to(database_url).start()
    yield made
    made.stop()


def api_backends(database_url):
    """The process ids of the API's sessions open on the test database now."""
    with psycopg2.connect(database_url) as watcher, watcher.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'shiptrack-api'")
        pids = {row[0] for row in cur.fetchall()}
    watcher.close()
    return pids


def listening(database_url):
    """Whether an API process listens for changes to tokens on the test database."""
    with psycopg2.connect(database_url) as watcher, watcher.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = %s", (principals.APPLICATION_NAME,))
        found = cur.fetchone()[0]
    watcher.close()
    return found > 0


@pytest.mark.slow
def test_gunicorn_on_a_slow_database_answers_every_request(conn, database_url, proxy, tmp_path):
    organization_id = make_org(conn)
    token, shipment_id = make_token(conn, organization_id), make_shipment(conn, organization_id)
    path = f"/shipments/shp_{shipment_id}"
    with gunicorn(proxy.url(database_url), tmp_path, DATABASE_POOL_SIZE=2, RATE_LIMITS=NO_RATE_LIMITS) as base:
        assert requests.get(base + path, headers=auth(token), timeout=30).status_code == 200
        # The worker listens for changes to tokens from its first principal on, and that first request pinned
        # the organization's version, a change it hears: the next request looks the principal up again while
        # the database is near, and keeps it while it is slow, as a worker that has run a while keeps it.
        assert wait_for(lambda: listening(database_url), 20)
        time.sleep(0.5)
        assert requests.get(base + path, headers=auth(token), timeout=30).status_code == 200
        pooled = api_backends(database_url)  # the one connection the worker made while the database was near
        assert len(pooled) == 1
        proxy.delay(LATENCY_SECONDS)

        readiness, stop = [], threading.Event()

        def check_readiness():  # as a load balancer does, every second
            while not stop.wait(1.0):
                readiness.append(requests.get(base + "/readyz", timeout=30))
        checker = threading.Thread(target=check_readiness)
        checker.start()
        try:
            with ThreadPoolExecutor(3) as clients:
                answers = list(clients.map(lambda _: requests.get(base + path, headers=auth(token), timeout=60),
                                           range(12)))
        finally:
            stop.set()
            checker.join(60)
        assert [response.status_code for response in answers] == [200] * 12, [r.text for r in answers]
        assert all(response.json()["id"] == f"shp_{shipment_id}" for response in answers)
        # /readyz said the database is slow: its own connection needs longer than its 2 s.
        assert readiness and {response.status_code for response in readiness} == {503}
        assert {response.json()["error"]["message"] for response in readiness} <= {
            "Not ready: the service cannot reach its database. Retry after the number of seconds in Retry-After (5).",
            "Not ready: the database did not answer within 2 s. Retry after the number of seconds in "
            "Retry-After (5)."}
        assert pooled <= api_backends(database_url), "a pooled connection that still answered was closed"

        proxy.delay(0)
        assert wait_for(lambda: requests.get(base + "/readyz", timeout=30).status_code == 200, 15)
    log = (tmp_path / "gunicorn.log").read_text() + (tmp_path / "app.log").read_text()
    assert "Traceback" not in log and "database answering again" not in log, log  # the breaker never opened


def test_a_connect_past_its_timeout_waits_for_a_lent_connection(database_url, proxy):
    target = db.Target(proxy.url(database_url), "slow-test", connect_timeout=4, pool_size=2)
    lent = db.checkout(target)  # made while the database was near
    proxy.delay(LATENCY_SECONDS)

    def answer_then_return():  # a request on the lent connection: its statement answers, 3 s later
        with lent.cursor() as cur:
            cur.execute("SELECT 1")
        db.checkin(lent)
    try:
        with client_deadline(8):
            other = threading.Thread(target=answer_then_return)
            other.start()
            try:
                second = db.checkout(target)  # a new connection needs 6 s, over 4: the lent one comes back
            finally:
                other.join(30)
            assert second is lent
            assert not breaker.is_open()  # a statement answered while the connect waited
            db.checkin(second)
    finally:
        db.close_pool()


def test_a_connect_past_its_timeout_with_nothing_lent_is_unavailable(database_url, proxy):
    target = db.Target(proxy.url(database_url), "slow-test", connect_timeout=2, pool_size=2)
    proxy.delay(LATENCY_SECONDS)
    try:
        with client_deadline(8):
            with pytest.raises(db.DatabaseUnavailable, match="connect_timeout"):
                db.checkout(target)
            assert breaker.is_open()  # nothing of the process's answered while it waited
    finally:
        db.close_pool()


@pytest.mark.slow
def test_a_pooler_smaller_than_the_pools_is_shared_not_a_503(conn, database_url, tmp_path):
    # Two workers of two connections each behind a session pooler that gives three in all: one worker's second
    # connection waits in the pooler's queue past the client deadline; its requests share the one it has.
    # (A process that got none, behind a pooler smaller than its workers, has nothing to share: 503s.)
    from tests.support.pgbouncer import PgBouncer

    organization_id = make_org(conn)
    token, shipment_id = make_token(conn, organization_id), make_shipment(conn, organization_id)
    bouncer = PgBouncer(database_url, "session", pool_size=3).start()
    line = "a new database connection could not be made while this process holds 1"
    answers = []
    try:
        # Each worker's listening connection goes to the server itself, as docs/operations.md says to behind a pooler.
        with gunicorn(bouncer.url(database_url), tmp_path, workers=2, DATABASE_POOL_SIZE=2, DATABASE_POOLER="session",
                      DATABASE_CLIENT_TIMEOUT=2, DATABASE_LISTEN_URL=database_url, RATE_LIMITS=NO_RATE_LIMITS) as base:
            # Until a worker has met the full pooler (its second connection waited out the 2 s), at most 20 s.
            for _batch in range(20):
                with ThreadPoolExecutor(8) as clients:  # more than the workers' places: each needs its second
                    answers += clients.map(
                        lambda _: requests.get(f"{base}/shipments/shp_{shipment_id}", headers=auth(token), timeout=60),
                        range(40))
                if line in (tmp_path / "app.log").read_text():
                    break
    finally:
        bouncer.close()
    assert [r.status_code for r in answers] == [200] * len(answers), [r.text for r in answers if r.status_code != 200]
    log = (tmp_path / "gunicorn.log").read_text() + (tmp_path / "app.log").read_text()
    assert log.count(line) == 1, log  # once, by the worker that met the full pooler
    assert "Traceback" not in log, log
