-- Migration 29: GET /changes and GET /events with `wait` (api/waiting.py): the feeds notify each API process of the
-- organizations whose feed changed, and feed_heads tells a process that cannot listen where they stand.
-- GET /changes and GET /events with `wait` are held until their organization's feed changes: each API process
-- hears these on the connection that listens for principals (models/principals.py), and wakes only the requests
-- of the organizations named.  Statement-level: one notification per organization and statement, and NOTIFY
-- sends equal payloads of one transaction once, at its commit.
CREATE OR REPLACE FUNCTION notify_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'shipments' THEN
    PERFORM pg_notify('shiptrack_changes', c.organization_id::text)
       FROM (SELECT DISTINCT organization_id FROM changed_rows WHERE ever_visible) c;
  ELSE
    PERFORM pg_notify('shiptrack_changes', c.organization_id::text)
       FROM (SELECT DISTINCT organization_id FROM changed_rows) c;
  END IF;
  RETURN NULL;
END
$$;
-- What GET /changes lists: a shipment's new revision (inserts and updates, the touches of its child tables
-- included) and a deletion recorded (a shipment deleted or moved away, deleted_shipments).
CREATE OR REPLACE TRIGGER shipments_notify_changes_insert
  AFTER INSERT ON shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER shipments_notify_changes_update
  AFTER UPDATE ON shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER deleted_shipments_notify_changes_insert
  AFTER INSERT ON deleted_shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER deleted_shipments_notify_changes_update
  AFTER UPDATE ON deleted_shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();

-- What GET /events lists: an event rendered (the outbox, models/events.py store_rendered).
CREATE OR REPLACE FUNCTION notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('shiptrack_events', r.organization_id::text)
     FROM (SELECT DISTINCT organization_id FROM rendered_rows
            WHERE state = 'rendered' AND type <> 'webhook.test') r;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER events_notify_events
  AFTER UPDATE ON events REFERENCING NEW TABLE AS rendered_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_events();

-- Where each organization's feeds stand, for a process that cannot listen (behind a transaction pooler): it
-- asks this once a second for the organizations it holds requests of, and wakes those whose heads moved.
-- Each value is one backward step of an index (shipments_changes_idx, deleted_shipments_changes_idx,
-- events_history_idx).
CREATE OR REPLACE FUNCTION feed_heads(organization_ids bigint[])
RETURNS TABLE (organization_id bigint, changes text, events bigint)
LANGUAGE sql STABLE AS $$
  SELECT o.id,
         concat((SELECT max(s.change_xid) FROM shipments s WHERE s.organization_id = o.id AND s.ever_visible),
                '/', (SELECT max(t.change_xid) FROM deleted_shipments t WHERE t.organization_id = o.id)),
         (SELECT max(ev.id) FROM events ev WHERE ev.organization_id = o.id AND ev.state = 'rendered')
    FROM unnest(organization_ids) AS o (id)
$$;
