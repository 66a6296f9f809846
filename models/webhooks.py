"""Webhook endpoints: the settings an organization's admins manage."""
import psycopg2

from models.db import execute, execute_all, execute_one

EVENT_TYPES = ("shipment.status_changed", "shipment.eta_changed", "shipment.checks_completed", "alert.created")
MAX_ENDPOINTS = 5
# What an event body carries of a finished check run (events.data_extra holds more).
CHECK_SUMMARY_KEYS = ("total", "passed", "failed", "warnings", "skipped", "pending")
CHECK_RESULT_KEYS = ("check_type", "key", "status")

# create_endpoint: the trigger webhook_endpoints_limit enforces the 5-endpoint rule.
_CREATE_ENDPOINT_SQL = """
INSERT INTO webhook_endpoints AS e (organization_id, url, description, event_types, secret)
VALUES (%(organization_id)s, %(url)s, %(description)s, %(event_types)s, %(secret)s)
RETURNING e.id, e.organization_id, e.url, e.description, e.event_types, e.secret, e.enabled,
          e.disabled_at, e.disabled_reason, e.disabled_notified_at, e.failing_since,
          e.last_failure_at, e.failure_warned_at, e.created_at, e.updated_at
"""

# list_endpoints: the settings page.  last_success walks the attempt log newest first
# (webhook_attempts_endpoint_idx), so it sees the 30 days retention keeps; tests never count.
_LIST_ENDPOINTS_SQL = """
SELECT e.id, e.organization_id, e.url, e.description, e.event_types, e.secret, e.enabled,
       e.disabled_at, e.disabled_reason, e.disabled_notified_at, e.failing_since,
       e.last_failure_at, e.failure_warned_at, e.created_at, e.updated_at,
       (SELECT count(*) FROM webhook_deliveries d
         WHERE d.endpoint_id = e.id AND d.state = 'pending') AS waiting,
       (SELECT a.attempted_at FROM webhook_attempts a
         WHERE a.endpoint_id = e.id AND a.succeeded AND a.reason <> 'test'
         ORDER BY a.id DESC LIMIT 1) AS last_success
  FROM webhook_endpoints e
 WHERE e.organization_id = %(organization_id)s
 ORDER BY e.id
"""

# get_endpoint: one endpoint by id, whatever its organization (the caller checks the actor's rights).
_GET_ENDPOINT_SQL = """
SELECT e.id, e.organization_id, e.url, e.description, e.event_types, e.secret, e.enabled,
       e.disabled_at, e.disabled_reason, e.disabled_notified_at, e.failing_since,
       e.last_failure_at, e.failure_warned_at, e.created_at, e.updated_at
  FROM webhook_endpoints e
 WHERE e.id = %(id)s
"""

# set_secret: `webhooks roll-secret`; the old secret stops working at once.
_SET_SECRET_SQL = "UPDATE webhook_endpoints SET secret = %(secret)s, updated_at = now() WHERE id = %(id)s"

# enable_endpoint: its failure count starts afresh.
_ENABLE_ENDPOINT_SQL = """
UPDATE webhook_endpoints
   SET enabled = true, disabled_at = NULL, disabled_reason = NULL, disabled_notified_at = NULL,
       failing_since = NULL, last_failure_at = NULL, failure_warned_at = NULL, updated_at = now()
 WHERE id = %(id)s
"""

# disable_endpoint: an admin's choice (notified_at = at) or the 3-day rule (notified later).
_DISABLE_ENDPOINT_SQL = """
UPDATE webhook_endpoints
   SET enabled = false, disabled_at = %(at)s, disabled_reason = %(reason)s,
       disabled_notified_at = %(notified_at)s, updated_at = %(at)s
 WHERE id = %(id)s
"""

# drop_waiting: a disabled endpoint gets none of its backlog later.  An attempt a dead pass left
# in flight is closed as interrupted (no claim will do it now); a live pass still records its outcome.
_DROP_WAITING_SQL = """
WITH dropped AS (
  UPDATE webhook_deliveries
     SET state = 'dropped', next_attempt_at = NULL, lease_token = NULL, finished_at = %(at)s
   WHERE endpoint_id = %(id)s AND state = 'pending'
  RETURNING id
), interrupted AS (
  UPDATE webhook_attempts a SET state = 'interrupted'
    FROM dropped d
   WHERE a.delivery_id = d.id AND a.state = 'in_flight' AND a.attempted_at < %(at)s - interval '15 seconds'
)
SELECT count(*) AS dropped FROM dropped
"""

# remove_endpoint: deliveries and attempts go with it (ON DELETE CASCADE).
_REMOVE_ENDPOINT_SQL = "DELETE FROM webhook_endpoints WHERE id = %(id)s"

# admin_emails: who hears about a disabled endpoint.
_ADMIN_EMAILS_SQL = """
SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.organization_id = %(organization_id)s AND m.removed_at IS NULL
   AND m.role IN ('admin', 'owner')
 ORDER BY u.email
"""

# list_attempts: `webhooks attempts`.
_LIST_ATTEMPTS_SQL = """
SELECT a.id, a.attempted_at, a.event_id, ev.type, a.attempt, a.reason, a.succeeded, a.state,
       a.status_code, a.duration_ms, a.error, a.address, a.response_body, d.state AS delivery_state,
       d.next_attempt_at
  FROM webhook_attempts a
  JOIN events ev ON ev.id = a.event_id
  JOIN webhook_deliveries d ON d.id = a.delivery_id
 WHERE a.endpoint_id = %(id)s
 ORDER BY a.id DESC
 LIMIT %(limit)s
"""


class EndpointLimitReached(Exception):
    """The organization already has the most endpoints allowed."""


def create_endpoint(conn, organization_id, url, event_types, description, secret):
    """Add an endpoint (enabled); raises EndpointLimitReached past 5 per organization."""
    try:
        return execute_one(conn, _CREATE_ENDPOINT_SQL, {"organization_id": organization_id, "url": url,
                                                        "description": description,
                                                        "event_types": list(event_types), "secret": secret})
    except psycopg2.errors.CheckViolation as error:
        if error.diag.constraint_name == "webhook_endpoints_limit":
            raise EndpointLimitReached(f"an organization has at most {MAX_ENDPOINTS} webhook endpoints") from None
        raise


def list_endpoints(conn, organization_id):
    """An organization's endpoints, oldest first, with their waiting deliveries and latest success."""
    return execute_all(conn, _LIST_ENDPOINTS_SQL, {"organization_id": organization_id})


def get_endpoint(conn, endpoint_id):
    """One endpoint by id, or None."""
    return execute_one(conn, _GET_ENDPOINT_SQL, {"id": endpoint_id})


def set_secret(conn, endpoint_id, secret):
    """Replace the signing secret; the old one stops working at once."""
    execute(conn, _SET_SECRET_SQL, {"id": endpoint_id, "secret": secret})


def enable_endpoint(conn, endpoint_id):
    """Enable an endpoint; its failure count starts afresh."""
    execute(conn, _ENABLE_ENDPOINT_SQL, {"id": endpoint_id})


def disable_endpoint(conn, endpoint_id, at, reason, notified_at=None):
    """Disable an endpoint and drop its waiting deliveries; returns how many were dropped."""
    execute(conn, _DISABLE_ENDPOINT_SQL, {"id": endpoint_id, "at": at, "reason": reason, "notified_at": notified_at})
    return drop_waiting(conn, endpoint_id, at)


def drop_waiting(conn, endpoint_id, at):
    """Drop an endpoint's waiting deliveries; returns how many."""
    return execute_one(conn, _DROP_WAITING_SQL, {"id": endpoint_id, "at": at})["dropped"]


def remove_endpoint(conn, endpoint_id):
    """Delete an endpoint with its deliveries and attempt log."""
    execute(conn, _REMOVE_ENDPOINT_SQL, {"id": endpoint_id})


def admin_emails(conn, organization_id):
    """E-mail addresses of the organization's current admins and owners."""
    return [row["email"] for row in execute_all(conn, _ADMIN_EMAILS_SQL, {"organization_id": organization_id})]


def list_attempts(conn, endpoint_id, limit=50):
    """An endpoint's latest attempts, newest first."""
    return execute_all(conn, _LIST_ATTEMPTS_SQL, {"id": endpoint_id, "limit": limit})
