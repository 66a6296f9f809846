-- Migration 22: rendering and claiming take turns between organizations, so that one organization's backlog
-- does not hold up another's webhooks. The render claim finds the organizations with events waiting, and each
-- one's oldest, in events_pending_organization_idx, which replaces events_pending_idx (events by id alone);
-- the claim's lock orders endpoints by their organization's requests in flight.
DROP INDEX IF EXISTS events_pending_idx;
-- delivery pass (models/events.py claim_unrendered): the organizations with events waiting to be rendered,
-- and each one's oldest
CREATE INDEX IF NOT EXISTS events_pending_organization_idx ON events (organization_id, id) WHERE state = 'pending';

-- The claim's lock: up to `lim` enabled endpoints with work due by `due_by` that no other claim is counting
-- right now, each locked for the caller's transaction. The endpoints of the organizations with the fewest
-- requests in flight come first, then the earliest due: an organization whose backlog holds every worker
-- (its endpoints' work is due earliest) would otherwise take each slot as it frees, while another's endpoint
-- waits for the whole backlog. The requests are counted here without the lock, for this order only. The
-- per-endpoint cap holds across processes because a claim counts an endpoint's leased rows only while
-- holding this lock, in a later statement, whose snapshot sees every claim committed before the lock was
-- granted. A try-lock: a busy endpoint is skipped, never waited for. VOLATILE (it takes locks): planned on its
-- own, never inlined.
CREATE OR REPLACE FUNCTION lock_claimable_endpoints(due_by timestamptz, lim integer, lock_space integer)
RETURNS SETOF bigint
LANGUAGE sql VOLATILE AS $$
  WITH due AS MATERIALIZED (
    SELECT e.id, e.organization_id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
                                      WHERE d.endpoint_id = e.id AND d.state = 'pending') AS due
      FROM webhook_endpoints e
     WHERE e.enabled
  ), waiting AS MATERIALIZED (
    SELECT w.id, w.organization_id, w.due,
           (SELECT count(*) FILTER (WHERE l.state = 'pending' AND l.next_attempt_at > lock_claimable_endpoints.due_by)
              FROM webhook_deliveries l
             WHERE l.endpoint_id = w.id AND l.lease_token IS NOT NULL) AS in_flight
      FROM due w
     WHERE w.due <= lock_claimable_endpoints.due_by
  ), candidates AS MATERIALIZED (
    SELECT id FROM waiting
     ORDER BY sum(in_flight) OVER (PARTITION BY organization_id), due, id
     LIMIT lock_claimable_endpoints.lim
  )
  SELECT id FROM candidates
   WHERE pg_try_advisory_xact_lock(lock_claimable_endpoints.lock_space, (id % 2147483647)::int)
$$;
