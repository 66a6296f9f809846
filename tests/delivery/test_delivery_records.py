"""Rows the delivery code passes around are frozen records built by one `from_row` each."""
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from delivery.outbox import render_pending
from models import events, webhook_deliveries
from models.events import PendingEvent
from models.webhook_deliveries import ClaimedDelivery
from tests.support.factories import make_org, make_shipment
from tests.support.webhooks import add_endpoint


@pytest.fixture
def changed(conn):
    """An organization with one endpoint and a shipment whose status changed: (org id, shipment id, endpoint)."""
    org = make_org(conn, "acme")
    endpoint = add_endpoint(conn, org, "https://hooks.example/in")
    sid = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    return org, sid, endpoint


def test_pending_event(conn, changed):
    org, sid, _endpoint = changed
    (event,) = events.claim_unrendered(conn, 10)
    assert isinstance(event, PendingEvent)
    assert (event.id, event.organization_id, event.type, event.shipment_id) == (
        1, org, "shipment.status_changed", sid)
    assert event.previous_attributes == {"status": "draft"} and event.organization_version is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.type = "alert.created"


def test_claimed_and_created_deliveries_are_the_same_record(conn, changed):
    _org, _sid, endpoint = changed
    now = datetime.now(timezone.utc)
    render_pending(conn, now)
    (claimed,) = webhook_deliveries.claim_due(conn, now, now + timedelta(minutes=5), str(uuid.uuid4()), 4, 10)
    assert isinstance(claimed, ClaimedDelivery)
    assert (claimed.event_id, claimed.endpoint_id, claimed.reason, claimed.attempt, claimed.max_attempts) == (
        1, endpoint["id"], "scheduled", 1, 8)
    assert (claimed.url, claimed.secret, claimed.type) == (endpoint["url"], endpoint["secret"],
                                                           "shipment.status_changed")
    assert claimed.body.startswith('{"id":"msg_1","type":"shipment.status_changed"')
    token = str(uuid.uuid4())
    created = webhook_deliveries.create_claimed(conn, 1, endpoint["id"], "resend", 8, now, token, now)
    assert created == dataclasses.replace(claimed, reason="resend", lease_token=token,
                                          attempt_id=claimed.attempt_id + 1)
    with conn.cursor() as cur:
        cur.execute("SELECT id, attempt, state FROM webhook_attempts ORDER BY id")
        assert cur.fetchall() == [{"id": claimed.attempt_id, "attempt": 1, "state": "interrupted"},
                                  {"id": created.attempt_id, "attempt": 1, "state": "in_flight"}]


def test_from_row_needs_every_column():
    row = {field.name: None for field in dataclasses.fields(ClaimedDelivery)}
    assert ClaimedDelivery.from_row(row) == ClaimedDelivery(**row)
    del row["body"]
    with pytest.raises(KeyError):
        ClaimedDelivery.from_row(row)
