"""The webhook outbox: events written by triggers, rendered once, fanned out to endpoints."""
from dataclasses import dataclass
from datetime import datetime

from models.db import execute, execute_all, execute_one


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event waiting for its body, as claim_unrendered reads it (with its organization's pinned version)."""

    id: int
    organization_id: int
    type: str
    shipment_id: int | None
    alert_id: int | None
    check_run_id: int | None
    endpoint_id: int | None
    previous_attributes: dict | None
    data_extra: dict | None
    created_at: datetime
    organization_version: str | None

    @classmethod
    def from_row(cls, row):
        """The record of one row of _CLAIM_UNRENDERED_SQL."""
        return cls(id=row["id"], organization_id=row["organization_id"], type=row["type"],
                   shipment_id=row["shipment_id"], alert_id=row["alert_id"], check_run_id=row["check_run_id"],
                   endpoint_id=row["endpoint_id"], previous_attributes=row["previous_attributes"],
                   data_extra=row["data_extra"], created_at=row["created_at"],
                   organization_version=row["organization_version"])


# claim_unrendered: events waiting for their body, taken in turns between organizations, so that one
# organization's backlog never holds up another's events: each organization waiting (found by a skip scan of
# events_pending_organization_idx, a probe per organization) offers its oldest pending events numbered 1, 2, ...,
# and a batch takes the first turn of every organization, oldest first, before anyone's second.  An organization
# alone fills the batch.  Each offers four batches' worth: past the rows another pass holds (SKIP LOCKED),
# overlapping passes take the next ones.  Rows are locked as the batch takes them, never more.
_CLAIM_UNRENDERED_SQL = """
WITH RECURSIVE waiting (organization_id) AS (
  SELECT min(organization_id) FROM events WHERE state = 'pending'
  UNION ALL
  SELECT (SELECT min(ev.organization_id) FROM events ev
           WHERE ev.state = 'pending' AND ev.organization_id > w.organization_id)
    FROM waiting w WHERE w.organization_id IS NOT NULL
)
SELECT ev.id, ev.organization_id, ev.type, ev.shipment_id, ev.alert_id, ev.check_run_id, ev.endpoint_id,
       ev.previous_attributes, ev.data_extra, ev.created_at, o.api_version AS organization_version
  FROM waiting w
 CROSS JOIN LATERAL unnest(ARRAY(
         SELECT p.id FROM events p
          WHERE p.organization_id = w.organization_id AND p.state = 'pending'
            AND (%(ids)s::bigint[] IS NULL OR p.id = ANY (%(ids)s::bigint[]))
          ORDER BY p.id
          LIMIT %(limit)s * 4)) WITH ORDINALITY AS t (id, turn)
  JOIN events ev ON ev.id = t.id
  JOIN organizations o ON o.id = ev.organization_id
 WHERE ev.state = 'pending'
 ORDER BY t.turn, t.id
 LIMIT %(limit)s
   FOR UPDATE OF ev SKIP LOCKED
"""

# store_rendered: the exact bytes every endpoint and every retry will get (or why there are none).
_STORE_SQL = """
UPDATE events AS ev
   SET state = v.state, body = v.body, api_version = v.api_version, rendered_at = %(now)s,
       render_error = v.render_error
  FROM unnest(%(ids)s::bigint[], %(states)s::text[], %(bodies)s::text[], %(api_versions)s::text[],
              %(errors)s::text[]) AS v (id, state, body, api_version, render_error)
 WHERE ev.id = v.id
"""

# fan_out: one delivery per enabled endpoint of the organization subscribed to the type,
# for endpoints that existed when the event happened.
_FAN_OUT_SQL = """
INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at)
SELECT ev.id, e.id, %(now)s
  FROM events ev
  JOIN webhook_endpoints e
    ON e.organization_id = ev.organization_id AND e.enabled
   AND ev.type = ANY (e.event_types) AND e.created_at <= ev.created_at
 WHERE ev.id = ANY (%(ids)s) AND ev.state = 'rendered' AND ev.type <> 'webhook.test'
ON CONFLICT (event_id, endpoint_id) DO NOTHING
"""


# list_render_failures: `webhooks render-failures`, served by events_render_failed_idx.
_LIST_RENDER_FAILURES_SQL = """
SELECT ev.id, ev.organization_id, o.slug AS organization, ev.type, ev.shipment_id, ev.alert_id,
       ev.created_at, ev.rendered_at AS failed_at, ev.render_error
  FROM events ev JOIN organizations o ON o.id = ev.organization_id
 WHERE ev.state = 'render_failed'
   AND (%(organization_id)s::bigint IS NULL OR ev.organization_id = %(organization_id)s)
 ORDER BY ev.id
 LIMIT %(limit)s
"""

# retry_render_failures: `webhooks retry-render`; the error stays until the next render replaces it.
_RETRY_RENDER_FAILURES_SQL = """
UPDATE events SET state = 'pending'
 WHERE state = 'render_failed'
   AND (%(ids)s::bigint[] IS NULL OR id = ANY (%(ids)s::bigint[]))
   AND (%(organization_id)s::bigint IS NULL OR organization_id = %(organization_id)s)
RETURNING id
"""

# create_test_event: only the CLI's `webhooks test` writes this type.
_CREATE_TEST_EVENT_SQL = """
INSERT INTO events (organization_id, type, endpoint_id)
VALUES (%(organization_id)s, 'webhook.test', %(endpoint_id)s)
RETURNING id, created_at
"""

# get_event: resend.
_GET_EVENT_SQL = """
SELECT id, organization_id, type, state, body, api_version, created_at, render_error
  FROM events WHERE id = %(id)s
"""

# subscribed_endpoints: resend without --endpoint.
_SUBSCRIBED_ENDPOINTS_SQL = """
SELECT id FROM webhook_endpoints
 WHERE organization_id = %(organization_id)s AND enabled AND %(type)s = ANY (event_types)
 ORDER BY id
"""

# retention: old events go with their deliveries and attempts, unless a delivery still waits.
_DELETE_OLD_EVENTS_SQL = """
DELETE FROM events WHERE id IN (
  SELECT ev.id FROM events ev
   WHERE ev.created_at < %(before)s
     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                      WHERE d.event_id = ev.id AND d.state = 'pending')
   ORDER BY ev.created_at LIMIT %(limit)s)
"""


def claim_unrendered(conn, limit, event_ids=None):
    """Lock up to `limit` waiting events, in turns between organizations (only `event_ids` if given); PendingEvents."""
    return [PendingEvent.from_row(row)
            for row in execute_all(conn, _CLAIM_UNRENDERED_SQL, {"limit": limit, "ids": event_ids})]


def store_rendered(conn, rendered, now):
    """Store outcomes ((id, body, api_version, error) tuples) and fan out; returns deliveries made.

    A body makes the event `rendered`; an error (the serialiser raised) `render_failed`; neither
    (the subject is hidden or gone) `skipped`.
    """
    if not rendered:
        return 0
    ids, bodies, versions, errors = (list(column) for column in zip(*rendered))
    execute(conn, _STORE_SQL, {
        "ids": ids, "bodies": bodies, "api_versions": versions, "now": now,
        "states": ["rendered" if body is not None else "render_failed" if error else "skipped"
                   for body, error in zip(bodies, errors)],
        "errors": [None if body is not None else error for body, error in zip(bodies, errors)]})
    return execute(conn, _FAN_OUT_SQL, {"ids": [i for i, body in zip(ids, bodies) if body is not None], "now": now})


def list_render_failures(conn, organization_id=None, limit=50):
    """Events the serialiser could not render, oldest first (all organizations unless one is given)."""
    return execute_all(conn, _LIST_RENDER_FAILURES_SQL, {"organization_id": organization_id, "limit": limit})


def retry_render_failures(conn, event_ids=None, organization_id=None):
    """Make failed renders pending again (only `event_ids` when given); returns the ids, locked for the caller."""
    rows = execute_all(conn, _RETRY_RENDER_FAILURES_SQL, {"ids": event_ids, "organization_id": organization_id})
    return sorted(row["id"] for row in rows)


def create_test_event(conn, organization_id, endpoint_id):
    """A pending webhook.test event for one endpoint; returns its id and created_at."""
    return execute_one(conn, _CREATE_TEST_EVENT_SQL,
                       {"organization_id": organization_id, "endpoint_id": endpoint_id})


def get_event(conn, event_id):
    """One event with its state and body, or None."""
    return execute_one(conn, _GET_EVENT_SQL, {"id": event_id})


def subscribed_endpoints(conn, organization_id, event_type):
    """Ids of the organization's enabled endpoints subscribed to `event_type`."""
    rows = execute_all(conn, _SUBSCRIBED_ENDPOINTS_SQL, {"organization_id": organization_id, "type": event_type})
    return [row["id"] for row in rows]


def delete_old_events(conn, before, limit=5000):
    """Delete up to `limit` events created before `before` with nothing left to deliver; returns how many."""
    return execute(conn, _DELETE_OLD_EVENTS_SQL, {"before": before, "limit": limit})


# list_history / get_from_history: GET /events.  Rendered events of the last 30 days (a pending event's bytes
# do not exist yet; skipped ones are never sent; webhook.test goes to one endpoint and is not history), of
# shipments the API shows the organization (not one since moved to another), newest first (keyset on id).
# Served by events_history_idx, or events_shipment_idx with the shipment filter.  Time bounds compare at the
# second, as list_shipments does.  delivery_success: whether no enabled endpoint is still owed the event
# (endpoints_not_received, schema.sql).
_HISTORY_SQL = """
SELECT ev.id, ev.body
  FROM events ev
  JOIN shipments s ON s.id = ev.shipment_id
 WHERE ev.organization_id = %(organization_id)s
   AND ev.state = 'rendered' AND ev.type <> 'webhook.test'
   AND ev.created_at >= now() - interval '30 days'
   AND visible_to(s, ev.organization_id)
   AND (%(event_id)s::bigint IS NULL OR ev.id = %(event_id)s)
   AND (%(types)s::text[] IS NULL OR ev.type = ANY (%(types)s::text[]))
   AND (%(shipment_id)s::bigint IS NULL OR ev.shipment_id = %(shipment_id)s)
   AND (%(created_after)s::timestamptz IS NULL
        OR ev.created_at >= date_trunc('second', %(created_after)s::timestamptz + interval '0.999999 s', 'UTC'))
   AND (%(created_before)s::timestamptz IS NULL
        OR ev.created_at < date_trunc('second', %(created_before)s::timestamptz, 'UTC') + interval '1 s')
   AND (%(delivery_success)s::boolean IS NULL OR %(delivery_success)s = NOT EXISTS (
          SELECT 1 FROM endpoints_not_received(ev.id, ev.organization_id, ev.type, ev.created_at, ev.state) e
           WHERE e.enabled))
   AND (%(starting_after)s::bigint IS NULL OR ev.id < %(starting_after)s)
 ORDER BY ev.id DESC
 LIMIT %(limit)s
"""

# list_history's starting_after: an id inside the jump of a history's sequences (schema.sql, "Histories"), which
# only the line the database left can have handed out.
_SKIPPED_SQL = "SELECT EXISTS (SELECT 1 FROM histories WHERE skipped_event_ids @> %(id)s::bigint) AS skipped"


class EventOfAnotherHistory(Exception):
    """starting_after names an event id only another history of the database can have handed out."""


def list_history(conn, organization_id, limit, *, event_id=None, types=None, shipment_id=None, created_after=None,
                 created_before=None, delivery_success=None, starting_after=None):
    """Up to `limit` listed events (rows of id and body), newest first; a filter left None is not applied.

    Raises EventOfAnotherHistory for a starting_after given before a failover or a restore that lost it."""
    if starting_after is not None and execute_one(conn, _SKIPPED_SQL, {"id": starting_after})["skipped"]:
        raise EventOfAnotherHistory(starting_after)
    params = {"organization_id": organization_id, "limit": limit, "event_id": event_id, "types": types,
              "shipment_id": shipment_id, "created_after": created_after, "created_before": created_before,
              "delivery_success": delivery_success, "starting_after": starting_after}
    return execute_all(conn, _HISTORY_SQL, params)


def get_from_history(conn, organization_id, event_id):
    """One listed event (id and body), or None when GET /events would not list it."""
    found = list_history(conn, organization_id, 1, event_id=event_id)
    return found[0] if found else None
