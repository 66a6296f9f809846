-- Migration 4: delivery under faults (issue 10; docs/webhooks.md).
--  * events: render failures get their own state and error text (they used to be `skipped`);
--  * webhook_attempts: an attempt is written `in_flight` with the claim, before the request, and
--    completed after it, so a killed pass leaves a trace (`interrupted` once claimed again);
--  * webhook_deliveries: an index on leased rows, for the per-endpoint cap counted across processes;
--  * views: webhook_attempt_log shows the attempt's state; webhook_render_failures lists failures.

ALTER TABLE events ADD COLUMN render_error text;
ALTER TABLE events DROP CONSTRAINT events_state_check;
ALTER TABLE events ADD CONSTRAINT events_state_check
  CHECK (state IN ('pending', 'rendered', 'skipped', 'render_failed'));
CREATE INDEX events_render_failed_idx ON events (id) WHERE state = 'render_failed';

CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (endpoint_id) WHERE lease_token IS NOT NULL;

ALTER TABLE webhook_attempts ALTER COLUMN duration_ms DROP NOT NULL;
ALTER TABLE webhook_attempts ADD COLUMN state text
  CHECK (state IN ('in_flight', 'succeeded', 'failed', 'interrupted'));
UPDATE webhook_attempts SET state = CASE WHEN succeeded THEN 'succeeded' ELSE 'failed' END;
ALTER TABLE webhook_attempts ALTER COLUMN state SET NOT NULL;

CREATE OR REPLACE VIEW webhook_attempt_log AS
SELECT a.attempted_at, 'whe_' || a.endpoint_id AS endpoint, 'msg_' || a.event_id AS event, ev.type,
       a.attempt, a.reason, a.state AS status,
       a.status_code, a.duration_ms, a.error, a.address, d.next_attempt_at AS next_attempt,
       left(a.response_body, 200) AS response_start, a.id AS attempt_id
  FROM webhook_attempts a
  JOIN events ev ON ev.id = a.event_id
  JOIN webhook_deliveries d ON d.id = a.delivery_id;

CREATE OR REPLACE VIEW webhook_render_failures AS
SELECT 'msg_' || ev.id AS event, o.slug AS organization, ev.type,
       coalesce('alr_' || ev.alert_id, 'shp_' || ev.shipment_id) AS subject, ev.created_at,
       ev.rendered_at AS failed_at, ev.render_error AS error
  FROM events ev JOIN organizations o ON o.id = ev.organization_id
 WHERE ev.state = 'render_failed';
