-- Migration 9: stored renderings of a shipment's packing lists beside its own (issue 9, render once).

-- GET /shipments/{id}/packing_lists shows only packing lists, pallets and lines, whose every change
-- touches the shipment's revision, so its answer is stored and checked like the shipment's own.
ALTER TABLE shipment_renderings ADD COLUMN resource text NOT NULL DEFAULT 'shipment'
  CHECK (resource IN ('shipment', 'packing_lists'));
ALTER TABLE shipment_renderings ALTER COLUMN resource DROP DEFAULT;
ALTER TABLE shipment_renderings DROP CONSTRAINT shipment_renderings_pkey,
  ADD PRIMARY KEY (shipment_id, api_version, resource);
-- The new column has no statistics until analysed, and without them the planner took every stored
-- rendering of a version for one row and read them all for each page (measured: 16 ms instead of 1).
ANALYZE shipment_renderings;
