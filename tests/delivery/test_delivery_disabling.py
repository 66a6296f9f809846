"""Disabling after more than 3 days of failures, its counting rules, and the e-mails to the admins."""
import email
import email.policy
import logging
from datetime import datetime, timedelta, timezone

import pytest

from delivery.secret_key import UNUSABLE, SecretKeys
from models import webhooks
from tests.support.factories import make_org, make_shipment
from tests.support.webhooks import TEST_SECRET_KEY, Clock, add_endpoint, run_pass

STATUSES = ("validated", "in_transit", "arrived", "in_warehouse", "draft")


@pytest.fixture
def world(conn, receiver, settings, smtp_server):
    """An organization with one failing endpoint, a shipment to change, and a clock."""
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    endpoint = add_endpoint(conn, org, receiver.url("/ok"))
    receiver.force_status = 500
    settings.smtp_host, settings.smtp_port = "127.0.0.1", smtp_server["port"]
    clock = Clock(datetime.now(timezone.utc).replace(microsecond=0))
    return {"conn": conn, "sid": sid, "endpoint": endpoint, "clock": clock, "start": clock.now,
            "settings": settings, "changes": 0}


def _next_due(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT min(next_attempt_at) AS due FROM webhook_deliveries WHERE state = 'pending'")
        return cur.fetchone()["due"]


def drive(world, hours):
    """Run a pass at every due time until start + `hours`."""
    until = world["start"] + timedelta(hours=hours)
    while True:
        due = _next_due(world["conn"])
        if due is None or due > until:
            break
        world["clock"].now = max(world["clock"].now, due)
        run_pass(world["settings"], world["clock"])
    world["clock"].now = until


def event_at(world, hours):
    """A new status change at start + `hours`, delivered at once."""
    drive(world, hours)
    world["changes"] += 1
    with world["conn"].cursor() as cur:
        cur.execute("UPDATE shipments SET status = %s WHERE id = %s",
                    (STATUSES[world["changes"] % len(STATUSES)], world["sid"]))
    run_pass(world["settings"], world["clock"])


def endpoint(world):
    return webhooks.get_endpoint(world["conn"], world["endpoint"]["id"])


def test_disabled_after_more_than_three_days_and_admins_emailed(world, smtp_server):
    for hours in (0, 20, 44, 68):
        event_at(world, hours)
    drive(world, 75.5)
    assert endpoint(world)["enabled"] and [_subject(m) for m in smtp_server["messages"]] == [
        f"Webhook endpoint whe_{world['endpoint']['id']} is failing and will be disabled"]
    drive(world, 76)  # the 68 h event's fifth attempt fails at 75 h 36 min: 3 days and 36 min of failures
    found = endpoint(world)
    assert not found["enabled"]
    assert found["disabled_at"] == world["start"] + timedelta(hours=75, minutes=36)
    assert found["failing_since"] == world["start"]
    with world["conn"].cursor() as cur:
        cur.execute("SELECT state, count(*) FROM webhook_deliveries GROUP BY state ORDER BY state")
        assert {r["state"]: r["count"] for r in cur.fetchall()} == {"dropped": 1, "failed": 3}
    (_warning, message) = smtp_server["messages"]
    assert sorted(message["to"]) == ["admin@acme.example", "owner@acme.example"]
    assert f"whe_{found['id']}" in message["content"] and found["url"] in message["content"]
    assert "Subject: Webhook endpoint whe_" in message["content"]

    drive(world, 200)
    run_pass(world["settings"], world["clock"])
    assert len(smtp_server["messages"]) == 2, "the admins are told once"


def test_nothing_is_sent_to_a_disabled_endpoint_until_enabled(world, receiver):
    for hours in (0, 20, 44, 68):
        event_at(world, hours)
    drive(world, 80)
    assert not endpoint(world)["enabled"]
    before = len(receiver.requests)
    event_at(world, 81)
    assert len(receiver.requests) == before
    webhooks.enable_endpoint(world["conn"], world["endpoint"]["id"])
    receiver.force_status = None
    event_at(world, 82)
    assert len(receiver.requests) == before + 1
    assert receiver.requests[-1]["headers"]["webhook-id"] == "msg_6"
    assert endpoint(world)["failing_since"] is None


def test_a_success_restarts_the_count(world, receiver):
    for hours in (0, 20, 44):
        event_at(world, hours)
    drive(world, 50)
    receiver.force_status = None
    event_at(world, 50)  # delivered: the run of failures ends
    receiver.force_status = 500
    for hours in (51, 70, 94, 118):
        event_at(world, hours)
    drive(world, 122)
    assert endpoint(world)["enabled"]
    assert endpoint(world)["failing_since"] == world["start"] + timedelta(hours=51)


def test_a_day_without_failures_restarts_the_count(world):
    event_at(world, 0)        # its retries fail until 27 h 36 min
    for hours in (52, 70, 94, 118):
        event_at(world, hours)
    drive(world, 123)
    assert endpoint(world)["enabled"]
    assert endpoint(world)["failing_since"] == world["start"] + timedelta(hours=52)


def _subject(message):
    return email.message_from_string(message["content"], policy=email.policy.default)["Subject"]


def _warning(world, failing_since):
    """The exact text of the 24-hour warning for a failure run started at `failing_since`."""
    endpoint_id, url = f"whe_{world['endpoint']['id']}", world["endpoint"]["url"]
    return (f"Deliveries to the webhook endpoint {endpoint_id} of Acme have failed since "
            f"{failing_since:%Y-%m-%d %H:%M} UTC.\n"
            f"If they keep failing, it will be disabled at the first failed delivery after "
            f"{failing_since + timedelta(days=3):%Y-%m-%d %H:%M} UTC, and its waiting deliveries will be dropped. "
            f"One successful delivery ends the count.\n\n"
            f"URL: {url}\n\n"
            f"See its recent attempts with:\n"
            f"  flask --app app webhooks attempts {endpoint_id}\n")


def _bodies(smtp_server):
    parsed = [email.message_from_string(m["content"], policy=email.policy.default) for m in smtp_server["messages"]]
    return [(m["Subject"], m.get_content().replace("\r\n", "\n")) for m in parsed]


def test_warned_once_after_24_hours_and_again_in_a_new_run(world, smtp_server, receiver):
    event_at(world, 0)         # retries fail until 27 h 36 min
    event_at(world, 20)        # retries fail until 47 h 36 min
    drive(world, 27.5)
    assert smtp_server["messages"] == [], "23 h 36 min of failures so far"
    drive(world, 27.7)
    subject = f"Webhook endpoint whe_{world['endpoint']['id']} is failing and will be disabled"
    assert _bodies(smtp_server) == [(subject, _warning(world, world["start"]))]
    assert sorted(smtp_server["messages"][0]["to"]) == ["admin@acme.example", "owner@acme.example"]
    drive(world, 48)
    assert len(smtp_server["messages"]) == 1, "once per failure run"

    receiver.force_status = None
    event_at(world, 50)        # a success ends the run
    assert endpoint(world)["failure_warned_at"] is None
    receiver.force_status = 500
    event_at(world, 51)
    event_at(world, 71)
    drive(world, 78.5)
    assert len(smtp_server["messages"]) == 1
    drive(world, 79)           # the 51 h event fails again at 78 h 36 min
    assert _bodies(smtp_server)[1] == (subject, _warning(world, world["start"] + timedelta(hours=51)))
    assert endpoint(world)["enabled"]


def test_a_day_without_failures_warns_again(world, smtp_server):
    event_at(world, 0)
    drive(world, 28)
    assert len(smtp_server["messages"]) == 1
    event_at(world, 52)        # more than a day after the last failure: a new run
    drive(world, 80)
    assert [body for _s, body in _bodies(smtp_server)] == [
        _warning(world, world["start"]), _warning(world, world["start"] + timedelta(hours=52))]


def test_warning_logged_without_smtp(world, smtp_server, caplog):
    world["settings"].smtp_host = None
    event_at(world, 0)
    with caplog.at_level(logging.WARNING, logger="delivery"):
        drive(world, 28)
    assert smtp_server["messages"] == [] and endpoint(world)["failure_warned_at"] is None
    assert (f"endpoint failing for 24 hours but SHIPTRACK_SMTP_HOST is not set; admins not e-mailed "
            f"endpoint_id=whe_{world['endpoint']['id']}") in caplog.messages


@pytest.mark.parametrize("secret", ["whsec_A", "whsec_ab!c"])
def test_a_secret_that_signs_nothing_fails_each_attempt_disables_and_tells_the_admins(world, receiver, smtp_server,
                                                                                      secret):
    # Stored sealed: the database's rule (is_webhook_secret) cannot see inside, so only the sender meets it.
    with world["conn"].cursor() as cur:
        cur.execute("UPDATE webhook_endpoints SET secret = %s WHERE id = %s",
                    (SecretKeys([TEST_SECRET_KEY]).seal(secret), world["endpoint"]["id"]))
    for hours in (0, 20, 44, 68):
        event_at(world, hours)
    drive(world, 76)
    found = endpoint(world)
    assert (found["enabled"], found["failing_since"]) == (False, world["start"])
    assert [_subject(message) for message in smtp_server["messages"]] == [
        f"Webhook endpoint whe_{found['id']} is failing and will be disabled",
        f"Webhook endpoint whe_{found['id']} was disabled"]
    assert receiver.requests == []
    with world["conn"].cursor() as cur:
        cur.execute("SELECT state, status_code, error, count(*) FROM webhook_attempts GROUP BY 1, 2, 3")
        assert cur.fetchall() == [{"state": "failed", "status_code": None, "error": UNUSABLE, "count": 30}]
