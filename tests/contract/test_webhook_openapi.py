"""The `webhooks` section of /openapi.json: every event type, valid OpenAPI 3.1, and real bodies match it."""
import json
from datetime import datetime, timezone

import jsonschema
import referencing
from openapi_spec_validator import validate

from api.openapi import build_spec
from delivery.outbox import render_pending
from delivery.outbox import Renderer
from models.events import PendingEvent
from tests.support.factories import make_org, make_shipment


def _without_enums(node):
    """Enum lists document known values only (clients accept new ones), so they are not checked here."""
    if isinstance(node, dict):
        return {k: _without_enums(v) for k, v in node.items() if k != "enum"}
    if isinstance(node, list):
        return [_without_enums(v) for v in node]
    return node


def _validator(document, event_type):
    document = _without_enums(document)
    schema = document["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"]["schema"]
    resource = referencing.Resource.from_contents(document, default_specification=referencing.jsonschema.DRAFT202012)
    registry = referencing.Registry().with_resource("urn:openapi", resource)
    rooted = json.loads(json.dumps(schema).replace('"#/components', '"urn:openapi#/components'))
    return jsonschema.Draft202012Validator(rooted, registry=registry)


def test_every_event_type_is_described(app):
    document = build_spec(app)
    validate(document)
    assert sorted(document["webhooks"]) == sorted(["shipment.status_changed", "shipment.eta_changed",
                                                   "shipment.checks_completed", "alert.created", "webhook.test"])
    post = document["webhooks"]["shipment.status_changed"]["post"]
    assert [p["name"] for p in post["parameters"]] == ["webhook-id", "webhook-timestamp", "webhook-signature",
                                                       "User-Agent"]


def test_rendered_bodies_match_the_description(app, conn):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org, eta="2026-11-01T00:00:00Z")
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit', eta = '2026-11-02T00:00:00Z' WHERE id = %s", (sid,))
        cur.execute("INSERT INTO check_runs (organization_id, shipment_id, finished_at) VALUES (%s, %s, now())",
                    (org, sid))
    conn.autocommit = False
    render_pending(conn, datetime.now(timezone.utc))
    conn.commit()
    document = build_spec(app)
    with conn.cursor() as cur:
        cur.execute("SELECT type, body FROM events ORDER BY id")
        rows = cur.fetchall()
    assert len(rows) == 3
    for row in rows:
        _validator(document, row["type"]).validate(json.loads(row["body"]))
    test_body = Renderer(conn).render(PendingEvent(
        id=9, organization_id=org, type="webhook.test", shipment_id=None, alert_id=None, check_run_id=None,
        endpoint_id=1, previous_attributes=None, data_extra={}, created_at=datetime.now(timezone.utc),
        organization_version=None))[0]
    _validator(document, "webhook.test").validate(json.loads(test_body))
