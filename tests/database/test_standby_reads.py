"""Reads from a hot standby (DATABASE_REPLICA_URL): a real primary and standby of this module's, the service
under gunicorn. What the standby serves, what stays on the primary, the lag bound, the change feed on a
lagging standby, and either server lost (docs/scaling.md, "Reads from hot standbys").
"""
import itertools
import shutil
import tempfile
from pathlib import Path

import pytest
import requests

from models import db
from tests.support.apps import NO_RATE_LIMITS, make_app
from tests.support.databases import apply_schema
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.processes import gunicorn, wait_for
from tests.support.replication import Server

pytestmark = pytest.mark.slow

DATABASE = "shiptrack"
_numbers = itertools.count()
# A bound no test reaches: the standby serves however long its replay is paused.
NEVER = 3600


@pytest.fixture(scope="module")
def servers():
    """(primary, standby) streaming, with the schema, an organization and a token on the primary.

    Their folder is not pytest's: another pytest session starting makes /tmp/pytest-of-<user> its user's alone
    (0700), which the servers' user could then no longer reach.
    """
    folder = Path(tempfile.mkdtemp(prefix="shiptrack-standby-reads-"))
    primary = Server.primary(folder / "primary")
    standby = None
    try:
        admin = primary.connect()
        admin.cursor().execute(f"CREATE DATABASE {DATABASE}")
        admin.close()
        conn = db.connect(primary.url(DATABASE))
        conn.autocommit = True
        apply_schema(conn)
        conn.close()
        standby = primary.standby(folder / "standby")
        yield primary, standby
    finally:
        db.close_pool()
        for server in (standby, primary):
            if server is not None:
                server.remove()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def data(servers):
    """(autocommit connection to the primary's database, organization id, token) of a new organization."""
    primary, standby = servers
    conn = db.connect(primary.url(DATABASE))
    conn.autocommit = True
    slug = f"org{next(_numbers)}"
    organization = make_org(conn, slug)
    token = make_token(conn, organization)
    assert standby.replayed(primary)
    yield conn, organization, token
    conn.close()


def serve(servers, tmp_path, workers=1, lag=NEVER, **settings):
    """The service on the primary, reading from the standby within `lag` seconds."""
    primary, standby = servers
    settings.setdefault("RATE_LIMITS", NO_RATE_LIMITS)
    return gunicorn(primary.url(DATABASE), tmp_path, workers=workers, DATABASE_REPLICA_URL=standby.url(DATABASE),
                    DATABASE_REPLICA_LAG_SECONDS=lag, **settings)


def listed(base, token):
    """The ids of GET /shipments (asserting a 200)."""
    response = requests.get(f"{base}/shipments?limit=100", headers=auth(token), timeout=30)
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["data"]}


def transactions(server):
    """Transactions ended in the database on `server` (pg_stat_database), as they are now."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (DATABASE,))
            return cur.fetchone()[0]
    finally:
        conn.close()


def settled(server):
    """transactions(server) once it has stopped changing (ended backends have reported theirs)."""
    values = [transactions(server)]
    wait_for(lambda: values.append(transactions(server)) or values[-1] == values[-2], 30)
    return values[-1]


def paused(standby, pause=True):
    conn = standby.connect()
    try:
        conn.cursor().execute("SELECT pg_wal_replay_pause()" if pause else "SELECT pg_wal_replay_resume()")
    finally:
        conn.close()


def standby_serves(base, token, conn, organization, standby):
    """Wait until the service reads on the standby: with its replay paused, a shipment written on the primary is
    not listed (the standby's answer); then let it replay, and wait until it is."""
    before = len(listed(base, token))
    paused(standby)
    try:
        make_shipment(conn, organization, reference="proof")
        assert wait_for(lambda: len(listed(base, token)) == before, 20), "the standby never served"
    finally:
        paused(standby, False)
    assert wait_for(lambda: len(listed(base, token)) == before + 1, 20)


def test_reads_are_served_by_the_standby_and_writes_stay_on_the_primary(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    before = make_shipment(conn, organization, reference="before")
    assert standby.replayed(primary)
    primary_before, standby_before = settled(primary), settled(standby)
    with serve(servers, tmp_path) as base:
        assert wait_for(lambda: len(listed(base, token)) == 1, 20)
        paused(standby)
        try:
            written = make_shipment(conn, organization, reference="written")
            # The standby does not show what it has not replayed: once the process has measured its lag (within
            # the bound of an hour), the reads are its own.
            assert wait_for(lambda: len(listed(base, token)) == 1, 20)
            for _ in range(40):
                assert len(listed(base, token)) == 1, written
        finally:
            paused(standby, False)
        assert wait_for(lambda: len(listed(base, token)) == 2, 20)
    # Each read is a transaction on the standby; the writes (the reservations of the rate limits, the rendering
    # of `written` that a read on the standby made) are the primary's.
    assert settled(standby) - standby_before >= 40
    with conn.cursor() as cur:
        cur.execute("SELECT sum(hits) AS hits FROM rate_limit_counters WHERE bucket LIKE 'token:%%'")
        assert cur.fetchone()["hits"] >= 1
        cur.execute("SELECT count(*) AS stored FROM shipment_renderings WHERE shipment_id = %s", (written,))
        assert cur.fetchone()["stored"] == 1
    assert before and primary_before


def test_a_standby_over_the_bound_leaves_the_reads_to_the_primary(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    with serve(servers, tmp_path, lag=1) as base:
        assert wait_for(lambda: listed(base, token) == set(), 20)
        paused(standby)
        try:
            make_shipment(conn, organization, reference="written")
            # Replay paused: its lag passes 1 s, and the primary answers with what the standby does not have.
            assert wait_for(lambda: len(listed(base, token)) == 1, 20)
            assert [len(listed(base, token)) for _ in range(20)] == [1] * 20
        finally:
            paused(standby, False)


def test_the_feed_never_goes_back_on_a_lagging_standby(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    make_shipment(conn, organization, reference="first")
    assert standby.replayed(primary)
    on_primary = make_app(primary.url(DATABASE), RATE_LIMITS=NO_RATE_LIMITS).test_client()
    with serve(servers, tmp_path) as base:
        def feed(since=None):
            response = requests.get(f"{base}/changes", params={"since": since} if since else {},
                                    headers=auth(token), timeout=30)
            assert response.status_code == 200, response.text
            return response.json()
        start = feed()
        assert len(start["data"]) == 1
        paused(standby)
        try:
            make_shipment(conn, organization, reference="second")
            # A poller that read the primary (another instance) holds a cursor the standby has not reached.
            ahead = on_primary.get(f"/changes?since={start['next_since']}", headers=auth(token))
            assert ahead.status_code == 200 and len(ahead.json["data"]) == 1
            cursor = ahead.json["next_since"]
            for _ in range(5):
                page = feed(cursor)   # answered by the primary: a 200, not the 400 of a cursor from elsewhere
                assert page["data"] == [] and page["next_since"] == cursor
            # The standby's own page from the older cursor does not have the second change yet, and never
            # hands out a cursor below the one it was given.
            older = feed(start["next_since"])
            assert older["data"] == [] and older["next_since"] == start["next_since"]
        finally:
            paused(standby, False)
        assert wait_for(lambda: len(feed(start["next_since"])["data"]) == 1, 20)


def test_the_primary_stopped_the_standby_answers_and_counts_alone(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    make_shipment(conn, organization, reference="kept")
    cold = make_token(conn, organization, name="first used in the outage")
    assert standby.replayed(primary)
    limits = {**NO_RATE_LIMITS, "per_token": 5}
    with serve(servers, tmp_path, RATE_LIMITS=limits) as base:
        assert len(listed(base, token)) == 1   # the organization's version pinned, on the standby too
        assert standby.replayed(primary)
        ready = requests.get(f"{base}/readyz", timeout=30)
        assert ready.status_code == 200 and "reads_only" not in ready.json()
        primary.stop("immediate")
        try:
            assert wait_for(lambda: requests.get(f"{base}/shipments", headers=auth(token), timeout=30).status_code
                            == 200, 30)
            # Ready still, for a balancer: the reads are served (and the primary's absence said).
            assert wait_for(lambda: requests.get(f"{base}/readyz", timeout=30).json() == {**ready.json(),
                                                                                          "reads_only": True}, 10)
            assert requests.get(f"{base}/readyz", timeout=30).status_code == 200
            # A token first seen now is looked up on the standby; the process counts its limit by itself.
            statuses = [requests.get(f"{base}/shipments", headers=auth(cold), timeout=30).status_code
                        for _ in range(7)]
            assert statuses == [200] * 5 + [429] * 2
            response = requests.get(f"{base}/shipments", headers=auth(cold), timeout=30)
            assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
        finally:
            primary.start()
        assert standby.replayed(primary)


def test_the_standby_stopped_everything_goes_to_the_primary(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    make_shipment(conn, organization, reference="kept")
    assert standby.replayed(primary)
    with serve(servers, tmp_path, workers=2) as base:
        standby_serves(base, token, conn, organization, standby)
        for _ in range(10):
            listed(base, token)
        standby.stop("immediate")
        try:
            statuses = [requests.get(f"{base}/shipments", headers=auth(token), timeout=30).status_code
                        for _ in range(30)]
            assert statuses == [200] * 30
            written = make_shipment(conn, organization, reference="after")
            assert written and len(listed(base, token)) == 3
        finally:
            standby.start()
        assert standby.replayed(primary)


def test_without_a_replica_url_nothing_reads_elsewhere(servers, data, tmp_path):
    primary, standby = servers
    conn, organization, token = data
    standby_before = settled(standby)
    with gunicorn(primary.url(DATABASE), tmp_path, RATE_LIMITS=NO_RATE_LIMITS) as base:
        for _ in range(20):
            listed(base, token)
    assert settled(standby) - standby_before < 5
