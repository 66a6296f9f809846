"""The delivery script renders a batch of events in a few statements, taking stored renderings when current."""
import json
from datetime import datetime, timezone

from delivery.outbox import render_pending
from delivery.outbox import Renderer
from models import db
from models.events import PendingEvent
from tests.support.counting import CountingCursor
from tests.support.factories import auth, insert, make_container, make_org, make_shipment, make_token


def event_for(org, shipment, number=1, kind="shipment.status_changed"):
    return PendingEvent(id=number, organization_id=org, type=kind, shipment_id=shipment, alert_id=None,
                        check_run_id=None, endpoint_id=None, previous_attributes={"status": "draft"}, data_extra={},
                        created_at=datetime(2026, 11, 23, tzinfo=timezone.utc), organization_version=None)


def shipment_with_parts(conn, org):
    shipment = make_shipment(conn, org)
    make_container(conn, shipment)
    insert(conn, "checks", organization_id=org, shipment_id=shipment, key="k", category="c", title="t")
    return shipment


def statements_to_render(database_url, events_wanted):
    """Statements render_pending runs for a batch of waiting events (one status change per shipment)."""
    conn = db.connect(db.Target(database_url, cursor_factory=CountingCursor))
    try:
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET status = 'validated' WHERE id IN (SELECT id FROM shipments "
                        "ORDER BY id LIMIT %s)", (events_wanted,))
        conn.commit()
        conn.statements = 0
        assert render_pending(conn, datetime.now(timezone.utc)) == events_wanted
        conn.commit()
        return conn.statements
    finally:
        conn.close()


def test_a_batch_costs_the_same_statements_for_1_or_20_shipments(conn, database_url):
    org = make_org(conn, "acme")
    for _ in range(21):
        shipment_with_parts(conn, org)
    one = statements_to_render(database_url, 1)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'draft'")
        cur.execute("DELETE FROM events")
    twenty = statements_to_render(database_url, 20)
    assert one == twenty


def test_data_object_is_the_same_bytes_with_or_without_a_stored_rendering(conn, client):
    org = make_org(conn, "acme")
    token = make_token(conn, org)
    shipment = shipment_with_parts(conn, org)
    hidden = make_shipment(conn, org, awaiting_approval=True)
    events = [event_for(org, shipment), event_for(org, hidden, 2)]

    def rendered(prefetch):
        renderer = Renderer(conn)
        if prefetch:
            renderer.prefetch(events)
        return [renderer.render(event) for event in events]

    alone = rendered(prefetch=False)                     # get_shipment, one event at a time
    assert alone[1] == (None, "2026-10-01")              # a hidden shipment is never sent
    assert rendered(prefetch=True) == alone              # rendered together, nothing stored yet
    api = client.get(f"/shipments/shp_{shipment}", headers=auth(token))   # the API stores its rendering
    assert rendered(prefetch=True) == alone              # taken as stored: the same bytes
    assert json.loads(alone[0][0])["data"]["object"] == api.json


def test_a_current_stored_rendering_is_what_the_webhook_carries(conn, client):
    org = make_org(conn, "acme")
    token = make_token(conn, org)
    shipment = make_shipment(conn, org, reference="S-1")
    client.get(f"/shipments/shp_{shipment}", headers=auth(token))
    with conn.cursor() as cur:           # changed behind the API's back, to show where the bytes come from
        cur.execute("UPDATE shipment_renderings SET body = replace(body, 'S-1', 'S-STORED')")
    renderer = Renderer(conn)
    renderer.prefetch([event_for(org, shipment)])
    body, _version = renderer.render(event_for(org, shipment))
    assert json.loads(body)["data"]["object"]["reference"] == "S-STORED"
    # Once the shipment changes, the stored rendering is no longer current and is not used.
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET notes = 'n' WHERE id = %s", (shipment,))
    renderer = Renderer(conn)
    renderer.prefetch([event_for(org, shipment)])
    assert json.loads(renderer.render(event_for(org, shipment))[0])["data"]["object"]["reference"] == "S-1"
