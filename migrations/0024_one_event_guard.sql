-- Migration 24: the webhook events' triggers of check runs and alerts ask one function, shipment_evented,
-- whether a row is news: it now holds the rule they each wrote out first (rows a bulk loader writes as
-- history make no event), beside the shipment's visibility it already held.

CREATE OR REPLACE FUNCTION shipment_evented(shipment_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT current_setting('shiptrack.history', true) IS DISTINCT FROM 'on'
     AND coalesce((SELECT visible_to(s, s.organization_id) FROM shipments s WHERE s.id = shipment_id), false)
$$;

CREATE OR REPLACE FUNCTION check_runs_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT shipment_evented(NEW.shipment_id) THEN
    RETURN NULL;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, check_run_id, data_extra)
  SELECT NEW.organization_id, 'shipment.checks_completed', NEW.shipment_id, NEW.id,
         jsonb_build_object('checks', jsonb_build_object(
           'summary', jsonb_build_object(
             'total', count(c.id),
             'passed', count(c.id) FILTER (WHERE c.status = 'passed'),
             'failed', count(c.id) FILTER (WHERE c.status = 'failed'),
             'warnings', count(c.id) FILTER (WHERE c.status = 'warning'),
             'skipped', count(c.id) FILTER (WHERE c.status = 'skipped'),
             'pending', count(c.id) FILTER (WHERE c.status = 'pending')),
           'results', coalesce(jsonb_agg(jsonb_build_object(
                         'check_type', c.category, 'key', c.key, 'status', c.status) ORDER BY c.id)
                       FILTER (WHERE c.id IS NOT NULL), '[]'::jsonb)))
    FROM (SELECT 1) one LEFT JOIN checks c ON c.check_run_id = NEW.id;
  PERFORM pg_notify('webhook_events', '');
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION alerts_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT shipment_evented(NEW.shipment_id)
     OR NOT coalesce((SELECT k.customer_visible FROM alert_kinds k WHERE k.key = NEW.key), false) THEN
    RETURN NULL;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, alert_id)
    VALUES (NEW.organization_id, 'alert.created', NEW.shipment_id, NEW.id);
  PERFORM pg_notify('webhook_events', '');
  RETURN NULL;
END
$$;
