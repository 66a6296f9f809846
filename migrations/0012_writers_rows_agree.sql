-- Migration 12: writers' rows that cannot disagree, shipments that change organization, TRUNCATE that
-- leaves nothing stale (docs/writing-data.md).

-- First, the rows the new keys would refuse, named, so the writer can fix them and upgrade again:
-- a packing line on a pallet of another shipment, a pallet on a packing list of another shipment, a
-- packing list read from another shipment's document, a row of one organization hanging off another
-- organization's shipment.
DO $$
DECLARE
  found text[];
  total bigint;
BEGIN
  WITH disagreeing AS (
    SELECT format('packing_lines %s (shipment %s) is on pallet %s of shipment %s',
                  l.id, l.shipment_id, p.id, p.shipment_id) AS what
      FROM packing_lines l JOIN pallets p ON p.id = l.pallet_id WHERE p.shipment_id <> l.shipment_id
    UNION ALL
    SELECT format('pallets %s (shipment %s) is on packing list %s of shipment %s',
                  p.id, p.shipment_id, k.id, k.shipment_id)
      FROM pallets p JOIN packing_lists k ON k.id = p.packing_list_id WHERE k.shipment_id <> p.shipment_id
    UNION ALL
    SELECT format('packing_lists %s (shipment %s) was read from document %s of shipment %s',
                  k.id, k.shipment_id, d.id, d.shipment_id)
      FROM packing_lists k JOIN documents d ON d.id = k.document_id WHERE d.shipment_id <> k.shipment_id
    UNION ALL
    SELECT format('containers %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM containers c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
    UNION ALL
    SELECT format('documents %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM documents c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
    UNION ALL
    SELECT format('packing_lists %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM packing_lists c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
    UNION ALL
    SELECT format('alerts %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM alerts c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
    UNION ALL
    SELECT format('check_runs %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM check_runs c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
    UNION ALL
    SELECT format('checks %s (organization %s) belongs to shipment %s of organization %s',
                  c.id, c.organization_id, s.id, s.organization_id)
      FROM checks c JOIN shipments s ON s.id = c.shipment_id WHERE s.organization_id <> c.organization_id
  )
  SELECT (array_agg(what ORDER BY what))[1:20], count(*) INTO found, total FROM disagreeing;
  IF total > 0 THEN
    RAISE EXCEPTION 'migration 12 stopped: % row(s) disagree with their shipment: %', total,
      array_to_string(found, '; ') || CASE WHEN total > 20 THEN format('; and %s more', total - 20) ELSE '' END
      USING HINT = 'Give each row its pallet''s, packing list''s or shipment''s shipment and organization '
                   '(or delete it), then run `flask --app app db upgrade` again.';
  END IF;
END
$$;

ALTER TABLE shipments ADD COLUMN joined_xid xid8 NOT NULL DEFAULT '1',
  ADD CONSTRAINT shipments_id_organization_id_key UNIQUE (id, organization_id);
ALTER TABLE deleted_shipments DROP CONSTRAINT deleted_shipments_pkey,
  ADD CONSTRAINT deleted_shipments_pkey PRIMARY KEY (id, organization_id);
ALTER TABLE containers DROP CONSTRAINT containers_shipment_id_fkey,
  ADD CONSTRAINT containers_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE documents DROP CONSTRAINT documents_shipment_id_fkey,
  ADD CONSTRAINT documents_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE packing_lists DROP CONSTRAINT packing_lists_shipment_id_fkey,
  ADD CONSTRAINT packing_lists_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE alerts DROP CONSTRAINT alerts_shipment_id_fkey,
  ADD CONSTRAINT alerts_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE check_runs DROP CONSTRAINT check_runs_shipment_id_fkey,
  ADD CONSTRAINT check_runs_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE checks DROP CONSTRAINT checks_shipment_id_fkey,
  ADD CONSTRAINT checks_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE;
ALTER TABLE documents ADD CONSTRAINT documents_id_shipment_id_key UNIQUE (id, shipment_id);
ALTER TABLE packing_lists ADD CONSTRAINT packing_lists_id_shipment_id_key UNIQUE (id, shipment_id),
  DROP CONSTRAINT packing_lists_document_id_fkey,
  ADD CONSTRAINT packing_lists_document_fkey FOREIGN KEY (document_id, shipment_id)
    REFERENCES documents (id, shipment_id) ON DELETE SET NULL (document_id);
ALTER TABLE pallets ADD CONSTRAINT pallets_id_shipment_id_key UNIQUE (id, shipment_id),
  DROP CONSTRAINT pallets_packing_list_id_fkey,
  ADD CONSTRAINT pallets_packing_list_fkey FOREIGN KEY (packing_list_id, shipment_id)
    REFERENCES packing_lists (id, shipment_id) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE packing_lines DROP CONSTRAINT packing_lines_pallet_id_fkey,
  ADD CONSTRAINT packing_lines_pallet_fkey FOREIGN KEY (pallet_id, shipment_id)
    REFERENCES pallets (id, shipment_id) ON UPDATE CASCADE ON DELETE CASCADE;

CREATE OR REPLACE FUNCTION shipments_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  touched boolean;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    -- The change feed's columns and the derived values are this trigger's alone (set below); what a
    -- writer put there is dropped first, so it neither counts as a change nor sticks.  NULL
    -- change_xid is a touch.
    touched := NEW.change_xid IS NULL;
    NEW.revision := OLD.revision;
    NEW.change_xid := OLD.change_xid;
    NEW.ever_visible := OLD.ever_visible;
    NEW.joined_xid := OLD.joined_xid;
    NEW.effective_eta := OLD.effective_eta;
    NEW.search_text := OLD.search_text;
    NEW.checks_total := OLD.checks_total;
    NEW.checks_passed := OLD.checks_passed;
    NEW.checks_failed := OLD.checks_failed;
    NEW.checks_warnings := OLD.checks_warnings;
    NEW.checks_skipped := OLD.checks_skipped;
    NEW.checks_pending := OLD.checks_pending;
    NEW.cargo_pallets := OLD.cargo_pallets;
    NEW.cargo_boxes := OLD.cargo_boxes;
    NEW.cargo_net_weight_kg := OLD.cargo_net_weight_kg;
    NEW.cargo_gross_weight_kg := OLD.cargo_gross_weight_kg;
    NEW.organic := OLD.organic;
    NEW.produce := OLD.produce;
  END IF;
  IF NEW.reference IS NULL OR btrim(NEW.reference) = '' THEN
    NEW.reference := generate_shipment_reference(NEW.organization_id, coalesce(NEW.created_at, now()));
  END IF;
  NEW.transport_reference := canonical_transport_reference(NEW.transport_reference);
  NEW.transport_reference_type := transport_reference_kind(NEW.transport_reference);
  NEW.archived_at := CASE WHEN NEW.archived THEN coalesce(NEW.archived_at, now()) END;
  IF TG_OP = 'UPDATE' THEN
    -- Set once: the first estimate and the first validation are never overwritten.
    NEW.original_eta := coalesce(OLD.original_eta, NEW.original_eta, NEW.eta);
    NEW.validated_at := coalesce(OLD.validated_at, NEW.validated_at,
                                 CASE WHEN NEW.status = 'validated' THEN now() END);
    IF NEW IS DISTINCT FROM OLD AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
      NEW.updated_at := now();
    END IF;
  ELSE
    NEW.original_eta := coalesce(NEW.original_eta, NEW.eta);
    NEW.validated_at := coalesce(NEW.validated_at, CASE WHEN NEW.status = 'validated' THEN now() END);
  END IF;
  -- After the updated_at test: a change of the shipment's other rows is a new revision, not an edit.
  NEW := shipment_derived(NEW);
  -- The change feed's bookkeeping (docs/sync.md).
  IF TG_OP = 'INSERT' THEN
    NEW.revision := 1;
    NEW.change_xid := pg_current_xact_id();
    NEW.joined_xid := pg_current_xact_id();
    NEW.ever_visible := NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere;
  ELSE
    -- Moved to another organization: new to it, as if inserted now (shipments_record_move tells the
    -- old one).  Visible at some commit in its organization, or now: a state of the transaction that
    -- brought it there (joined_xid) counts only if it is the state that commits.
    IF NEW.organization_id IS DISTINCT FROM OLD.organization_id THEN
      NEW.joined_xid := pg_current_xact_id();
    END IF;
    NEW.ever_visible := (NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere)
                        OR (OLD.ever_visible AND NEW.joined_xid <> pg_current_xact_id());
    IF touched OR NEW IS DISTINCT FROM OLD THEN
      -- One new revision per transaction, however many statements it runs.
      IF OLD.change_xid <> pg_current_xact_id() THEN
        NEW.revision := OLD.revision + 1;
      END IF;
      NEW.change_xid := pg_current_xact_id();
    END IF;
  END IF;
  RETURN NEW;
END
$$;

-- A shipment deleted after its organization saw it leaves a row for GET /changes.  Not when its
-- whole organization goes (the organization row is already gone when this runs), nor when the
-- transaction that brought it to its organization deletes it (nobody saw it there).
CREATE OR REPLACE FUNCTION shipments_record_deletion() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_shipments AS t (id, organization_id, revision)
  SELECT d.id, d.organization_id, d.revision + 1
    FROM deleted_rows d
   WHERE d.ever_visible AND d.joined_xid <> pg_current_xact_id()
     AND EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.organization_id)
  ON CONFLICT (id, organization_id) DO UPDATE
     SET revision = greatest(t.revision, EXCLUDED.revision),
         change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  RETURN NULL;
END
$$;

-- A shipment moved to another organization (docs/writing-data.md, "Moving a shipment"): the old
-- organization's feed shows it deleted at once, as if it were, and the labels of any other
-- organization come off it (labels belong to an organization; the new one never had them).  Its
-- containers, documents, packing lists, alerts, checks and check runs move with it through their
-- keys (ON UPDATE CASCADE); its webhook events stay the old organization's record.
CREATE OR REPLACE FUNCTION shipments_record_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.ever_visible AND OLD.joined_xid <> pg_current_xact_id() THEN
    INSERT INTO deleted_shipments AS t (id, organization_id, revision)
    VALUES (OLD.id, OLD.organization_id, NEW.revision)
    ON CONFLICT (id, organization_id) DO UPDATE
       SET revision = greatest(t.revision, EXCLUDED.revision),
           change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  END IF;
  DELETE FROM shipment_labels sl
   USING labels l
   WHERE sl.shipment_id = NEW.id AND l.id = sl.label_id AND l.organization_id <> NEW.organization_id;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_record_move
  AFTER UPDATE OF organization_id ON shipments
  FOR EACH ROW WHEN (NEW.organization_id IS DISTINCT FROM OLD.organization_id)
  EXECUTE FUNCTION shipments_record_move();

-- TRUNCATE leaves nothing stale: it fires no row or statement trigger, so on the tables a stored
-- rendering or a kept aggregate is made of it first deletes every row itself, which touches the
-- shipments concerned as any DELETE does (new revision, aggregates recomputed, stored renderings no
-- longer current, the change feed told); what TRUNCATE then empties is already empty.
CREATE OR REPLACE FUNCTION truncate_as_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME);
  RETURN NULL;
END
$$;
DO $$
DECLARE
  shown text;
BEGIN
  FOREACH shown IN ARRAY ARRAY['containers', 'shipment_labels', 'labels', 'checks', 'pallets',
                               'packing_lists', 'packing_lines'] LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_truncate BEFORE TRUNCATE ON %1$s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION truncate_as_delete()', shown);
  END LOOP;
END
$$;
-- TRUNCATE shipments (with CASCADE) records every deletion its organizations' feeds must show, as
-- shipments_record_deletion does, without the per-row cascade a DELETE of every shipment would cost.
CREATE OR REPLACE FUNCTION shipments_record_truncation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_shipments AS t (id, organization_id, revision)
  SELECT s.id, s.organization_id, s.revision + 1
    FROM shipments s
   WHERE s.ever_visible AND s.joined_xid <> pg_current_xact_id()
  ON CONFLICT (id, organization_id) DO UPDATE
     SET revision = greatest(t.revision, EXCLUDED.revision),
         change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_truncate
  BEFORE TRUNCATE ON shipments
  FOR EACH STATEMENT EXECUTE FUNCTION shipments_record_truncation();
