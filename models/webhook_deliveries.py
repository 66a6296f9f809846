"""Webhook deliveries: claiming due work under a lease, recording attempts, recovery and retention."""
from dataclasses import dataclass

from models.db import execute, execute_all, execute_one


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A delivery leased to this process, with what sending it needs (claim_due, create_claimed)."""

    id: int
    event_id: int
    endpoint_id: int
    reason: str
    attempt: int             # the number of the attempt about to be made, from 1
    max_attempts: int
    lease_token: str         # finish writes the outcome only while the row still holds it
    attempt_id: int          # its webhook_attempts row, written in_flight with the claim
    url: str
    secret: str
    type: str
    body: str

    @classmethod
    def from_row(cls, row):
        """The record of one row of start_attempts (schema.sql), which claim_due and create_claimed return."""
        return cls(id=row["id"], event_id=row["event_id"], endpoint_id=row["endpoint_id"], reason=row["reason"],
                   attempt=row["attempt"], max_attempts=row["max_attempts"], lease_token=row["lease_token"],
                   attempt_id=row["attempt_id"], url=row["url"], secret=row["secret"], type=row["type"],
                   body=row["body"])


# Advisory-lock space of the per-endpoint cap (two-int4 keys: this, endpoint id); any constant will do.
CAP_LOCK_SPACE = 0x5745_4248
# Advisory-lock space of the lease holders (two-int4 keys: this, a holder's key): each delivery process holds
# a session lock on its key for its whole life, so the server itself says which holders are alive.
HOLDER_LOCK_SPACE = 0x5745_4249

# hold: a process's key (a new one from webhook_lease_holders, or the one it had before reconnecting) and
# whether this session now holds its lock.  A try-lock: after a reconnect the old session may not be gone
# yet, and while it lingers it keeps the process's leases alive for it.
_HOLD_SQL = """
SELECT k AS holder, pg_try_advisory_lock(%(space)s, k) AS held
  FROM (SELECT coalesce(%(holder)s::int, nextval('webhook_lease_holders')::int) AS k) h
"""

# free_orphaned: leases whose holder's lock no process holds (killed, or its session lost) are due again
# at once; a lease without a holder runs out by its time only.  The lease token is kept, so a holder
# that only lost its connection still records its outcome if no one claimed the delivery meanwhile.
_FREE_ORPHANED_SQL = """
UPDATE webhook_deliveries d SET next_attempt_at = %(now)s
 WHERE d.id = ANY (ARRAY(
   SELECT l.id FROM webhook_deliveries l
    WHERE l.lease_token IS NOT NULL AND l.lease_holder IS NOT NULL AND l.lease_holder IS DISTINCT FROM %(holder)s
      AND l.state = 'pending' AND l.next_attempt_at > %(now)s
      AND l.lease_holder <> ALL (ARRAY(
            SELECT k.objid::bigint FROM pg_locks k
             WHERE k.locktype = 'advisory' AND k.classid = %(space)s AND k.objsubid = 2 AND k.granted
               AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())))
      FOR UPDATE SKIP LOCKED))
"""

# claim_due: the function claim_due_deliveries (schema.sql), the claim in one statement: due deliveries leased
# in turns between organizations, at most `cap` in flight per endpoint in all processes, their attempts started.
_CLAIM_DUE_SQL = """
SELECT id, event_id, endpoint_id, reason, attempt, max_attempts, lease_token, attempt_id, url, secret, type, body
  FROM claim_due_deliveries(%(now)s, %(lease_until)s, %(token)s, %(cap)s, %(limit)s, %(space)s, %(holder)s)
"""

# create_claimed: a delivery born leased to the caller (test events and resends are sent at once),
# its attempt started as a claim's is (start_attempts, schema.sql).
_CREATE_CLAIMED_SQL = """
WITH claimed AS (
  INSERT INTO webhook_deliveries AS d (event_id, endpoint_id, reason, max_attempts, next_attempt_at, lease_token)
  VALUES (%(event_id)s, %(endpoint_id)s, %(reason)s, %(max_attempts)s, %(lease_until)s, %(token)s)
  ON CONFLICT (event_id, endpoint_id) DO UPDATE
     SET reason = EXCLUDED.reason, state = 'pending', attempt_count = 0, max_attempts = EXCLUDED.max_attempts,
         next_attempt_at = EXCLUDED.next_attempt_at, lease_token = EXCLUDED.lease_token, lease_holder = NULL,
         last_status_code = NULL, last_error = NULL, finished_at = NULL
  RETURNING d.*
)
SELECT * FROM start_attempts(ARRAY(SELECT c::webhook_deliveries FROM claimed c), %(now)s)
"""

# finish: every outcome of a turn in one statement.  The delivery update is guarded by the lease we hold
# (a row whose lease another pass took is left alone); its attempt row gets what the request really gave,
# even when the lease was lost meanwhile (the row may already say `interrupted`: now it is known);
# recording twice (a commit whose acknowledgement was lost) changes nothing the second time.  `runs`
# (successes end their endpoints' failure runs) is read first by the main update, so endpoint rows are
# locked before delivery rows, the order of every other writer (lock_endpoints, disable_endpoint).
_FINISH_SQL = """
WITH v AS (
  SELECT * FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(attempts)s::int[], %(states)s::text[],
                       %(next_attempt_at)s::timestamptz[], %(status_codes)s::int[], %(errors)s::text[],
                       %(finished_at)s::timestamptz[], %(attempt_ids)s::bigint[], %(attempted_at)s::timestamptz[],
                       %(durations)s::int[], %(succeeded)s::boolean[], %(bodies)s::text[], %(addresses)s::text[])
         AS v (id, token, attempt, state, next_attempt_at, status_code, error, finished_at, attempt_id,
               attempted_at, duration_ms, succeeded, response_body, address)
), runs AS (
  UPDATE webhook_endpoints SET failing_since = NULL, failure_warned_at = NULL
   WHERE id = ANY (%(end_runs)s::bigint[]) AND failing_since IS NOT NULL
  RETURNING id
), attempts AS (
  UPDATE webhook_attempts AS a
     SET attempted_at = v.attempted_at, duration_ms = v.duration_ms, succeeded = v.succeeded,
         state = CASE WHEN v.succeeded THEN 'succeeded' ELSE 'failed' END, status_code = v.status_code,
         error = v.error, response_body = v.response_body, address = v.address
    FROM v
   WHERE a.id = v.attempt_id AND a.state IN ('in_flight', 'interrupted')
)
UPDATE webhook_deliveries AS d
   SET attempt_count = v.attempt, state = v.state, next_attempt_at = v.next_attempt_at, lease_token = NULL,
       last_status_code = v.status_code, last_error = v.error, finished_at = v.finished_at
  FROM v
 WHERE d.id = v.id AND d.lease_token = v.token AND (SELECT count(*) FROM runs) >= 0
RETURNING d.id
"""

# lock_endpoints: failure accounting reads and writes these under the lock, taken in id order.
_LOCK_ENDPOINTS_SQL = """
SELECT id, organization_id, enabled, failing_since, last_failure_at FROM webhook_endpoints
 WHERE id = ANY (%(ids)s) ORDER BY id FOR UPDATE"""

# The columns of a finish row, in the order recording.record builds them.
FINISH_COLUMNS = ("ids", "tokens", "attempts", "states", "next_attempt_at", "status_codes", "errors",
                  "finished_at", "attempt_ids", "attempted_at", "durations", "succeeded", "bodies", "addresses")


def claim_due(conn, now, lease_until, token, cap, limit, holder=None):
    """Lease up to `limit` due deliveries (ClaimedDelivery records), at most `cap` in flight per endpoint.

    The cap counts every process's leases: claim_due_deliveries (schema.sql) counts them only once it holds
    its endpoints' locks, in a statement of its own.  `holder`: the caller's key (hold), or None (the lease
    runs out by its time).
    """
    rows = execute_all(conn, _CLAIM_DUE_SQL, {"now": now, "lease_until": lease_until, "token": token, "cap": cap,
                                              "limit": limit, "space": CAP_LOCK_SPACE, "holder": holder})
    return [ClaimedDelivery.from_row(row) for row in rows]


def hold(conn, holder=None):
    """Take the session lock of `holder` (None: a new key) on `conn`; returns (key, whether it is held now)."""
    row = execute_one(conn, _HOLD_SQL, {"holder": holder, "space": HOLDER_LOCK_SPACE})
    return row["holder"], row["held"]


def free_orphaned(conn, now, holder=None):
    """Make the leases of holders that are gone due at `now` (never `holder`'s own); returns how many."""
    return execute(conn, _FREE_ORPHANED_SQL, {"now": now, "holder": holder, "space": HOLDER_LOCK_SPACE})


def create_claimed(conn, event_id, endpoint_id, reason, max_attempts, lease_until, token, now):
    """Create (or restart) an event's delivery to an endpoint, already leased to the caller; a ClaimedDelivery."""
    return ClaimedDelivery.from_row(execute_one(conn, _CREATE_CLAIMED_SQL, {
        "event_id": event_id, "endpoint_id": endpoint_id, "reason": reason, "max_attempts": max_attempts,
        "lease_until": lease_until, "token": token, "now": now}))


def lock_endpoints(conn, endpoint_ids):
    """Lock endpoints (in id order, so concurrent passes never deadlock) and return their health fields."""
    return {row["id"]: row for row in execute_all(conn, _LOCK_ENDPOINTS_SQL, {"ids": list(endpoint_ids)})}


def finish(conn, rows, end_runs=()):
    """Apply a turn's outcomes (tuples in FINISH_COLUMNS order) and end the failure runs of `end_runs`.

    Returns the delivery ids whose lease was still ours.
    """
    if not rows:
        return set()
    params = dict(zip(FINISH_COLUMNS, (list(column) for column in zip(*rows))))
    return {row["id"] for row in execute_all(conn, _FINISH_SQL, {**params, "end_runs": list(end_runs)})}


# queue_missed: `webhooks recover`.  Missed = not received (endpoints_not_received, schema.sql) with no delivery
# (the endpoint was disabled when it was fanned out) or one that ended failed or dropped; a pending one is still
# being tried and is left alone (the ON CONFLICT ... WHERE), so running recover twice queues nothing twice.
_QUEUE_MISSED_SQL = """
INSERT INTO webhook_deliveries AS d (event_id, endpoint_id, reason, next_attempt_at)
SELECT ev.id, e.id, 'resend', %(now)s
  FROM webhook_endpoints e
  JOIN events ev ON ev.organization_id = e.organization_id  -- the endpoint's events (events_organization_idx)
 CROSS JOIN LATERAL endpoints_not_received(ev.id, ev.organization_id, ev.type, ev.created_at, ev.state) owed
 WHERE e.id = %(id)s AND owed.id = e.id AND ev.created_at >= %(since)s
 ORDER BY ev.id
ON CONFLICT (event_id, endpoint_id) DO UPDATE
   SET reason = EXCLUDED.reason, state = 'pending', attempt_count = 0,
       max_attempts = EXCLUDED.max_attempts, next_attempt_at = EXCLUDED.next_attempt_at,
       lease_token = NULL, last_status_code = NULL, last_error = NULL, finished_at = NULL
 WHERE d.state IN ('failed', 'dropped')
"""

# retention: the attempt log keeps 30 days; up to `limit` of the oldest at a time.
_DELETE_OLD_ATTEMPTS_SQL = """
DELETE FROM webhook_attempts WHERE id IN (
  SELECT id FROM webhook_attempts WHERE attempted_at < %(before)s
   ORDER BY attempted_at LIMIT %(limit)s)"""

# next_due_at: how long watch mode may sleep.
_NEXT_DUE_SQL = """
SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d
  JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
 WHERE d.state = 'pending'"""


def queue_missed(conn, endpoint_id, since, now):
    """Queue every rendered event since `since` the endpoint subscribes to and did not get; returns how many."""
    return execute(conn, _QUEUE_MISSED_SQL, {"id": endpoint_id, "since": since, "now": now})


def delete_old_attempts(conn, before, limit=10000):
    """Delete up to `limit` attempts older than `before`; returns how many."""
    return execute(conn, _DELETE_OLD_ATTEMPTS_SQL, {"before": before, "limit": limit})


def next_due_at(conn):
    """The earliest next_attempt_at of any waiting delivery to an enabled endpoint, or None."""
    return execute_one(conn, _NEXT_DUE_SQL)["due"]
