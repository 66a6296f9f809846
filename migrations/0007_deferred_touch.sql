-- Migration 7: the child tables' touch triggers honour a transaction-local setting, so a bulk loader
-- (demo seed) recomputes each shipment once per batch instead of once per child table (issue 9).

-- A bulk loader may defer them for its own transaction (SET LOCAL shiptrack.defer_touch = 'on') and
-- must then touch every shipment whose rows it wrote before it commits, so each is recomputed once
-- instead of once per child table (demo/bulk.py; the values still come from shipments_before_write).
-- A label renamed is not deferred: it changes shipments such a loader did not write.
CREATE OR REPLACE FUNCTION touch_parent_shipments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('shiptrack.defer_touch', true) = 'on' THEN
    RETURN NULL;
  END IF;
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(SELECT DISTINCT shipment_id FROM changed_rows));
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION touch_parent_shipments_of_changed_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('shiptrack.defer_touch', true) = 'on' THEN
    RETURN NULL;
  END IF;
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(
     SELECT n.shipment_id FROM (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) n
     UNION
     SELECT o.shipment_id FROM (SELECT * FROM old_rows EXCEPT ALL SELECT * FROM new_rows) o));
  RETURN NULL;
END
$$;
