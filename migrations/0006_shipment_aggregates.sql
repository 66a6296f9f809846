-- Migration 6: shipments keep their checks summary, cargo, organic and produce (issue 9), computed
-- by the database in the writing transaction, like effective_eta and search_text: shipment_derived
-- recomputes every derived value of a shipment from its rows, shipments_before_write applies it to
-- every row written (the child tables' touch triggers re-save their shipments), and GET /shipments
-- reads the columns instead of aggregating per request.
--
-- Existing shipments are filled with the trigger off, so the backfill is not a change: revision,
-- change_xid and updated_at stay as they were (the JSON is the same, so a mirror has nothing to
-- fetch again).  Every row is rewritten once; the table is locked for the length of the migration.

ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_total integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_passed integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_failed integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_warnings integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_skipped integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS checks_pending integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS cargo_pallets integer NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS cargo_boxes bigint NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS cargo_net_weight_kg numeric NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS cargo_gross_weight_kg numeric NOT NULL DEFAULT 0;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS organic boolean NOT NULL DEFAULT false;
ALTER TABLE shipments ADD COLUMN IF NOT EXISTS produce text[] NOT NULL DEFAULT '{}';

-- A shipment with every value derived from other rows recomputed from them (docs/decisions.md,
-- "Derived shipment fields"): effective_eta and search_text, the checks summary, cargo, organic and
-- produce.  shipments_before_write applies it to every row written, and each child table's touch
-- re-saves its shipments, so the stored values are those of the writing transaction's own rows.
-- One statement, each child table read once: the packing lines are grouped by produce name once,
-- which gives the cargo sums, organic, produce and search_text's produce names together.
-- Cargo and the search document count the lines of pallets on a current packing list or on none;
-- produce and organic only those on a current packing list; with no current packing list, produce
-- is the draft entry's distinct names in code-point order ("C": what the API sorted them by).
CREATE OR REPLACE FUNCTION shipment_derived(s shipments) RETURNS shipments
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT coalesce(s.eta, ct.eta),
         upper(concat_ws(' | ', s.reference, s.erp_reference, compact_reference(s.transport_reference),
                         s.consignor, s.consignee, produce_text(s.draft_produce), ct.numbers, ln.names)),
         ck.total, ck.passed, ck.failed, ck.warnings, ck.skipped, ck.pending,
         pa.pallets, ln.boxes, ln.net_weight_kg, ln.gross_weight_kg, ln.organic,
         CASE WHEN pa.has_packing_list THEN ln.produce
              ELSE ARRAY(SELECT DISTINCT d COLLATE "C" FROM unnest(s.draft_produce) d
                          WHERE d IS NOT NULL ORDER BY 1) END
    INTO s.effective_eta, s.search_text,
         s.checks_total, s.checks_passed, s.checks_failed, s.checks_warnings, s.checks_skipped, s.checks_pending,
         s.cargo_pallets, s.cargo_boxes, s.cargo_net_weight_kg, s.cargo_gross_weight_kg, s.organic, s.produce
    FROM (SELECT min(c.eta) AS eta, string_agg(c.number, ' ' ORDER BY c.id) AS numbers
            FROM containers c WHERE c.shipment_id = s.id) ct,
         (SELECT count(*) AS total,
                 count(*) FILTER (WHERE c.status = 'passed') AS passed,
                 count(*) FILTER (WHERE c.status = 'failed') AS failed,
                 count(*) FILTER (WHERE c.status = 'warning') AS warnings,
                 count(*) FILTER (WHERE c.status = 'skipped') AS skipped,
                 count(*) FILTER (WHERE c.status = 'pending') AS pending
            FROM checks c WHERE c.shipment_id = s.id) ck,
         (SELECT count(*) AS pallets,
                 EXISTS (SELECT 1 FROM packing_lists k
                          WHERE k.shipment_id = s.id AND k.is_current) AS has_packing_list
            FROM pallets pl LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
           WHERE pl.shipment_id = s.id AND (k.id IS NULL OR k.is_current)) pa,
         (SELECT coalesce(sum(g.boxes), 0) AS boxes,
                 coalesce(sum(g.net_weight_kg), 0) AS net_weight_kg,
                 coalesce(sum(g.gross_weight_kg), 0) AS gross_weight_kg,
                 coalesce(bool_or(g.organic), false) AS organic,
                 coalesce(array_agg(g.produce_name ORDER BY g.produce_name) FILTER (WHERE g.listed),
                          '{}'::text[]) AS produce,
                 string_agg(g.produce_name, ' ' ORDER BY g.produce_name) AS names
            FROM (SELECT l.produce_name,
                         sum(l.box_count) AS boxes,
                         sum(l.net_weight_kg) AS net_weight_kg,
                         sum(l.gross_weight_kg) AS gross_weight_kg,
                         bool_or(l.organic) FILTER (WHERE k.id IS NOT NULL) AS organic,
                         bool_or(k.id IS NOT NULL) AS listed
                    FROM packing_lines l
                    JOIN pallets pl ON pl.id = l.pallet_id
                    LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
                   WHERE l.shipment_id = s.id AND (k.id IS NULL OR k.is_current)
                   GROUP BY l.produce_name) g) ln;
  RETURN s;
END
$$;

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

ALTER TABLE shipments DISABLE TRIGGER shipments_before_write;
UPDATE shipments s
   SET (checks_total, checks_passed, checks_failed, checks_warnings, checks_skipped, checks_pending,
        cargo_pallets, cargo_boxes, cargo_net_weight_kg, cargo_gross_weight_kg, organic, produce) =
       (SELECT d.checks_total, d.checks_passed, d.checks_failed, d.checks_warnings, d.checks_skipped,
               d.checks_pending, d.cargo_pallets, d.cargo_boxes, d.cargo_net_weight_kg,
               d.cargo_gross_weight_kg, d.organic, d.produce
          FROM shipment_derived(s) d);
ALTER TABLE shipments ENABLE TRIGGER shipments_before_write;
