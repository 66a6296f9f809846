"""Reads that write nothing: the guard counts from reservations and keeps principals per process, so a read of a
token far below its limits writes next to nothing, a spent window costs the database nothing, and a change to
a token still stops it on every process within two seconds (tests/api/test_rate_limits.py: the limits)."""
import threading
import time

import pytest
import requests

from models import db
from tests.support.apps import make_app, warmed
from tests.support.counting import guard_statement_counts, statement_counts
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.processes import gunicorn, wait_for

FAR_BELOW = {"window_seconds": 300, "per_token": 100_000, "per_ip": 100_000, "anonymous_per_ip": 100_000}


def row_writes(conn):
    """Rows inserted, updated and deleted in every table of the database, once every backend has reported them."""
    def total():
        with conn.cursor() as cur:
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute("SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS n "
                        "FROM pg_stat_user_tables")
            return cur.fetchone()["n"]
    db.close_pool()  # the API's backends end, and report what they wrote as they go
    with conn.cursor() as cur:  # this connection's own writes (the test's data) are reported too
        cur.execute("SELECT pg_stat_force_next_flush()")
    seen = [total()]
    # Stable for a second: nothing is left to report.
    assert wait_for(lambda: seen.append(total()) or (len(seen) > 10 and seen[-1] == seen[-11]), 20)
    return seen[-1]


def test_reads_far_below_the_limits_write_one_row_per_32_reads_at_most(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    for _ in range(30):
        make_shipment(conn, 1)
    app = make_app(database_url, RATE_LIMITS=FAR_BELOW, STORAGE_DIR=str(tmp_path / "storage"))
    client = app.test_client()
    assert client.get("/shipments", headers=auth(token)).status_code == 200   # pins, renders and stores the page
    before = row_writes(conn)
    reads = [client.get("/shipments?limit=25", headers=auth(token)).status_code for _ in range(320)]
    assert reads == [200] * 320
    writes = row_writes(conn) - before
    assert writes <= 320 // 32, writes


def test_a_spent_window_refuses_without_a_statement(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    make_shipment(conn, 1)
    app = make_app(database_url, STORAGE_DIR=str(tmp_path / "storage"),
                   RATE_LIMITS={**FAR_BELOW, "per_token": 5})
    client = app.test_client()
    assert [client.get("/shipments", headers=auth(token)).status_code for _ in range(6)] == [200] * 5 + [429]
    counts, guard_counts = statement_counts(app), guard_statement_counts(app)
    counts.clear()
    guard_counts.clear()
    refused = [client.get("/shipments", headers=auth(token)) for _ in range(100)]
    assert [response.status_code for response in refused] == [429] * 100
    assert {response.json["error"]["code"] for response in refused} == {"rate_limited"}
    assert all(1 <= int(response.headers["Retry-After"]) <= 300 for response in refused)
    # No statement, not even a connection taken from the pool: the process knows the window is spent.
    assert (sum(guard_counts), counts) == (0, [])


def test_a_warm_process_decides_a_request_without_a_statement(app, conn):
    token = make_token(conn, make_org(conn, "acme"))
    make_shipment(conn, 1)
    app = make_app(app.config["DATABASE_URL"], STORAGE_DIR=app.config["STORAGE_DIR"], RATE_LIMITS=FAR_BELOW)
    client = app.test_client()
    warmed(app, client, auth(token))
    client.get("/shipments", headers=auth(token))
    counts, guard_counts = statement_counts(app), guard_statement_counts(app)
    counts.clear()
    guard_counts.clear()
    for path in ("/shipments", "/shipments/shp_1", "/organization"):
        assert client.get(path, headers=auth(token)).status_code == 200
    # The guard asked nothing; each page was its view's one statement, the organization none.
    assert (guard_counts, counts) == ([0, 0, 0], [1, 1])


def test_never_more_than_the_limit_across_two_instances_of_two_workers(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    limits = {**FAR_BELOW, "per_token": 60}
    statuses = []
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with gunicorn(database_url, tmp_path / "a", workers=2, RATE_LIMITS=limits) as first, \
            gunicorn(database_url, tmp_path / "b", workers=2, RATE_LIMITS=limits) as second:
        def client(base):
            for _ in range(40):  # each on a new connection, so the instance's workers take turns as they accept
                statuses.append(requests.get(f"{base}/organization", headers={**auth(token), "Connection": "close"},
                                             timeout=30).status_code)
        threads = [threading.Thread(target=client, args=(base,)) for base in (first, second) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(set(statuses)) == [200, 429]
        assert statuses.count(200) <= 60
        # A process holds at most a reservation's rest unused: at most a request or two each, near the limit.
        assert statuses.count(200) >= 60 - 2 * 4, statuses.count(200)
        with conn.cursor() as cur:
            cur.execute("SELECT hits FROM rate_limit_counters WHERE bucket = 'token:1'")
            assert cur.fetchone()["hits"] == 60


@pytest.mark.parametrize("pooler", [None, "transaction"])
def test_a_revoked_token_is_refused_by_every_worker_within_two_seconds(conn, database_url, tmp_path, pooler):
    """Directly, each worker hears the revocation; behind a transaction pooler, where LISTEN cannot work, each
    looks the token up again every second."""
    from tests.support.pgbouncer import PgBouncer

    token = make_token(conn, make_org(conn, "acme"))
    bouncer = PgBouncer(database_url, pooler).start() if pooler else None
    url = bouncer.url(database_url) if bouncer else database_url
    try:
        with gunicorn(url, tmp_path, workers=2, RATE_LIMITS=FAR_BELOW,
                      **({"DATABASE_POOLER": pooler} if pooler else {})) as base:
            def get():
                return requests.get(f"{base}/organization", headers={**auth(token), "Connection": "close"},
                                    timeout=30).status_code
            assert [get() for _ in range(20)] == [200] * 20     # both workers keep the principal
            with conn.cursor() as cur:
                cur.execute("UPDATE tokens SET revoked_at = now()")
            revoked = time.monotonic()
            time.sleep(max(0.0, revoked + 2.0 - time.monotonic()))
            assert [get() for _ in range(20)] == [401] * 20
    finally:
        if bouncer:
            bouncer.close()


def test_a_503_of_the_view_gives_its_request_back(conn, database_url, tmp_path):
    token = make_token(conn, make_org(conn, "acme"))
    make_shipment(conn, 1)
    app = make_app(database_url, STORAGE_DIR=str(tmp_path / "storage"), DATABASE_STATEMENT_TIMEOUT=1,
                   RATE_LIMITS={**FAR_BELOW, "per_token": 2})
    client = app.test_client()
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    conn.autocommit = False
    with conn.cursor() as cur:
        cur.execute("LOCK TABLE shipments IN ACCESS EXCLUSIVE MODE")
    try:
        unavailable = client.get("/shipments", headers=auth(token))
    finally:
        conn.rollback()
        conn.autocommit = True
    assert unavailable.status_code == 503 and "RateLimit" not in unavailable.headers
    # The 503 counted nothing: the limit's second request is still there.
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    assert client.get("/shipments", headers=auth(token)).status_code == 429
