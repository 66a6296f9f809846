-- Migration 27: the rule of an active token, written once as the function token_state (member_removed, revoked,
-- expired, active), which token_principal, the CLI's count of active tokens and `tokens list` call, and
-- PostgreSQL inlines into them.
-- A token's state, as `tokens list` shows it and as every check of an active token asks it: member_removed
-- (its user left the organization; the token is revoked with it), revoked, expired, else active. One
-- expression of the token's and its membership's columns, inlined into the caller's statement.
CREATE OR REPLACE FUNCTION token_state(t tokens, m memberships) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN m.removed_at IS NOT NULL THEN 'member_removed'
              WHEN t.revoked_at IS NOT NULL THEN 'revoked'
              WHEN t.expires_at IS NOT NULL AND t.expires_at <= now() THEN 'expired'
              ELSE 'active' END
$$;

-- The principal of a token fingerprint: the active token with it, its user (still a member) and
-- organization; no row for any other. The API keeps what it answers per process (models/principals.py).
CREATE OR REPLACE FUNCTION token_principal(token_fingerprint bytea)
RETURNS TABLE (token_id bigint, token_name text, scopes text[], expires_at timestamptz, user_email text,
               organization_id bigint, organization_name text, slug text, api_version text)
LANGUAGE sql STABLE AS $$
  SELECT t.id, t.name, t.scopes, t.expires_at, u.email, o.id, o.name, o.slug, o.api_version
    FROM tokens t
    JOIN organizations o ON o.id = t.organization_id
    JOIN users u ON u.id = t.user_id
    JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
   WHERE t.fingerprint = token_principal.token_fingerprint AND token_state(t, m) = 'active'
$$;
