-- Migration 25: the claim of due deliveries is one function, claim_due_deliveries (schema.sql says what it
-- does), as procrastinate's fetch_job is: its two statements (the endpoints' locks, then the claim) pass the
-- locked endpoints in a variable, not through a transaction-local setting (shiptrack.claimable) between two
-- statements sent together.

CREATE OR REPLACE FUNCTION claim_due_deliveries(
  claimed_at timestamptz, lease_until timestamptz, token uuid, cap integer, lim integer, lock_space integer,
  holder integer)
RETURNS TABLE (id bigint, event_id bigint, endpoint_id bigint, reason text, attempt integer,
               max_attempts integer, lease_token uuid, attempt_id bigint, url text, secret text, type text,
               body text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  claimable bigint[] := ARRAY(SELECT l.id FROM lock_claimable_endpoints(claim_due_deliveries.claimed_at,
                                                                        claim_due_deliveries.lim,
                                                                        claim_due_deliveries.lock_space) AS l (id));
BEGIN
  RETURN QUERY
  WITH free AS (
    -- The FILTER keeps state and next_attempt_at out of the scan's conditions, so that it reads the few
    -- leased rows (webhook_deliveries_leased_idx), not every pending row due later (next_idx: an endpoint
    -- with thousands of retries waiting made each claim cost 10 ms of server CPU).
    SELECT f.endpoint_id, e.organization_id,
           claim_due_deliveries.cap - (
             SELECT count(*) FILTER (WHERE l.state = 'pending' AND l.next_attempt_at > claim_due_deliveries.claimed_at)
               FROM webhook_deliveries l
              WHERE l.endpoint_id = f.endpoint_id AND l.lease_token IS NOT NULL) AS free
      FROM unnest(claimable) AS f (endpoint_id)
      JOIN webhook_endpoints e ON e.id = f.endpoint_id
  ), picked AS (
    SELECT d.id
      FROM free f
     CROSS JOIN LATERAL (
       SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.endpoint_id = f.endpoint_id AND d.state = 'pending'
          AND d.next_attempt_at <= claim_due_deliveries.claimed_at
        ORDER BY d.next_attempt_at, d.id
        LIMIT f.free
          FOR UPDATE SKIP LOCKED) d
     WHERE f.free > 0
     ORDER BY row_number() OVER (PARTITION BY f.organization_id ORDER BY d.next_attempt_at, d.id),
              d.next_attempt_at, d.id
     LIMIT claim_due_deliveries.lim
  ), claimed AS (
    UPDATE webhook_deliveries d
       SET next_attempt_at = claim_due_deliveries.lease_until, lease_token = claim_due_deliveries.token,
           lease_holder = claim_due_deliveries.holder
     WHERE d.id = ANY (ARRAY(SELECT p.id FROM picked p))  -- by the primary key: a join read the whole table
    RETURNING d.*
  )
  SELECT * FROM start_attempts(ARRAY(SELECT c::webhook_deliveries FROM claimed c), claim_due_deliveries.claimed_at);
END
$$;
