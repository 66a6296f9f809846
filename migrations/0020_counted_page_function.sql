-- Migration 20: the request's page and its count are one call of counted_shipment_page (schema.sql says what
-- it is), which returns the page as two arrays; token_organization, which the statement it replaces read the
-- principal with, goes.
DROP FUNCTION IF EXISTS token_organization(bytea);

-- The request's page and its token check and count, one call (models/shipments.py counted_page): the page of
-- shipment_page for the token's organization and version (the one asked for, else the organization's pin),
-- as the ids found and the MD5 of each one's current stored rendering (NULL: none), newest first, then the
-- rows of authenticate_and_count (one per bucket), each carrying that version and the page (NULL, and no page
-- read, without a valid token or a known version). The page is read first and the count last, so the count's
-- row locks are held only from the count to the commit right after it, not while the page is read and sent:
-- requests of one token or one address wait for each other only that long. The page is an EXECUTE, planned
-- for each call's values, as a statement of its own would be: shipment_page's `filter IS NULL OR` conditions
-- fold away only in a plan made for the values (a kept plan scans for any filter as if none were given).
-- PL/pgSQL, so the principal's and the count's plans are kept for the server session.
CREATE OR REPLACE FUNCTION counted_shipment_page(
  token_fingerprint bytea, client_address text, window_seconds integer, requested_version text, renderer text,
  page_size integer, shipment_id bigint, shipment_ids bigint[], archived boolean, statuses text[],
  created_after timestamptz, created_before timestamptz, eta_after timestamptz, eta_before timestamptz,
  starting_after bigint, label_ids bigint[])
RETURNS TABLE (bucket text, policy text, hits integer, window_start timestamptz, resets_in integer,
               token_id bigint, token_name text, scopes text[], expires_at timestamptz, user_email text,
               organization_id bigint, organization_name text, slug text, api_version text, page_version text,
               page_ids bigint[], page_md5s text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  asker_organization bigint;
  asker_version text;
  ids bigint[];
  md5s text[];
BEGIN
  SELECT p.organization_id, coalesce(requested_version, p.api_version) INTO asker_organization, asker_version
    FROM token_principal(token_fingerprint) p;
  IF asker_version IS NOT NULL THEN
    EXECUTE $page$
      SELECT coalesce(array_agg(p.id ORDER BY p.id DESC), '{}'), coalesce(array_agg(r.body_md5 ORDER BY p.id DESC), '{}')
        FROM shipment_page(organization_id => $1, page_size => $2, shipment_id => $3, shipment_ids => $4,
                           archived => $5, statuses => $6, created_after => $7, created_before => $8,
                           eta_after => $9, eta_before => $10, starting_after => $11, label_ids => $12) p
        -- LATERAL with LIMIT (never flattened into a join): each rendering found by its key.
        LEFT JOIN LATERAL (
          SELECT r.body_md5 FROM shipment_renderings r
           WHERE r.shipment_id = p.id AND r.resource = 'shipment' AND r.api_version = $13 AND r.renderer = $14
             AND r.revision = p.revision LIMIT 1) r ON true
    $page$ INTO ids, md5s
    USING asker_organization, page_size, shipment_id, shipment_ids, archived, statuses, created_after,
          created_before, eta_after, eta_before, starting_after, label_ids, asker_version, renderer;
  END IF;
  RETURN QUERY
  SELECT c.bucket, c.policy, c.hits, c.window_start, c.resets_in, c.token_id, c.token_name, c.scopes, c.expires_at,
         c.user_email, c.organization_id, c.organization_name, c.slug, c.api_version, asker_version, ids, md5s
    FROM authenticate_and_count(token_fingerprint, client_address, window_seconds) c;
END
$$;
