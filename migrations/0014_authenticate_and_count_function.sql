-- Migration 14: the request's first statement, the token check with its rate-limit count, becomes the
-- function authenticate_and_count (schema.sql says why), so that its plan is kept through a transaction
-- pooler too.
CREATE OR REPLACE FUNCTION authenticate_and_count(token_fingerprint bytea, client_address text, window_seconds integer)
RETURNS TABLE (bucket text, policy text, hits integer, window_start timestamptz, resets_in integer,
               token_id bigint, token_name text, scopes text[], expires_at timestamptz, user_email text,
               organization_id bigint, organization_name text, slug text, api_version text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH principal AS (
    SELECT t.id AS token_id, t.name AS token_name, t.scopes, t.expires_at, u.email AS user_email,
           o.id AS organization_id, o.name AS organization_name, o.slug, o.api_version
      FROM tokens t
      JOIN organizations o ON o.id = t.organization_id
      JOIN users u ON u.id = t.user_id
      JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
     WHERE t.fingerprint = token_fingerprint
       AND t.revoked_at IS NULL
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND m.removed_at IS NULL
  ),
  buckets AS (
    SELECT b.bucket, b.policy
      FROM principal p
     CROSS JOIN LATERAL (VALUES ('token:' || p.token_id, 'per_token'), ('ip:' || client_address, 'per_ip'))
           AS b (bucket, policy)
    UNION ALL
    SELECT 'anonymous:' || client_address, 'anonymous_per_ip' WHERE NOT EXISTS (SELECT 1 FROM principal)
  ),
  counted AS (
    INSERT INTO rate_limit_counters AS r (bucket, window_start, hits)
    SELECT b.bucket, to_timestamp(floor(extract(epoch FROM now()) / window_seconds) * window_seconds), 1
      FROM buckets b
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1
    RETURNING r.bucket, r.hits, r.window_start,
              ceil(extract(epoch FROM r.window_start + make_interval(secs => window_seconds) - now()))::int
                AS resets_in
  )
  SELECT c.bucket, b.policy, c.hits, c.window_start, c.resets_in, p.token_id, p.token_name, p.scopes,
         p.expires_at, p.user_email, p.organization_id, p.organization_name, p.slug, p.api_version
    FROM counted c JOIN buckets b ON b.bucket = c.bucket LEFT JOIN principal p ON true;
END
$$;
