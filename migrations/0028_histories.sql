-- Migration 28: histories (docs/operations.md, "After a failover or a restore"). A promoted standby or a
-- restore begins a new history at its first write: every id sequence jumps 2^32 ahead (no webhook-id is
-- handed out twice) and GET /changes numbers its cursors from (history - 1) * 2^48, refusing those of
-- another history. This database's line so far is history 1, recorded now: its ids and cursors stay valid.

-- A promoted standby, a restored backup or a copy of the database goes on from a point the line it
-- leaves may have passed: its sequences and transaction ids would hand out again numbers that line gave
-- to receivers (webhook-ids) and mirrors (GET /changes cursors). Each line is a history, known by the
-- server's system identifier, its timeline and the database's oid; a new one begins at the first write
-- that finds them changed (history() below). The first history changes no number.
CREATE TABLE IF NOT EXISTS histories (
  number            integer PRIMARY KEY CHECK (number >= 1),
  system_identifier bigint NOT NULL,
  timeline          integer NOT NULL,
  database_oid      oid NOT NULL,
  began_at          timestamptz NOT NULL DEFAULT now(),
  -- The event ids no event of this history has: every id sequence jumped 2^32 ahead when it began, past
  -- anything the line it left can have handed out (null for the first history). GET /events refuses
  -- starting_after in here.
  skipped_event_ids int8range,
  UNIQUE (system_identifier, timeline, database_oid)
);

-- Who the database is now: only on a primary (pg_walfile_name errors during recovery). The timeline is
-- the first 8 hex digits of the WAL file name; pg_control_checkpoint's lags a promotion until its checkpoint.
-- plpgsql, whose plans a session keeps: a SQL function returning a record is planned at every call (three
-- to six times the cost, measured with pgbench).
CREATE OR REPLACE FUNCTION history_identity(OUT system_identifier bigint, OUT timeline integer,
                                            OUT database_oid oid)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  system_identifier := (pg_control_system()).system_identifier;
  timeline := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int;
  SELECT d.oid INTO database_oid FROM pg_database d WHERE d.datname = current_database();
END
$$;

-- The history a read is in, writing nothing (GET /changes numbers its cursors with it): on a standby the
-- latest recorded (what it replayed is its primary's); on a primary the one its next write records.
CREATE OR REPLACE FUNCTION current_history() RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  latest histories%ROWTYPE;
BEGIN
  SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
  IF NOT FOUND THEN
    RETURN 1;
  END IF;
  IF pg_is_in_recovery() OR (latest.system_identifier, latest.timeline, latest.database_oid)
                            = (SELECT i.system_identifier, i.timeline, i.database_oid FROM history_identity() i) THEN
    RETURN latest.number;
  END IF;
  RETURN latest.number + 1;
END
$$;

-- The history a write is in, begun first when the identity changed: under a lock (two sessions cannot
-- both begin one), every bigint sequence of the schema jumps 2^32 ahead, so no id the line left behind
-- handed out (webhook-ids above all) is handed out again. Called before this service's own tables hand
-- out an id (in_history: events, webhook endpoints, tokens, shipments) and by every write of a shipment
-- (shipments_before_write), once per transaction: the answer is kept in shiptrack.history_number until
-- the transaction ends, never longer (a session can outlive its standby's promotion). SECURITY DEFINER:
-- a writer allowed to insert rows need not be allowed to move sequences or lock this table.
CREATE OR REPLACE FUNCTION history() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  jump constant bigint := 4294967296;
  known text := current_setting('shiptrack.history_number', true);
  latest histories%ROWTYPE;
  here record;
  events_before bigint;
  sequence record;
BEGIN
  IF known <> '' THEN
    RETURN known::integer;
  END IF;
  SELECT * INTO here FROM history_identity();
  SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
  IF NOT FOUND OR (latest.system_identifier, latest.timeline, latest.database_oid)
                  IS DISTINCT FROM (here.system_identifier, here.timeline, here.database_oid) THEN
    LOCK TABLE histories IN EXCLUSIVE MODE;
    SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
    IF NOT FOUND THEN
      INSERT INTO histories (number, system_identifier, timeline, database_oid)
        VALUES (1, here.system_identifier, here.timeline, here.database_oid)
        RETURNING * INTO latest;
    ELSIF (latest.system_identifier, latest.timeline, latest.database_oid)
          IS DISTINCT FROM (here.system_identifier, here.timeline, here.database_oid) THEN
      SELECT coalesce(s.last_value, 0) INTO events_before
        FROM pg_sequences s
       WHERE format('%I.%I', s.schemaname, s.sequencename)::regclass
             = pg_get_serial_sequence('events', 'id')::regclass;
      FOR sequence IN
        SELECT format('%I.%I', s.schemaname, s.sequencename) AS name, coalesce(s.last_value, 0) AS last_value
          FROM pg_sequences s
         WHERE s.schemaname = current_schema() AND s.data_type = 'bigint'::regtype
           AND s.sequenceowner = current_user  -- the schema's (the function's owner); another role's is left be
      LOOP
        PERFORM setval(sequence.name, sequence.last_value + jump);
      END LOOP;
      INSERT INTO histories (number, system_identifier, timeline, database_oid, skipped_event_ids)
        VALUES (latest.number + 1, here.system_identifier, here.timeline, here.database_oid,
                int8range(events_before + 1, events_before + jump, '[]'))
        RETURNING * INTO latest;
    END IF;
  END IF;
  PERFORM set_config('shiptrack.history_number', latest.number::text, true);
  RETURN latest.number;
END
$$;

CREATE OR REPLACE FUNCTION shipments_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  touched boolean;
BEGIN
  -- The first write of a new history records it (history() above), before the change is numbered.
  IF coalesce(current_setting('shiptrack.history_number', true), '') = '' THEN
    PERFORM history();
  END IF;
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

-- The ids this service hands out itself (msg_, whe_, tok_), and shipments', are handed out in the current
-- history (history(), "Histories" above): checked before a statement's rows take their ids, whoever inserts
-- them (shipments_before_write comes too late for that: a row's id is drawn before its BEFORE ROW triggers).
CREATE OR REPLACE FUNCTION in_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM history();
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER events_in_history
  BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER webhook_endpoints_in_history
  BEFORE INSERT ON webhook_endpoints FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER tokens_in_history
  BEFORE INSERT ON tokens FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER shipments_in_history
  BEFORE INSERT ON shipments FOR EACH STATEMENT EXECUTE FUNCTION in_history();

INSERT INTO histories (number, system_identifier, timeline, database_oid)
SELECT 1, i.system_identifier, i.timeline, i.database_oid FROM history_identity() i
 WHERE NOT EXISTS (SELECT 1 FROM histories);
