"""Webhook endpoint health: the failure run the delivery records, and the e-mails to admins about it (outboxes)."""
from models.db import execute, execute_all

# update_endpoint_health: a run that ended or started afresh may be warned about again.
_UPDATE_ENDPOINT_HEALTH_SQL = """
UPDATE webhook_endpoints
   SET failing_since = %(failing_since)s, last_failure_at = %(last_failure_at)s,
       failure_warned_at = CASE WHEN failing_since IS NOT DISTINCT FROM %(failing_since)s
                                THEN failure_warned_at END
 WHERE id = %(id)s
"""

# claim_unnotified: the e-mail is an outbox too; SKIP LOCKED so two passes never both send it.
_CLAIM_UNNOTIFIED_SQL = """
SELECT e.id, e.organization_id, e.url, e.description, e.disabled_at, e.disabled_reason,
       o.name AS organization_name, o.slug AS organization_slug
  FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id
 WHERE NOT e.enabled AND e.disabled_notified_at IS NULL
 ORDER BY e.id
   FOR UPDATE OF e SKIP LOCKED
"""

# mark_notified: the admins were e-mailed about a disabled endpoint.
_MARK_NOTIFIED_SQL = "UPDATE webhook_endpoints SET disabled_notified_at = %(at)s WHERE id = %(id)s"

# claim_unwarned: the warning before the 3-day rule, an outbox like claim_unnotified.
_CLAIM_UNWARNED_SQL = """
SELECT e.id, e.organization_id, e.url, e.description, e.failing_since, e.last_failure_at,
       o.name AS organization_name, o.slug AS organization_slug
  FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id
 WHERE e.enabled AND e.failure_warned_at IS NULL
   AND e.last_failure_at - e.failing_since >= %(warn_after)s
   AND e.last_failure_at > %(now)s - %(gap)s
 ORDER BY e.id
   FOR UPDATE OF e SKIP LOCKED
"""

# mark_warned: the admins were warned about the endpoint's current failure run.
_MARK_WARNED_SQL = "UPDATE webhook_endpoints SET failure_warned_at = %(at)s WHERE id = %(id)s"


def update_endpoint_health(conn, endpoint_id, failing_since, last_failure_at):
    """Store an endpoint's failure run (a run that ended or started afresh may be warned about again)."""
    execute(conn, _UPDATE_ENDPOINT_HEALTH_SQL, {"id": endpoint_id, "failing_since": failing_since,
                                                "last_failure_at": last_failure_at})


def claim_unnotified(conn):
    """Lock endpoints disabled by the 3-day rule whose admins were not yet e-mailed."""
    return execute_all(conn, _CLAIM_UNNOTIFIED_SQL)


def mark_notified(conn, endpoint_id, at):
    """Record that the admins were e-mailed about a disabled endpoint."""
    execute(conn, _MARK_NOTIFIED_SQL, {"id": endpoint_id, "at": at})


def claim_unwarned(conn, now, warn_after, gap):
    """Lock enabled endpoints failing for `warn_after` (a failure within `gap`) whose admins were not warned."""
    return execute_all(conn, _CLAIM_UNWARNED_SQL, {"now": now, "warn_after": warn_after, "gap": gap})


def mark_warned(conn, endpoint_id, at):
    """Record that the admins were warned about the endpoint's current failure run."""
    execute(conn, _MARK_WARNED_SQL, {"id": endpoint_id, "at": at})
