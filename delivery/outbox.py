"""The outbox's first step: render waiting events once and fan them out to the subscribed endpoints.

Event bodies: data.object rendered once by the API's own schemas (rendering/) at the organization's version
(`Renderer`). Used by the delivery loop (delivery/worker.py) and by `flask webhooks test` / `resend` /
`retry-render`, which render the events they need in their own transaction.
"""
import json
import logging

from models import alerts, db, events, shipments
from models.webhooks import CHECK_RESULT_KEYS, CHECK_SUMMARY_KEYS
from rendering import shipment_renderings, versions
from rendering.ids import PREFIXES, format_id
from rendering.present import dumps, present
from rendering.schemas.alerts import MonitoringAlertSchema
from rendering.schemas.fields import utc_timestamp
from rendering.schemas.shipments import ShipmentSchema

log = logging.getLogger("delivery")

RENDER_BATCH = 50


def render_pending(conn, now, limit=RENDER_BATCH, event_ids=None):
    """Render and fan out up to `limit` waiting events in the caller's transaction; returns how many."""
    claimed = events.claim_unrendered(conn, limit, event_ids)
    if not claimed:
        return 0
    with conn.cursor() as cur:
        # The bytes stored now are what every endpoint and every retry gets under this event's id:
        # this commit must survive a database crash, or the event is rendered again (other bytes,
        # same webhook-id) after a receiver may already have had the first ones.
        cur.execute("SET LOCAL synchronous_commit = on")
    renderer = Renderer(conn)
    try:
        renderer.prefetch(claimed)
    except (db.DatabaseUnavailable, db.Error):
        raise
    except Exception:  # a serialiser bug in one shipment: each event is rendered alone below, and fails alone
        log.exception("cannot render the batch's shipments together; rendering event by event")
        renderer = Renderer(conn)
    rendered = []
    for event in claimed:
        try:
            rendered.append((event.id, *renderer.render(event), None))
        except (db.DatabaseUnavailable, db.Error):
            raise  # the database's trouble (a lost connection), not the event's
        except Exception as error:  # recorded as render_failed, listed and retried by the CLI
            # A serialiser bug must not stall every later event, nor drop this one silently.
            named = format_id(PREFIXES["webhook_event"], event.id)
            log.exception("cannot render event event_id=%s type=%s; render_failed", named, event.type,
                          extra={"event_id": named})
            rendered.append((event.id, None, None, f"{type(error).__name__}: {error}"[:2000]))
    events.store_rendered(conn, rendered, now)
    return len(claimed)


# Events whose data.object is not a shipment.
_NOT_SHIPMENTS = ("alert.created", "webhook.test")


class Renderer:
    """Renders a batch of events; a shipment changed twice in one batch is read once."""

    def __init__(self, conn):
        self.conn = conn
        self._shipments = {}

    def prefetch(self, events):
        """Read every shipment the events show, per organization and version, in a few statements.

        A shipment whose stored rendering is current (what GET /shipments/{id} serves,
        docs/rendering.md) is taken as stored; the others are read together and rendered here. They
        are not stored: this transaction is not one snapshot, and the API stores its own.
        """
        wanted = {}
        for event in events:
            if event.type not in _NOT_SHIPMENTS:
                version = event.organization_version or versions.LATEST
                wanted.setdefault((event.organization_id, version), set()).add(event.shipment_id)
        for (organization_id, version), numbers in wanted.items():
            stored = shipment_renderings.page(self.conn, organization_id, version, len(numbers),
                                              shipment_ids=sorted(numbers))
            made = shipment_renderings.render_missing(self.conn, organization_id, version, stored)
            found = shipment_renderings.bodies_by_id(stored, made)
            for number in numbers:
                # Absent: hidden or gone, as get_shipment would say.
                body = found.get(number)
                self._shipments[(organization_id, number, version)] = None if body is None else json.loads(body)

    def shipment(self, organization_id, shipment_id, version):
        """The shipment as GET /shipments/{id} shows it at `version`, or None when hidden or gone."""
        key = (organization_id, shipment_id, version)
        if key not in self._shipments:
            found = shipments.get_shipment(self.conn, organization_id, shipment_id)
            self._shipments[key] = None if found is None else present("shipment", ShipmentSchema, found, version)
        return self._shipments[key]

    def alert(self, organization_id, alert_id, version):
        """The alert as GET /alerts lists it at `version`, or None."""
        found = alerts.get_alert(self.conn, organization_id, alert_id)
        return None if found is None else present("monitoring_alert", MonitoringAlertSchema, found, version)

    def data_object(self, event, version):
        """data.object of an event, or None when its subject may not be sent."""
        if event.type == "alert.created":
            return self.alert(event.organization_id, event.alert_id, version)
        if event.type == "webhook.test":
            return test_object(event.endpoint_id)
        return self.shipment(event.organization_id, event.shipment_id, version)

    def render(self, event):
        """(body, api_version) of a models.events.PendingEvent; body None means skip."""
        version = event.organization_version or versions.LATEST
        obj = self.data_object(event, version)
        if obj is None:
            return None, version
        data = {"object": obj, "previous_attributes": event.previous_attributes}
        checks = (event.data_extra or {}).get("checks")
        if checks is not None:
            data["checks"] = {
                "summary": {key: checks["summary"][key] for key in CHECK_SUMMARY_KEYS},
                "results": [{key: result[key] for key in CHECK_RESULT_KEYS} for result in checks["results"]],
            }
        return dumps(envelope(event.id, event.type, event.created_at, version, data)), version


def envelope(event_id, event_type, created_at, version, data):
    """The event body's top level."""
    return {"id": format_id(PREFIXES["webhook_event"], event_id), "type": event_type,
            "created_at": utc_timestamp(created_at), "api_version": version, "data": data}


def test_object(endpoint_id):
    """data.object of webhook.test: names the endpoint; no shipment is involved."""
    return {"object": "webhook_test", "endpoint_id": format_id(PREFIXES["webhook_endpoint"], endpoint_id),
            "message": "Test event sent from the webhook settings."}
