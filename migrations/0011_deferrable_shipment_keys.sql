-- Migration 11: every key to shipments may be checked at commit (DEFERRABLE INITIALLY IMMEDIATE), so a
-- bulk loader (demo seed) can write a shipment after all its other rows: its insert then computes the
-- derived columns once, from all of them, and the shipment is not written a second time (issue 9).
-- Every other writer still has each key checked at once, as before.
DO $$
DECLARE
  k record;
BEGIN
  FOR k IN SELECT conrelid::regclass AS child, conname FROM pg_constraint
            WHERE contype = 'f' AND confrelid = 'shipments'::regclass AND NOT condeferrable LOOP
    EXECUTE format('ALTER TABLE %s ALTER CONSTRAINT %I DEFERRABLE INITIALLY IMMEDIATE', k.child, k.conname);
  END LOOP;
END
$$;
