-- Migration 17: two delivery rules written out in several statements become functions the statements call
-- (schema.sql says what each is): "not received" (`webhooks recover`, GET /events) and the claim's
-- per-endpoint lock (the claim, and the tests that take the lock alone).

-- The one rule of "did not receive" (`webhooks recover`, GET /events' delivery_success): the endpoints owed
-- rendered event `ev` (same organization, subscribed to its type now, created no later than the event) with
-- no succeeded delivery of it. Whether one must be enabled, and what a pending delivery means, is the
-- caller's. Inlined into the statement that calls it (LANGUAGE sql, STABLE, one SELECT), so its plan is
-- the plan of the rule written out.
-- The event comes as its columns, not as a row: a row argument stays a whole-row value in the inlined
-- statement. Called LATERAL beside the events, it is inlined but stays a subquery run per event (PostgreSQL
-- does not pull up a lateral subquery whose NOT EXISTS refers to the outer row): callers narrow the events
-- first (by organization: events_organization_idx).
CREATE OR REPLACE FUNCTION endpoints_not_received(
  event_id bigint, organization_id bigint, event_type text, created_at timestamptz, event_state text)
RETURNS SETOF webhook_endpoints
LANGUAGE sql STABLE AS $$
  SELECT e.*
    FROM webhook_endpoints e
   WHERE e.organization_id = endpoints_not_received.organization_id
     AND endpoints_not_received.event_type = ANY (e.event_types)
     AND endpoints_not_received.created_at >= e.created_at
     AND endpoints_not_received.event_state = 'rendered'
     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries received
                      WHERE received.event_id = endpoints_not_received.event_id AND received.endpoint_id = e.id
                        AND received.state = 'succeeded')
$$;

-- The claim's lock: up to `lim` enabled endpoints with work due by `due_by` that no other claim is counting
-- right now, earliest due first, each locked for the caller's transaction. The per-endpoint cap holds across
-- processes because a claim counts an endpoint's leased rows only while holding this lock, in a later
-- statement, whose snapshot sees every claim committed before the lock was granted. A try-lock: a busy
-- endpoint is skipped, never waited for. VOLATILE (it takes locks): planned on its own, never inlined.
CREATE OR REPLACE FUNCTION lock_claimable_endpoints(due_by timestamptz, lim integer, lock_space integer)
RETURNS SETOF bigint
LANGUAGE sql VOLATILE AS $$
  WITH due AS MATERIALIZED (
    SELECT e.id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
                   WHERE d.endpoint_id = e.id AND d.state = 'pending') AS due
      FROM webhook_endpoints e
     WHERE e.enabled
  ), candidates AS MATERIALIZED (
    SELECT id FROM due WHERE due <= lock_claimable_endpoints.due_by ORDER BY due, id
     LIMIT lock_claimable_endpoints.lim
  )
  SELECT id FROM candidates
   WHERE pg_try_advisory_xact_lock(lock_claimable_endpoints.lock_space, (id % 2147483647)::int)
$$;
