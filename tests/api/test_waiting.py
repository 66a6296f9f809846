"""GET /changes and GET /events with `wait` (api/waiting.py, serving.py): held under real gunicorn until the
organization's feed changes or the wait ends, answering what the same call without `wait` answers then.

A held request is proven held by when it answers: after a change made while it waits, long before its wait
ends, or not before its wait ends (a hold ends up to a sixteenth of it late, never early).
"""
import json
import os
import signal
import socket
import threading
import time

import pytest
import requests

from models import db
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.operations import HAPROXY, NGINX, haproxy, nginx
from tests.support.pgbouncer import PgBouncer
from tests.support.processes import gunicorn, wait_for

LONG = 50        # a wait no test lets end: an answer long before it was woken


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


def head(base, org):
    """The cursor at the head of the organization's feed (a call without wait)."""
    response = requests.get(f"{base}/changes", headers=auth(org["token"]), timeout=60)
    assert response.status_code == 200
    while response.json()["has_more"]:
        response = requests.get(f"{base}/changes?since={response.json()['next_since']}", headers=auth(org["token"]),
                                timeout=60)
    return response.json()["next_since"]


class Call(threading.Thread):
    """A GET in a thread of its own: `response` and the seconds it took once it has ended."""

    def __init__(self, url, headers):
        super().__init__(daemon=True)
        self.url, self.headers, self.response, self.seconds = url, headers, None, None
        self.start()

    def run(self):
        started = time.monotonic()
        self.response = requests.get(self.url, headers=self.headers, timeout=120)
        self.seconds = time.monotonic() - started

    def answered(self, seconds=30):
        self.join(seconds)
        assert not self.is_alive(), "no answer"
        return self.response


def held(call, seconds=1.0):
    """Give `call` the time to reach its worker and be held; it must not have been answered."""
    time.sleep(seconds)
    assert call.is_alive(), f"answered at once: {call.response.status_code} {call.response.text}"


@pytest.mark.slow
def test_a_held_request_is_answered_by_a_commit_on_another_connection(conn, org, database_url, tmp_path):
    make_shipment(conn, org["id"])
    with gunicorn(database_url, tmp_path) as base:
        since = head(base, org)
        call = Call(f"{base}/changes?since={since}&wait={LONG}", auth(org["token"]))
        held(call)
        changed = make_shipment(conn, org["id"])
        response = call.answered()
        assert call.seconds < LONG / 2
        assert response.status_code == 200
        assert [item["id"] for item in response.json()["data"]] == [f"shp_{changed}"]
        assert response.headers["X-Poll-Interval"] == "0"
        # Exactly what the same call without wait answers now.
        again = requests.get(f"{base}/changes?since={since}", headers=auth(org["token"]), timeout=60)
        assert (again.status_code, again.content) == (200, response.content)
        assert again.headers["X-Poll-Interval"] == "0"


@pytest.mark.slow
def test_a_held_request_with_nothing_new_is_answered_at_the_end_of_its_wait(conn, org, database_url, tmp_path):
    make_shipment(conn, org["id"])
    other = make_org(conn, "other")
    with gunicorn(database_url, tmp_path) as base:
        since = head(base, org)
        call = Call(f"{base}/changes?since={since}&wait=3", auth(org["token"]))
        held(call, 0.5)
        make_shipment(conn, other)  # another organization's change wakes nothing here
        response = call.answered()
        assert 3 <= call.seconds
        assert (response.status_code, response.headers["X-Poll-Interval"]) == (200, "0")
        assert response.json() == {"object": "list", "data": [], "has_more": False, "next_since": since}
        without = requests.get(f"{base}/changes?since={since}", headers=auth(org["token"]), timeout=60)
        assert (without.content, without.headers["X-Poll-Interval"]) == (response.content, "10")
        # A page with changes is answered at once, wait or not.
        started = time.monotonic()
        full = requests.get(f"{base}/changes?wait={LONG}", headers=auth(org["token"]), timeout=60)
        assert time.monotonic() - started < LONG / 2
        assert (len(full.json()["data"]), full.headers["X-Poll-Interval"]) == (1, "0")


@pytest.mark.slow
def test_above_the_cap_the_page_is_answered_at_once_and_a_client_gone_frees_its_place(conn, org, database_url,
                                                                                      tmp_path):
    with gunicorn(database_url, tmp_path, WAITERS_PER_PROCESS=1) as base:
        since = head(base, org)
        url = f"{base}/changes?since={since}&wait={LONG}"
        # A client that sends its request and leaves while it is held.
        raw = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        raw.sendall(f"GET /changes?since={since}&wait={LONG} HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {org['token']}\r\n\r\n".encode())
        time.sleep(1.0)
        # The one place is taken: answered at once, the page as it is, told to wait 5 s.
        full = requests.get(url, headers=auth(org["token"]), timeout=60)
        assert full.status_code == 200 and full.headers["X-Poll-Interval"] == "5"
        assert full.json() == {"object": "list", "data": [], "has_more": False, "next_since": since}
        raw.close()
        # Its place is given back: the next request is held, and answered by a change.
        assert wait_for(lambda: not _answered_at_once(base, org, since), 10)
        call = Call(url, auth(org["token"]))
        held(call)
        changed = make_shipment(conn, org["id"])
        assert [item["id"] for item in call.answered().json()["data"]] == [f"shp_{changed}"]


def _answered_at_once(base, org, since):
    """Whether a call with wait is answered at once for want of room (X-Poll-Interval 5); it wakes the held one."""
    response = requests.get(f"{base}/changes?since={since}&wait=1", headers=auth(org["token"]), timeout=60)
    return response.headers["X-Poll-Interval"] == "5"


@pytest.mark.slow
def test_a_held_request_is_counted_once_and_a_429_is_not_held(conn, org, database_url, tmp_path):
    limits = {"window_seconds": 300, "per_token": 4, "per_ip": 1000, "anonymous_per_ip": 1000}
    with gunicorn(database_url, tmp_path, RATE_LIMITS=limits) as base:
        since = head(base, org)  # 1
        call = Call(f"{base}/changes?since={since}&wait={LONG}", auth(org["token"]))  # 2
        held(call)
        make_shipment(conn, org["id"])
        response = call.answered()
        assert response.headers["RateLimit"].startswith('"per_token";r=2;')
        after = requests.get(f"{base}/changes?since={since}", headers=auth(org["token"]), timeout=60)  # 3
        assert after.headers["RateLimit"].startswith('"per_token";r=1;')
        requests.get(f"{base}/changes", headers=auth(org["token"]), timeout=60)  # 4
        started = time.monotonic()
        refused = requests.get(f"{base}/changes?since={since}&wait={LONG}", headers=auth(org["token"]), timeout=60)
        assert refused.status_code == 429 and time.monotonic() - started < LONG / 2


@pytest.mark.slow
def test_a_stopping_worker_answers_its_held_requests(conn, org, database_url, tmp_path):
    make_shipment(conn, org["id"])
    with gunicorn(database_url, tmp_path, workers=2) as base:
        since = head(base, org)
        calls = [Call(f"{base}/changes?since={since}&wait={LONG}", auth(org["token"])) for _ in range(4)]
        for call in calls:
            held(call, 0.25)
        master = int((tmp_path / "gunicorn.log").read_text().split("Booting worker with pid", 1)[0]
                     .rsplit("Listening at", 1)[1].split("(", 1)[1].split(")", 1)[0])
        os.kill(master, signal.SIGTERM)
        for call in calls:
            response = call.answered()
            assert call.seconds < LONG / 2
            assert (response.status_code, response.headers["X-Poll-Interval"]) == (200, "0")
            assert response.json() == {"object": "list", "data": [], "has_more": False, "next_since": since}


@pytest.mark.slow
def test_events_held_until_an_event_is_rendered(conn, org, database_url, tmp_path):
    shipment = make_shipment(conn, org["id"])
    with gunicorn(database_url, tmp_path) as base:
        first = requests.get(f"{base}/events", headers=auth(org["token"]), timeout=60)
        assert (first.status_code, first.json()["data"], first.headers["X-Poll-Interval"]) == (200, [], "10")
        call = Call(f"{base}/events?wait={LONG}", auth(org["token"], **{"If-None-Match": first.headers["ETag"]}))
        held(call)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO events (organization_id, type, shipment_id) VALUES (%s, 'alert.created', %s) "
                        "RETURNING id", (org["id"], shipment))
            event_id = cur.fetchone()["id"]
        assert call.is_alive()  # pending: not listed yet
        body = json.dumps({"id": f"msg_{event_id}", "type": "alert.created"})
        sql(conn, "UPDATE events SET state = 'rendered', body = %s, api_version = '2026-10-01', rendered_at = now() "
                  "WHERE id = %s", body, event_id)
        response = call.answered()
        assert call.seconds < LONG / 2
        assert response.status_code == 200 and [item["id"] for item in response.json()["data"]] == [f"msg_{event_id}"]
        again = requests.get(f"{base}/events", headers=auth(org["token"]), timeout=60)
        assert again.content == response.content and again.headers["ETag"] == response.headers["ETag"]
        # Its ETag named again: held to the end, then 304.
        call = Call(f"{base}/events?wait=2", auth(org["token"], **{"If-None-Match": again.headers["ETag"]}))
        response = call.answered()
        assert (response.status_code, response.headers["X-Poll-Interval"]) == (304, "0") and call.seconds >= 2


@pytest.mark.slow
def test_held_behind_pgbouncer_in_transaction_mode(conn, org, database_url, tmp_path):
    bouncer = PgBouncer(database_url, "transaction", pool_size=4)
    bouncer.start()
    try:
        with gunicorn(bouncer.url(database_url), tmp_path, DATABASE_POOLER="transaction") as base:
            since = head(base, org)
            call = Call(f"{base}/changes?since={since}&wait={LONG}", auth(org["token"]))
            held(call, 1.5)
            changed = make_shipment(conn, org["id"])
            response = call.answered()
            assert call.seconds < LONG / 2
            assert [item["id"] for item in response.json()["data"]] == [f"shp_{changed}"]
    finally:
        bouncer.close()


@pytest.mark.slow
@pytest.mark.skipif(HAPROXY is None or NGINX is None, reason="haproxy and nginx (Debian's packages) are needed")
@pytest.mark.parametrize("front", [haproxy, nginx], ids=["haproxy", "nginx"])
def test_held_through_the_documented_fronts(conn, org, database_url, tmp_path, front):
    with gunicorn(database_url, tmp_path) as instance:
        address = instance.removeprefix("http://")
        with front(tmp_path, (address, address)) as (base, _process):
            since = head(base, org)
            call = Call(f"{base}/changes?since={since}&wait={LONG}", auth(org["token"]))
            held(call)
            changed = make_shipment(conn, org["id"])
            response = call.answered()
            assert call.seconds < LONG / 2
            assert [item["id"] for item in response.json()["data"]] == [f"shp_{changed}"]
            # Held for the longest wait, and still answered by the instance, not the front.
            call = Call(f"{base}/changes?since={response.json()['next_since']}&wait=60", auth(org["token"]))
            response = call.answered(90)
            assert call.seconds >= 60
            assert (response.status_code, response.json()["data"], response.headers["X-Poll-Interval"]) == \
                (200, [], "0")


@pytest.mark.parametrize("value", ["61", "-1", "1.5", "x", "100"])
def test_a_bad_wait_is_400(client, org, value):
    response = client.get(f"/changes?wait={value}", headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.json["error"]["param"] == "wait"
    response = client.get(f"/events?wait={value}", headers=auth(org["token"]))
    assert response.status_code == 400


def test_without_the_services_worker_nothing_is_held(conn, client, org):
    response = client.get("/changes?wait=60", headers=auth(org["token"]))
    assert (response.status_code, response.json["data"], response.headers["X-Poll-Interval"]) == (200, [], "10")


def test_writes_notify_the_organizations_whose_feeds_changed(conn, org, database_url):
    other = make_org(conn, "other")
    listening = db.connect(database_url)
    listening.autocommit = True
    try:
        with listening.cursor() as cur:
            cur.execute("LISTEN shiptrack_changes")
            cur.execute("LISTEN shiptrack_events")
        with conn.cursor() as cur:  # one transaction: three shipments of two organizations, then a deletion
            cur.execute("BEGIN")
        first, second = make_shipment(conn, org["id"]), make_shipment(conn, org["id"])
        make_shipment(conn, other)
        sql(conn, "COMMIT")
        sql(conn, "DELETE FROM shipments WHERE id = %s", first)
        sql(conn, "UPDATE shipments SET notes = 'x' WHERE id = %s", second)
        assert wait_for(lambda: listening.poll() or len(listening.notifies) >= 4, 5)
        assert sorted((n.channel, n.payload) for n in listening.notifies) == sorted([
            ("shiptrack_changes", str(org["id"])), ("shiptrack_changes", str(other)),
            ("shiptrack_changes", str(org["id"])), ("shiptrack_changes", str(org["id"]))])
    finally:
        listening.close()

