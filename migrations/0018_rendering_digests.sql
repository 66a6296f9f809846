-- Migration 18: each stored rendering keeps the MD5 of its body, computed by the database when the body is
-- written (schema.sql), which the ETags of the stored resources are made of. The table is rewritten once.
ALTER TABLE shipment_renderings ADD COLUMN body_md5 text GENERATED ALWAYS AS (md5(body)) STORED;
