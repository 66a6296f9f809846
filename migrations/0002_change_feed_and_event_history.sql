-- Migration 2: the change feed (GET /changes, docs/sync.md) and the event history (GET /events).
-- Every shipment gets `revision` and `change_xid`, kept by shipments_before_write; the tables a
-- shipment shows touch it through statement triggers; deleted shipments leave a row in
-- deleted_shipments; rendered events get the indexes of their history.  Existing shipments start
-- at revision 1 with change_xid 1: the feed lists them first, in id order.

ALTER TABLE shipments ADD COLUMN IF NOT EXISTS revision bigint NOT NULL DEFAULT 1;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS change_xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS ever_visible boolean NOT NULL DEFAULT true;

-- GET /changes: an organization's shipments in the order of their latest change (keyset on both).
CREATE INDEX IF NOT EXISTS shipments_changes_idx ON shipments (organization_id, change_xid, id) WHERE ever_visible;

-- Shipments deleted after they were visible: GET /changes shows them as deleted.  Kept for good
-- (one small row each), so a mirror that polls rarely still learns of every deletion.
CREATE TABLE IF NOT EXISTS deleted_shipments (
  id              bigint PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  revision        bigint NOT NULL,
  change_xid      xid8 NOT NULL DEFAULT pg_current_xact_id(),
  deleted_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS deleted_shipments_changes_idx ON deleted_shipments (organization_id, change_xid, id);

CREATE OR REPLACE FUNCTION shipments_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  touched boolean;
BEGIN
  IF TG_OP = 'UPDATE' THEN
    -- The change feed's columns are this trigger's alone (set below); what a writer put there is
    -- dropped first, so it neither counts as a change nor sticks.  NULL change_xid is a touch.
    touched := NEW.change_xid IS NULL;
    NEW.revision := OLD.revision;
    NEW.change_xid := OLD.change_xid;
    NEW.ever_visible := OLD.ever_visible;
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
  NEW.effective_eta := coalesce(NEW.eta,
    (SELECT min(c.eta) FROM containers c WHERE c.shipment_id = NEW.id));
  NEW.search_text := upper(concat_ws(' | ', NEW.reference, NEW.erp_reference,
    compact_reference(NEW.transport_reference), NEW.consignor, NEW.consignee,
    produce_text(NEW.draft_produce),
    (SELECT string_agg(c.number, ' ' ORDER BY c.id) FROM containers c WHERE c.shipment_id = NEW.id),
    (SELECT string_agg(DISTINCT l.produce_name, ' ')
       FROM packing_lines l JOIN pallets pl ON pl.id = l.pallet_id
       LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
      WHERE l.shipment_id = NEW.id AND (k.id IS NULL OR k.is_current))));
  -- The change feed's bookkeeping (docs/sync.md).
  IF TG_OP = 'INSERT' THEN
    NEW.revision := 1;
    NEW.change_xid := pg_current_xact_id();
    NEW.ever_visible := NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere;
  ELSE
    NEW.ever_visible := OLD.ever_visible OR (NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere);
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

-- Everything GET /shipments/{id} shows from other tables (containers, labels, checks summary,
-- cargo, produce, organic) touches the shipments concerned after each statement: the re-save
-- makes shipments_before_write recompute effective_eta and search_text and take a new revision
-- (change_xid NULL is the request for one).  An UPDATE touches only the shipments of rows that
-- really changed (the two transition tables compared whole-row), so re-saving equal values is free.
-- = ANY(ARRAY(...)) keeps these primary-key lookups even before the tables are analysed (an
-- IN-subquery was planned as a scan of every shipment without statistics).
CREATE OR REPLACE FUNCTION touch_parent_shipments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(SELECT DISTINCT shipment_id FROM changed_rows));
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION touch_parent_shipments_of_changed_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(
     SELECT n.shipment_id FROM (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) n
     UNION
     SELECT o.shipment_id FROM (SELECT * FROM old_rows EXCEPT ALL SELECT * FROM new_rows) o));
  RETURN NULL;
END
$$;
-- A label renamed or recoloured changes every shipment that carries it.
CREATE OR REPLACE FUNCTION touch_labelled_shipments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(
     SELECT sl.shipment_id FROM shipment_labels sl
      WHERE sl.label_id IN (SELECT n.id FROM (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) n)));
  RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS containers_effective_eta_insert ON containers;
DROP TRIGGER IF EXISTS containers_effective_eta_update ON containers;
DROP TRIGGER IF EXISTS containers_effective_eta_delete ON containers;
DROP FUNCTION IF EXISTS containers_refresh_effective_eta();
DO $$
DECLARE
  child text;
BEGIN
  FOREACH child IN ARRAY ARRAY['containers', 'shipment_labels', 'checks', 'pallets', 'packing_lists',
                               'packing_lines'] LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_insert AFTER INSERT ON %1$s '
                   'REFERENCING NEW TABLE AS changed_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments()', child);
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_update AFTER UPDATE ON %1$s '
                   'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments_of_changed_rows()', child);
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_delete AFTER DELETE ON %1$s '
                   'REFERENCING OLD TABLE AS changed_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments()', child);
  END LOOP;
END
$$;
CREATE OR REPLACE TRIGGER labels_refresh_update
  AFTER UPDATE ON labels REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION touch_labelled_shipments();
DROP FUNCTION IF EXISTS refresh_parent_shipments();

-- A shipment deleted after it was visible leaves a row for GET /changes.  Not when its whole
-- organization goes (the organization row is already gone when this runs).
CREATE OR REPLACE FUNCTION shipments_record_deletion() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_shipments AS t (id, organization_id, revision)
  SELECT d.id, d.organization_id, d.revision + 1
    FROM deleted_rows d
   WHERE d.ever_visible AND EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.organization_id)
  ON CONFLICT (id) DO UPDATE
     SET organization_id = EXCLUDED.organization_id, revision = greatest(t.revision, EXCLUDED.revision),
         change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_record_deletion
  AFTER DELETE ON shipments REFERENCING OLD TABLE AS deleted_rows
  FOR EACH STATEMENT EXECUTE FUNCTION shipments_record_deletion();

-- GET /events (models/events.py list_history): an organization's rendered events, newest first
CREATE INDEX IF NOT EXISTS events_history_idx ON events (organization_id, id DESC) WHERE state = 'rendered';
-- GET /events?shipment=: one shipment's rendered events, newest first
CREATE INDEX IF NOT EXISTS events_shipment_history_idx ON events (shipment_id, id DESC) WHERE state = 'rendered';
