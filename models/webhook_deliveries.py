"""Webhook deliveries: claiming due work under a lease, recording attempts, endpoint health."""
from dataclasses import dataclass

import psycopg2.extras


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery leased to this process, with what sending it needs (claim_due, create_claimed)."""

    id: int
    event_id: int
    endpoint_id: int
    reason: str
    attempt: int             # the number of the attempt about to be made, from 1
    max_attempts: int
    lease_token: str         # finish_deliveries writes the outcome only while the row still holds it
    url: str
    secret: str
    type: str
    body: str

    @classmethod
    def from_row(cls, row):
        """The record of one row returned by _CLAIM_SQL or _CREATE_CLAIMED_SQL (the same columns)."""
        return cls(id=row["id"], event_id=row["event_id"], endpoint_id=row["endpoint_id"], reason=row["reason"],
                   attempt=row["attempt"], max_attempts=row["max_attempts"], lease_token=row["lease_token"],
                   url=row["url"], secret=row["secret"], type=row["type"], body=row["body"])


# claim_due: up to `free` due deliveries per enabled endpoint (a slow endpoint never takes
# every worker), locked with SKIP LOCKED and leased by pushing next_attempt_at forward:
# a pass that dies leaves work that becomes due again when the lease runs out.
_CLAIM_SQL = """
WITH free AS (
  SELECT e.id AS endpoint_id, coalesce(s.free, %(default_free)s) AS free
    FROM webhook_endpoints e
    LEFT JOIN unnest(%(busy_ids)s::bigint[], %(busy_free)s::int[]) AS s (endpoint_id, free)
           ON s.endpoint_id = e.id
   WHERE e.enabled
), picked AS (
  SELECT d.id
    FROM free f
   CROSS JOIN LATERAL (
     SELECT d.id FROM webhook_deliveries d
      WHERE d.endpoint_id = f.endpoint_id AND d.state = 'pending' AND d.next_attempt_at <= %(now)s
      ORDER BY d.next_attempt_at, d.id
      LIMIT f.free
        FOR UPDATE SKIP LOCKED) d
   WHERE f.free > 0
   LIMIT %(limit)s
)
UPDATE webhook_deliveries d
   SET next_attempt_at = %(lease_until)s, lease_token = %(token)s
  FROM picked p, events ev, webhook_endpoints e
 WHERE d.id = p.id AND ev.id = d.event_id AND e.id = d.endpoint_id
RETURNING d.id, d.event_id, d.endpoint_id, d.reason, d.attempt_count + 1 AS attempt, d.max_attempts,
          d.lease_token, e.url, e.secret, ev.type, ev.body
"""

# create_claimed: a delivery born leased to the caller (test events and resends are sent at once).
_CREATE_CLAIMED_SQL = """
INSERT INTO webhook_deliveries AS d (event_id, endpoint_id, reason, max_attempts, next_attempt_at, lease_token)
VALUES (%(event_id)s, %(endpoint_id)s, %(reason)s, %(max_attempts)s, %(lease_until)s, %(token)s)
ON CONFLICT (event_id, endpoint_id) DO UPDATE
   SET reason = EXCLUDED.reason, state = 'pending', attempt_count = 0, max_attempts = EXCLUDED.max_attempts,
       next_attempt_at = EXCLUDED.next_attempt_at, lease_token = EXCLUDED.lease_token,
       last_status_code = NULL, last_error = NULL, finished_at = NULL
RETURNING d.id, d.event_id, d.endpoint_id, d.reason, 1 AS attempt, d.max_attempts, d.lease_token,
          (SELECT e.url FROM webhook_endpoints e WHERE e.id = d.endpoint_id) AS url,
          (SELECT e.secret FROM webhook_endpoints e WHERE e.id = d.endpoint_id) AS secret,
          (SELECT ev.type FROM events ev WHERE ev.id = d.event_id) AS type,
          (SELECT ev.body FROM events ev WHERE ev.id = d.event_id) AS body
"""

# finish_deliveries: guarded by the lease we hold; a row whose lease another pass took is left alone.
_FINISH_SQL = """
UPDATE webhook_deliveries AS d
   SET attempt_count = v.attempt, state = v.state, next_attempt_at = v.next_attempt_at, lease_token = NULL,
       last_status_code = v.status_code, last_error = v.error, finished_at = v.finished_at
  FROM (VALUES %s) AS v (id, token, attempt, state, next_attempt_at, status_code, error, finished_at)
 WHERE d.id = v.id AND d.lease_token = v.token
RETURNING d.id
"""

_INSERT_ATTEMPTS_SQL = """
INSERT INTO webhook_attempts (delivery_id, endpoint_id, event_id, attempt, reason, attempted_at, duration_ms,
                              succeeded, status_code, error, response_body, address)
VALUES %s
"""


def claim_due(conn, now, lease_until, token, busy, default_free, limit):
    """Lease due deliveries (ClaimedDelivery records); `busy` maps endpoint id -> free slots of busy endpoints."""
    with conn.cursor() as cur:
        cur.execute(_CLAIM_SQL, {"now": now, "lease_until": lease_until, "token": token,
                                 "busy_ids": list(busy), "busy_free": list(busy.values()),
                                 "default_free": default_free, "limit": limit})
        return [ClaimedDelivery.from_row(row) for row in cur.fetchall()]


def create_claimed(conn, event_id, endpoint_id, reason, max_attempts, lease_until, token):
    """Create (or restart) an event's delivery to an endpoint, already leased to the caller; a ClaimedDelivery."""
    with conn.cursor() as cur:
        cur.execute(_CREATE_CLAIMED_SQL, {"event_id": event_id, "endpoint_id": endpoint_id, "reason": reason,
                                          "max_attempts": max_attempts, "lease_until": lease_until,
                                          "token": token})
        return ClaimedDelivery.from_row(cur.fetchone())


def lock_endpoints(conn, endpoint_ids):
    """Lock endpoints (in id order, so concurrent passes never deadlock) and return their health fields."""
    with conn.cursor() as cur:
        # lock_endpoints: failure accounting reads and writes these under the lock.
        cur.execute("""
            SELECT id, organization_id, enabled, failing_since, last_failure_at FROM webhook_endpoints
             WHERE id = ANY (%(ids)s) ORDER BY id FOR UPDATE""", {"ids": list(endpoint_ids)})
        return {row["id"]: row for row in cur.fetchall()}


def finish_deliveries(conn, rows):
    """Apply outcomes (tuples in _FINISH_SQL's order); returns the ids whose lease was still ours."""
    if not rows:
        return set()
    with conn.cursor() as cur:
        found = psycopg2.extras.execute_values(
            cur, _FINISH_SQL, rows, page_size=1000, fetch=True,
            template="(%s::bigint, %s::uuid, %s::int, %s, %s::timestamptz, %s::int, %s, %s::timestamptz)")
        return {row["id"] for row in found}


def insert_attempts(conn, rows):
    """Record attempts (tuples in _INSERT_ATTEMPTS_SQL's column order)."""
    if rows:
        with conn.cursor() as cur:
            psycopg2.extras.execute_values(cur, _INSERT_ATTEMPTS_SQL, rows, page_size=1000)


def update_endpoint_health(conn, endpoint_id, failing_since, last_failure_at):
    """Store an endpoint's failure run (a run that ended or started afresh may be warned about again)."""
    with conn.cursor() as cur:
        # update_endpoint_health
        cur.execute("""
            UPDATE webhook_endpoints
               SET failing_since = %(failing_since)s, last_failure_at = %(last_failure_at)s,
                   failure_warned_at = CASE WHEN failing_since IS NOT DISTINCT FROM %(failing_since)s
                                            THEN failure_warned_at END
             WHERE id = %(id)s""", {"id": endpoint_id, "failing_since": failing_since,
                                    "last_failure_at": last_failure_at})


def end_failure_runs(conn, endpoint_ids):
    """A success ends the endpoints' failure runs (writes only rows that had one)."""
    if endpoint_ids:
        with conn.cursor() as cur:
            # end_failure_runs
            cur.execute("""
                UPDATE webhook_endpoints SET failing_since = NULL, failure_warned_at = NULL
                 WHERE id = ANY (%(ids)s) AND failing_since IS NOT NULL""", {"ids": list(endpoint_ids)})


def claim_unnotified(conn):
    """Lock endpoints disabled by the 3-day rule whose admins were not yet e-mailed."""
    with conn.cursor() as cur:
        # claim_unnotified: the e-mail is an outbox too; SKIP LOCKED so two passes never both send it.
        cur.execute("""
            SELECT e.id, e.organization_id, e.url, e.description, e.disabled_at, e.disabled_reason,
                   o.name AS organization_name, o.slug AS organization_slug
              FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id
             WHERE NOT e.enabled AND e.disabled_notified_at IS NULL
             ORDER BY e.id
               FOR UPDATE OF e SKIP LOCKED""")
        return cur.fetchall()


def mark_notified(conn, endpoint_id, at):
    """Record that the admins were e-mailed about a disabled endpoint."""
    with conn.cursor() as cur:
        # mark_notified
        cur.execute("UPDATE webhook_endpoints SET disabled_notified_at = %(at)s WHERE id = %(id)s",
                    {"id": endpoint_id, "at": at})


def claim_unwarned(conn, now, warn_after, gap):
    """Lock enabled endpoints failing for `warn_after` (a failure within `gap`) whose admins were not warned."""
    with conn.cursor() as cur:
        # claim_unwarned: the warning before the 3-day rule, an outbox like claim_unnotified.
        cur.execute("""
            SELECT e.id, e.organization_id, e.url, e.description, e.failing_since, e.last_failure_at,
                   o.name AS organization_name, o.slug AS organization_slug
              FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id
             WHERE e.enabled AND e.failure_warned_at IS NULL
               AND e.last_failure_at - e.failing_since >= %(warn_after)s
               AND e.last_failure_at > %(now)s - %(gap)s
             ORDER BY e.id
               FOR UPDATE OF e SKIP LOCKED""", {"now": now, "warn_after": warn_after, "gap": gap})
        return cur.fetchall()


def mark_warned(conn, endpoint_id, at):
    """Record that the admins were warned about the endpoint's current failure run."""
    with conn.cursor() as cur:
        # mark_warned
        cur.execute("UPDATE webhook_endpoints SET failure_warned_at = %(at)s WHERE id = %(id)s",
                    {"id": endpoint_id, "at": at})


# The one rule of "did not receive", used by `webhooks recover` (queue_missed) and GET /events
# (models.events, delivery_success): endpoint `e` is owed rendered event `ev` (same organization, subscribed
# to its type now, created no later than the event) and has no succeeded delivery of it.  Whether `e` must
# be enabled, and what a pending delivery means, is the caller's.
NOT_RECEIVED_SQL = """
     e.organization_id = ev.organization_id AND ev.type = ANY (e.event_types) AND ev.created_at >= e.created_at
 AND ev.state = 'rendered'
 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries received
                  WHERE received.event_id = ev.id AND received.endpoint_id = e.id AND received.state = 'succeeded')
"""

# queue_missed: `webhooks recover`.  Missed = not received (NOT_RECEIVED_SQL) with no delivery (the endpoint
# was disabled when it was fanned out) or one that ended failed or dropped; a pending one is still being
# tried and is left alone (the ON CONFLICT ... WHERE), so running recover twice queues nothing twice.
_QUEUE_MISSED_SQL = f"""
INSERT INTO webhook_deliveries AS d (event_id, endpoint_id, reason, next_attempt_at)
SELECT ev.id, e.id, 'resend', %(now)s
  FROM webhook_endpoints e
  JOIN events ev ON {NOT_RECEIVED_SQL}
 WHERE e.id = %(id)s AND ev.created_at >= %(since)s
 ORDER BY ev.id
ON CONFLICT (event_id, endpoint_id) DO UPDATE
   SET reason = EXCLUDED.reason, state = 'pending', attempt_count = 0,
       max_attempts = EXCLUDED.max_attempts, next_attempt_at = EXCLUDED.next_attempt_at,
       lease_token = NULL, last_status_code = NULL, last_error = NULL, finished_at = NULL
 WHERE d.state IN ('failed', 'dropped')
"""


def queue_missed(conn, endpoint_id, since, now):
    """Queue every rendered event since `since` the endpoint subscribes to and did not get; returns how many."""
    with conn.cursor() as cur:
        cur.execute(_QUEUE_MISSED_SQL, {"id": endpoint_id, "since": since, "now": now})
        return cur.rowcount


def delete_old_attempts(conn, before, limit=10000):
    """Delete up to `limit` attempts older than `before`; returns how many."""
    with conn.cursor() as cur:
        # retention: the attempt log keeps 30 days.
        cur.execute("""
            DELETE FROM webhook_attempts WHERE id IN (
              SELECT id FROM webhook_attempts WHERE attempted_at < %(before)s
               ORDER BY attempted_at LIMIT %(limit)s)""", {"before": before, "limit": limit})
        return cur.rowcount


def next_due_at(conn):
    """The earliest next_attempt_at of any waiting delivery to an enabled endpoint, or None."""
    with conn.cursor() as cur:
        # next_due_at: how long watch mode may sleep.
        cur.execute("""
            SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d
              JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
             WHERE d.state = 'pending'""")
        return cur.fetchone()["due"]
