"""The retry schedule and the disabling rules, driven by a controllable clock instead of sleeping."""
from datetime import datetime, timedelta, timezone

import pytest

from delivery import recording
from tests.support.factories import make_org, make_shipment
from tests.support.webhooks import Clock, add_endpoint, run_pass

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)


def test_schedule_is_the_specs():
    assert recording.SCHEDULE == (timedelta(0), MINUTE, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR,
                              10 * HOUR, 10 * HOUR)
    assert recording.MAX_ATTEMPTS == 8


@pytest.mark.parametrize("attempt, delay", [(1, MINUTE), (2, 5 * MINUTE), (3, 30 * MINUTE), (4, 2 * HOUR),
                                            (5, 5 * HOUR), (6, 10 * HOUR), (7, 10 * HOUR), (8, None)])
def test_next_attempt(attempt, delay):
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert recording.next_attempt_at(attempt, at) == (None if delay is None else at + delay)


def test_single_attempt_deliveries_are_never_retried():
    assert recording.next_attempt_at(1, datetime(2026, 1, 1, tzinfo=timezone.utc), max_attempts=1) is None


@pytest.mark.parametrize("since, last, now, expected", [
    (None, None, 10, 10),   # first failure starts a run
    (0, 5, 10, 0),          # failures keep coming: the run goes on
    (0, 5, 30, 30),         # more than a day without a failure: a new run
])
def test_failure_run(since, last, now, expected):
    hours = lambda h: None if h is None else datetime(2026, 1, 1, tzinfo=timezone.utc) + h * HOUR  # noqa: E731
    assert recording.failure_run(hours(since), hours(last), hours(now)) == hours(expected)


def test_should_disable_only_after_more_than_three_days():
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert not recording.should_disable(start, start + timedelta(days=3))
    assert recording.should_disable(start, start + timedelta(days=3, seconds=1))
    assert not recording.should_disable(None, start)


def _deliveries(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT state, attempt_count, next_attempt_at FROM webhook_deliveries ORDER BY id")
        return cur.fetchall()


def _attempt_times(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT attempt, attempted_at, succeeded, status_code, error FROM webhook_attempts ORDER BY id")
        return cur.fetchall()


def _change_status(conn, sid, status):
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = %s WHERE id = %s", (status, sid))


def test_whole_schedule_then_abandoned(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/status/500"))
    clock = Clock(datetime.now(timezone.utc).replace(microsecond=0))
    start = clock.now
    _change_status(conn, sid, "validated")
    expected_offsets = [timedelta(0)]
    for delay in recording.SCHEDULE[1:]:
        expected_offsets.append(expected_offsets[-1] + delay)
    for number, offset in enumerate(expected_offsets, start=1):
        if number > 1:
            clock.now = start + offset - timedelta(seconds=1)
            run_pass(settings, clock)
            assert len(receiver.requests) == number - 1, "nothing is sent before it is due"
            clock.now = start + offset
        run_pass(settings, clock)
        assert len(receiver.requests) == number
    attempts = _attempt_times(conn)
    assert [a["attempt"] for a in attempts] == list(range(1, 9))
    assert [a["attempted_at"] - start for a in attempts] == expected_offsets
    assert all(a["status_code"] == 500 and a["error"] == "HTTP 500" for a in attempts)
    assert _deliveries(conn) == [{"state": "failed", "attempt_count": 8, "next_attempt_at": None}]
    clock.advance(days=5)
    run_pass(settings, clock)
    assert len(receiver.requests) == 8


def test_success_on_a_retry_stops_the_schedule(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"))
    receiver.force_status = 503
    clock = Clock(datetime.now(timezone.utc))
    _change_status(conn, sid, "validated")
    run_pass(settings, clock)
    receiver.force_status = None
    clock.advance(minutes=1)
    run_pass(settings, clock)
    clock.advance(days=2)
    run_pass(settings, clock)
    assert len(receiver.requests) == 2
    assert _deliveries(conn)[0]["state"] == "succeeded"


def test_retention_deletes_attempts_older_than_30_days(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"))
    _change_status(conn, sid, "validated")
    clock = Clock(datetime.now(timezone.utc))
    run_pass(settings, clock)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO webhook_attempts (delivery_id, endpoint_id, event_id, attempt, reason, "
                    "attempted_at, duration_ms, succeeded, state) SELECT id, endpoint_id, event_id, 1, 'scheduled', "
                    "%s, 5, true, 'succeeded' FROM webhook_deliveries", (clock.now - timedelta(days=30, seconds=1),))
        cur.execute("SELECT count(*) FROM webhook_attempts")
        assert cur.fetchone()["count"] == 2
    run_pass(settings, clock)
    with conn.cursor() as cur:
        cur.execute("SELECT attempted_at FROM webhook_attempts")
        assert [r["attempted_at"] > clock.now - timedelta(days=1) for r in cur.fetchall()] == [True]
    clock.advance(days=30, seconds=1)
    run_pass(settings, clock)
    with conn.cursor() as cur:
        cur.execute("SELECT (SELECT count(*) FROM webhook_attempts) AS attempts, "
                    "(SELECT count(*) FROM events) AS events")
        assert cur.fetchone() == {"attempts": 0, "events": 0}
