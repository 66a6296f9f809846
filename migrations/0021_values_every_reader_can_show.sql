-- Migration 21: every value the application's tables hold is one every reader can show (schema.sql,
-- is_api_timestamp and is_api_number: no 'infinity', BC date, year past 9999 or 'NaN'), and a webhook
-- endpoint's plain secret is 'whsec_' and the base64 of 24 to 64 bytes (is_webhook_secret).

CREATE OR REPLACE FUNCTION is_api_timestamp(value timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value >= '0001-01-02 00:00:00+00' AND value < '9999-12-31 00:00:00+00'
$$;

CREATE OR REPLACE FUNCTION is_api_number(value numeric) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value NOT IN ('NaN', 'Infinity', '-Infinity')
$$;

CREATE OR REPLACE FUNCTION is_webhook_secret(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value ~ '^whsec[_]([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'
     AND (length(value) - 6) / 4 * 3 - (length(value) - length(rtrim(value, '='))) BETWEEN 24 AND 64
$$;

-- The tables' rules: each table, its key, the columns held to is_api_timestamp and those held to is_api_number.
CREATE TEMPORARY TABLE api_value_rules (tab text, key text, timestamps text[], numbers text[]) ON COMMIT DROP;
INSERT INTO api_value_rules VALUES
  ('shipments', 'id', ARRAY['archived_at', 'validated_at', 'approved_at', 'etd', 'eta', 'original_eta',
                            'predicted_eta', 'last_tracked_at', 'carrier_updated_at', 'forwarder_eta', 'created_at',
                            'updated_at'], ARRAY['temperature_celsius']),
  ('containers', 'id', ARRAY['etd', 'eta', 'created_at'], ARRAY['temperature_celsius']),
  ('shipment_legs', 'id', ARRAY['etd', 'eta'], '{}'),
  ('tracking_events', 'id', ARRAY['occurred_at', 'created_at'], '{}'),
  ('eta_revisions', 'id', ARRAY['observed_at', 'previous_eta', 'new_eta'], '{}'),
  ('documents', 'id', ARRAY['created_at', 'updated_at'], '{}'),
  ('document_data', 'document_id', ARRAY['extracted_at'], '{}'),
  ('arrival_notices', 'id', ARRAY['received_at'], '{}'),
  ('packing_lists', 'id', ARRAY['created_at'], ARRAY['declared_net_weight_kg']),
  ('packing_lines', 'id', '{}', ARRAY['box_weight_kg', 'net_weight_kg', 'gross_weight_kg']),
  ('alerts', 'id', ARRAY['since', 'first_detected_at', 'last_detected_at', 'resolved_at'], '{}'),
  ('check_runs', 'id', ARRAY['started_at', 'finished_at'], '{}'),
  ('checks', 'id', ARRAY['ran_at'], '{}');

-- First, the values the new rules would refuse, named (one scan per table), so that they can be fixed and
-- the upgrade run again; an endpoint's secret is named by its endpoint, never shown.
DO $$
DECLARE
  rule record;
  found text[] := '{}';
  named text[];
BEGIN
  FOR rule IN SELECT * FROM api_value_rules ORDER BY tab LOOP
    EXECUTE format('SELECT array_agg(format(''%%s %%s %%s = %%s'', %L, t.%I, v.col, v.value) ORDER BY t.%I, v.col) '
                   'FROM %I t, LATERAL (VALUES %s) AS v (col, value, ok) WHERE NOT v.ok',
                   rule.tab, rule.key, rule.key, rule.tab,
                   (SELECT string_agg(format('(%L, t.%I::text, %s(t.%I))', col, col, test, col), ', ')
                      FROM (SELECT unnest(rule.timestamps), 'is_api_timestamp'
                            UNION ALL SELECT unnest(rule.numbers), 'is_api_number') AS c (col, test)))
      INTO named;
    found := found || coalesce(named, '{}');
  END LOOP;
  found := found || ARRAY(SELECT format('webhook_endpoints %s secret is not whsec_ and the base64 of 24 to 64 bytes', id)
                            FROM webhook_endpoints
                           WHERE secret !~ '^fernet:[A-Za-z0-9_-]+=*$' AND NOT is_webhook_secret(secret) ORDER BY id);
  IF cardinality(found) > 0 THEN
    RAISE EXCEPTION 'migration 21 stopped: % stored value(s) that no reader can show: %', cardinality(found),
      array_to_string(found[1:20], '; ') || CASE WHEN cardinality(found) > 20
                                                 THEN format('; and %s more', cardinality(found) - 20) ELSE '' END
      USING HINT = 'Give each a value the API can write (a timestamp of years 1 to 9999 in UTC, a number, or null '
                   'where the column allows it) and each endpoint named a new secret (`flask --app app webhooks '
                   'roll-secret`), then run `flask --app app db upgrade` again (docs/writing-data.md).';
  END IF;
END
$$;

-- Then the rules themselves, one ALTER TABLE (one scan) per table.
DO $$
DECLARE
  rule record;
BEGIN
  FOR rule IN SELECT * FROM api_value_rules ORDER BY tab LOOP
    EXECUTE format('ALTER TABLE %I %s', rule.tab,
                   (SELECT string_agg(format('ADD CONSTRAINT %I CHECK (%s(%I))', rule.tab || '_' || col || '_' || test,
                                             test, col), ', ')
                      FROM (SELECT unnest(rule.timestamps), 'is_api_timestamp'
                            UNION ALL SELECT unnest(rule.numbers), 'is_api_number') AS c (col, test)));
  END LOOP;
END
$$;

ALTER TABLE webhook_endpoints
  DROP CONSTRAINT webhook_endpoints_secret_check,
  ADD CONSTRAINT webhook_endpoints_secret_check CHECK (secret ~ '^fernet:[A-Za-z0-9_-]+=*$' OR is_webhook_secret(secret));
