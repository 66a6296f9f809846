-- Migration 23: the rule every read of what the API shows shares, "visible to the organization" (the
-- organization's own shipment, neither awaiting approval nor owned elsewhere), written once as the function
-- visible_to, which the statements of models/ call and PostgreSQL inlines into their conditions; the
-- functions and the webhook events' trigger that wrote it out call it too.

CREATE OR REPLACE FUNCTION visible_to(s shipments, organization_id bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT s.organization_id = visible_to.organization_id AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
$$;

CREATE OR REPLACE FUNCTION shipment_page(
  organization_id bigint, page_size integer, shipment_id bigint DEFAULT NULL, shipment_ids bigint[] DEFAULT NULL,
  archived boolean DEFAULT NULL, statuses text[] DEFAULT NULL,
  created_after timestamptz DEFAULT NULL, created_before timestamptz DEFAULT NULL,
  eta_after timestamptz DEFAULT NULL, eta_before timestamptz DEFAULT NULL, starting_after bigint DEFAULT NULL,
  label_ids bigint[] DEFAULT NULL, q text DEFAULT NULL, q_like text DEFAULT NULL, q_compact_like text DEFAULT NULL,
  q_alias_regex text DEFAULT NULL, q_fuzzy text DEFAULT NULL)
RETURNS SETOF shipments
LANGUAGE sql STABLE AS $$
  SELECT s.*
    FROM shipments s
   WHERE visible_to(s, shipment_page.organization_id)
     AND (shipment_page.shipment_id IS NULL OR s.id = shipment_page.shipment_id)
     AND (shipment_page.shipment_ids IS NULL OR s.id = ANY (shipment_page.shipment_ids))
     AND (shipment_page.archived IS NULL OR s.archived = shipment_page.archived)
     AND (shipment_page.statuses IS NULL OR s.status = ANY (shipment_page.statuses))
     AND (shipment_page.created_after IS NULL
          OR s.created_at >= date_trunc('second', shipment_page.created_after + interval '0.999999 s', 'UTC'))
     AND (shipment_page.created_before IS NULL
          OR s.created_at < date_trunc('second', shipment_page.created_before, 'UTC') + interval '1 s')
     AND (shipment_page.eta_after IS NULL
          OR s.effective_eta >= date_trunc('second', shipment_page.eta_after + interval '0.999999 s', 'UTC'))
     AND (shipment_page.eta_before IS NULL
          OR s.effective_eta < date_trunc('second', shipment_page.eta_before, 'UTC') + interval '1 s')
     AND (shipment_page.starting_after IS NULL OR s.id < shipment_page.starting_after)
     AND (shipment_page.label_ids IS NULL OR s.id IN (
           SELECT sl.shipment_id FROM shipment_labels sl
            WHERE sl.label_id = ANY (shipment_page.label_ids)
            GROUP BY sl.shipment_id
           HAVING count(*) = cardinality(shipment_page.label_ids)))
     AND (shipment_page.q IS NULL
          OR s.search_text LIKE upper(shipment_page.q_like)
          OR s.search_text LIKE shipment_page.q_compact_like
          OR s.search_text ~ upper(shipment_page.q_alias_regex)
          OR shipment_page.q_fuzzy <% s.consignor
          OR shipment_page.q_fuzzy <% s.consignee)
   ORDER BY s.id DESC
   LIMIT shipment_page.page_size
$$;

CREATE OR REPLACE FUNCTION free_time_facts(organization_id bigint) RETURNS TABLE (id bigint, facts text)
LANGUAGE sql STABLE AS $$
  SELECT s.id, json_build_array(
           s.id, s.reference, s.transport_reference, s.transport_type, s.status, s.carrier_name,
           s.demurrage_free_days, s.detention_free_days, s.free_days_basis,
           nd.free_days, nd.basis, nt.free_days, nt.basis,
           ct.id, ct.demurrage_free_days, ct.detention_free_days, ct.free_days_basis,
           -- ARRAY(... ORDER BY) keeps the order; the events come in it from tracking_events_free_time_idx
           -- (json_agg(... ORDER BY) would sort each shipment's events again).
           array_to_json(ARRAY(
             SELECT k.number FROM containers k WHERE k.shipment_id = s.id AND k.number IS NOT NULL ORDER BY k.id)),
           array_to_json(ARRAY(
             SELECT json_build_array(v.milestone, v.actual, v.occurred_at, v.occurred_at_offset_minutes,
                                     v.container_number)
               FROM tracking_events v
              WHERE v.shipment_id = s.id AND s.transport_type = 'ocean' AND v.milestone IN (
                      'delivered', 'discharged', 'empty_return', 'gate_out', 'loaded', 'stripped',
                      'transshipment_discharge', 'transshipment_load', 'untracked')
              ORDER BY v.occurred_at, v.id)))::text
    FROM shipments s
    LEFT JOIN carrier_terms ct
      ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
    LEFT JOIN LATERAL (
      SELECT n.demurrage_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
       WHERE n.shipment_id = s.id AND n.demurrage_free_days IS NOT NULL
       ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nd ON true
    LEFT JOIN LATERAL (
      SELECT n.detention_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
       WHERE n.shipment_id = s.id AND n.detention_free_days IS NOT NULL
       ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nt ON true
   WHERE visible_to(s, free_time_facts.organization_id)
$$;

CREATE OR REPLACE FUNCTION at_risk_candidates(organization_id bigint, as_of timestamptz, window_days integer)
RETURNS TABLE (shipment_id bigint)
LANGUAGE sql STABLE AS $$
  SELECT o.shipment_id
    FROM (SELECT s.id AS shipment_id, s.organization_id, s.carrier_name, s.demurrage_free_days,
                 -- The most whole days from an open discharge's port day to today there (0 when it is
                 -- later), among those within the window.
                 max(d.age) FILTER (WHERE d.age < at_risk_candidates.window_days) AS age
            FROM tracking_events e
            JOIN shipments s ON s.id = e.shipment_id
           CROSS JOIN LATERAL (
             SELECT greatest(0, ((at_risk_candidates.as_of AT TIME ZONE 'UTC')
                                 + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date
                                - ((e.occurred_at AT TIME ZONE 'UTC')
                                   + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date) AS age
             ) d
           WHERE e.milestone = 'discharged' AND e.actual
             AND e.occurred_at >= at_risk_candidates.as_of - make_interval(days => at_risk_candidates.window_days + 1)
             AND visible_to(s, at_risk_candidates.organization_id)
             AND s.transport_type = 'ocean' AND NOT s.archived AND s.status <> 'in_warehouse'
             AND NOT EXISTS (
               SELECT 1 FROM tracking_events g
                WHERE g.shipment_id = e.shipment_id AND g.milestone = 'gate_out' AND g.actual
                  AND g.occurred_at >= e.occurred_at
                  AND (g.container_number IS NULL
                       OR compact_reference(g.container_number) = compact_reference(e.container_number)))
           GROUP BY s.id) o
    LEFT JOIN carrier_terms ct ON ct.organization_id = o.organization_id AND lower(ct.carrier) = lower(o.carrier_name)
   -- At most 2 days left means at least free days - 2 used, and a clock uses at most one free day per day
   -- on either basis (the start day included), so free days <= age + 3 (docs/free-time.md, "Speed").
   -- coalesce evaluates the notice lookup only for shipments without their own free days.
   WHERE coalesce(o.demurrage_free_days,
                  (SELECT n.demurrage_free_days FROM arrival_notices n
                    WHERE n.shipment_id = o.shipment_id AND n.demurrage_free_days IS NOT NULL
                    ORDER BY n.received_at DESC, n.id DESC LIMIT 1),
                  ct.demurrage_free_days) <= o.age + 3
$$;

CREATE OR REPLACE FUNCTION shipment_evented(shipment_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT visible_to(s, s.organization_id) FROM shipments s WHERE s.id = shipment_id), false)
$$;

CREATE OR REPLACE FUNCTION record_shipment_change(shipment shipments, event_type text, field text,
                                                  old_value jsonb, new_value jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  existing events%ROWTYPE;
BEGIN
  SELECT * INTO existing FROM events
   WHERE txid = txid_current() AND shipment_id = shipment.id AND type = event_type AND state = 'pending';
  IF FOUND THEN
    IF existing.previous_attributes -> field = new_value THEN
      DELETE FROM events WHERE id = existing.id;
    END IF;
    RETURN;
  END IF;
  IF NOT visible_to(shipment, shipment.organization_id) THEN
    RETURN;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, previous_attributes)
    VALUES (shipment.organization_id, event_type, shipment.id, jsonb_build_object(field, old_value));
  PERFORM pg_notify('webhook_events', '');
END
$$;
