"""Crashes and overlaps: a killed pass loses nothing, two passes at once never send the same attempt twice."""
import signal
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from delivery.sender import send_delivery
from delivery.worker import Dispatcher
from models import webhook_deliveries
from tests.support.factories import make_org, make_shipment
from tests.support.processes import wait_for
from tests.support.webhooks import Clock, add_endpoint, pass_process, resolver, run_pass


def _delivery(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT state, attempt_count, next_attempt_at, lease_token FROM webhook_deliveries")
        return cur.fetchone()


def _one_event(conn, receiver, path):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url(path, host="127.0.0.1"))
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))


@pytest.mark.slow
def test_pass_killed_mid_request_is_recovered(conn, database_url, receiver, ca_bundle, settings):
    _one_event(conn, receiver, "/sleep/20")
    with pass_process(database_url, ca_bundle) as process:
        try:
            assert wait_for(lambda: receiver.requests)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
    left = _delivery(conn)
    assert left["state"] == "pending" and left["attempt_count"] == 0 and left["lease_token"] is not None
    with conn.cursor() as cur:
        cur.execute("SELECT attempt, state, duration_ms FROM webhook_attempts")
        assert cur.fetchall() == [{"attempt": 1, "state": "in_flight", "duration_ms": None}], "the dead pass's trace"

    receiver.force_status = 200
    # Its lease names a holder whose lock died with it: the next pass sends it again at once, the same attempt.
    run_pass(settings)
    assert len(receiver.requests) == 2
    assert receiver.requests[0]["headers"]["webhook-id"] == receiver.requests[1]["headers"]["webhook-id"]
    done = _delivery(conn)
    assert (done["state"], done["attempt_count"]) == ("succeeded", 1)
    with conn.cursor() as cur:
        cur.execute("SELECT attempt, state FROM webhook_attempts ORDER BY id")
        assert cur.fetchall() == [{"attempt": 1, "state": "interrupted"}, {"attempt": 1, "state": "succeeded"}]


def test_pass_dead_after_claiming_or_before_recording(conn, receiver, settings):
    _one_event(conn, receiver, "/ok")
    crashed = Dispatcher(settings, sender=settings.make_sender(resolver))
    try:
        crashed.render()
        now = datetime.now(timezone.utc)
        with crashed.link.conn:
            (delivery,) = webhook_deliveries.claim_due(crashed.link.conn, now, now + settings.lease, "0" * 32, 4, 10)
        send_delivery(crashed.sender, delivery)  # sent, then the process "dies" before recording
    finally:
        crashed.executor.shutdown()
        crashed.link.conn.close()
        crashed.sender.close()
    assert len(receiver.requests) == 1
    run_pass(settings, Clock(now + settings.lease - timedelta(seconds=1)))
    assert len(receiver.requests) == 1
    run_pass(settings, Clock(now + settings.lease + timedelta(seconds=1)))
    assert len(receiver.requests) == 2
    assert _delivery(conn)["state"] == "succeeded"


@pytest.mark.slow
def test_two_passes_at_once_send_each_attempt_once(conn, database_url, receiver, ca_bundle):
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/sleep/0.02", host="127.0.0.1"))
    add_endpoint(conn, org, receiver.url("/ok", host="127.0.0.1"))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, 150)", (org,))
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    with pass_process(database_url, ca_bundle, "--seconds", "20") as first, \
            pass_process(database_url, ca_bundle, "--seconds", "20") as second:
        for process in (first, second):
            output = process.communicate(timeout=60)[0].decode()
            assert process.returncode == 0, output
    seen = Counter((r["path"], r["headers"]["webhook-id"]) for r in receiver.requests)
    assert len(seen) == 300
    assert set(seen.values()) == {1}
    with conn.cursor() as cur:
        cur.execute("SELECT state, attempt_count, count(*) FROM webhook_deliveries GROUP BY 1, 2")
        assert cur.fetchall() == [{"state": "succeeded", "attempt_count": 1, "count": 300}]
        cur.execute("SELECT count(*) FROM webhook_attempts")
        assert cur.fetchone()["count"] == 300


@pytest.mark.slow
def test_kill_9_with_the_cap_in_flight_frees_the_endpoint_within_seconds(conn, database_url, receiver, ca_bundle):
    cap, count = 4, 10
    org = make_org(conn, "acme")
    add_endpoint(conn, org, receiver.url("/sleep/60", host="127.0.0.1"))  # holds every request it gets
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shipments (organization_id) SELECT %s FROM generate_series(1, %s)", (org, count))
        cur.execute("UPDATE shipments SET status = 'in_transit'")
    first = pass_process(database_url, ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=cap)
    try:
        assert wait_for(lambda: len(receiver.requests) == cap, 20), len(receiver.requests)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        first.stdout.close()
    in_flight = {request["headers"]["webhook-id"] for request in receiver.requests}
    receiver.force_status = 200  # the endpoint answers at once from now on
    started = time.monotonic()
    second = pass_process(database_url, ca_bundle, "--watch", WEBHOOK_PER_ENDPOINT=cap)
    try:
        # The dead process's leases do not hold the endpoint's cap until they run out (5 minutes).
        assert wait_for(lambda: len(receiver.requests) > cap, 20), "the endpoint is still held by a dead process"
        waited = time.monotonic() - started
        assert wait_for(lambda: _states(conn) == {("succeeded", 1): count}, 20), _states(conn)
    finally:
        second.send_signal(signal.SIGTERM)
        output = second.communicate(timeout=30)[0].decode()
    assert second.returncode == 0, output
    print(f"first delivery {waited:.1f} s after the new process started")
    # Sent twice: only what was in flight when the process died.
    received = Counter(request["headers"]["webhook-id"] for request in receiver.requests)
    assert received == {f"msg_{n}": 2 if f"msg_{n}" in in_flight else 1 for n in range(1, count + 1)}
    with conn.cursor() as cur:
        cur.execute("SELECT state, count(*) FROM webhook_attempts GROUP BY 1 ORDER BY 1")
        assert cur.fetchall() == [{"state": "interrupted", "count": cap}, {"state": "succeeded", "count": count}]


def _states(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT state, attempt_count, count(*) FROM webhook_deliveries GROUP BY 1, 2")
        return {(row["state"], row["attempt_count"]): row["count"] for row in cur.fetchall()}
