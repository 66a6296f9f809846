-- Migration 19: the claim of due work and the CLI's leased deliveries (test events, resends) start their
-- attempts through one function (schema.sql says what it is) instead of each writing the same two steps.

-- The one rule of starting an attempt, for every way a delivery is leased (the claim of due work; the
-- CLI's test events and resends): the row a dead pass left in flight is closed as `interrupted`, then each
-- delivery's attempt row is written `in_flight`, before its request. Returns what sending each one needs, by
-- delivery id. The deliveries come as the rows their caller's statement wrote (RETURNING d.*), not read here:
-- a function cannot rely on seeing what the statement that calls it writes. VOLATILE (it writes): planned
-- on its own, never inlined.
CREATE OR REPLACE FUNCTION start_attempts(leased webhook_deliveries[], started_at timestamptz)
RETURNS TABLE (id bigint, event_id bigint, endpoint_id bigint, reason text, attempt integer,
               max_attempts integer, lease_token uuid, attempt_id bigint, url text, secret text, type text,
               body text)
LANGUAGE sql VOLATILE AS $$
  UPDATE webhook_attempts a SET state = 'interrupted'
   WHERE a.delivery_id = ANY (ARRAY(SELECT (d).id FROM unnest(start_attempts.leased) AS d))
     AND a.state = 'in_flight';
  WITH started AS (
    INSERT INTO webhook_attempts (delivery_id, endpoint_id, event_id, attempt, reason, attempted_at, succeeded,
                                  state)
    SELECT d.id, d.endpoint_id, d.event_id, d.attempt_count + 1, d.reason, start_attempts.started_at, false,
           'in_flight'
      FROM unnest(start_attempts.leased) AS d
    RETURNING webhook_attempts.id, webhook_attempts.delivery_id
  )
  SELECT d.id, d.event_id, d.endpoint_id, d.reason, d.attempt_count + 1, d.max_attempts, d.lease_token,
         s.id, e.url, e.secret, ev.type, ev.body
    FROM unnest(start_attempts.leased) AS d
    JOIN started s ON s.delivery_id = d.id
    JOIN events ev ON ev.id = d.event_id
    JOIN webhook_endpoints e ON e.id = d.endpoint_id
   ORDER BY d.id;
$$;
