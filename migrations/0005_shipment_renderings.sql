-- Migration 5: stored shipment renderings, served as bytes while current (issue 9, render once).

-- Each shipment's JSON as GET /shipments/{id} shows it, made once per revision, version and renderer
-- (a digest of the code that shapes it) and served as stored while all three still match
-- (models/shipments.py RENDERED_PAGE_SQL). Only this service writes it; deleting every row is harmless,
-- so it is UNLOGGED: storing costs no WAL and no flush at commit, and a crash only empties it.
CREATE UNLOGGED TABLE IF NOT EXISTS shipment_renderings (
  shipment_id bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE,
  api_version text NOT NULL,
  renderer    text NOT NULL,
  revision    bigint NOT NULL,
  body        text NOT NULL,
  rendered_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (shipment_id, api_version)
);
