-- Migration 18: each stored rendering keeps the MD5 of its body, computed by the database when the body is
-- written (schema.sql), which the ETags of the stored resources are made of (the table is rewritten once);
-- token_organization, for the statement that reads a page with the request's count (schema.sql).
ALTER TABLE shipment_renderings ADD COLUMN body_md5 text GENERATED ALWAYS AS (md5(body)) STORED;

-- The organization and pinned version of a token fingerprint (token_principal's), for a statement that reads
-- a page for the token before counting it (models/shipments.py COUNTED_PAGE_SQL): PL/pgSQL, so that its
-- plan is kept for the server session as authenticate_and_count's is; STABLE, so it reads the snapshot of
-- the statement that calls it; ROWS 1, its most, so that the page's plan is costed as the index scan it is.
CREATE OR REPLACE FUNCTION token_organization(token_fingerprint bytea)
RETURNS TABLE (organization_id bigint, api_version text)
LANGUAGE plpgsql STABLE ROWS 1 AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY SELECT p.organization_id, p.api_version FROM token_principal(token_fingerprint) p;
END
$$;
