-- Migration 8: the at-risk list's candidate search reads its two indexes alone (an index-only scan
-- instead of one heap page per recent discharge and per shipment considered), and the free-time facts
-- read a shipment's clock events from one index (issue 9, docs/free-time.md).

-- free_time: the tracking events the free-time engine reads (models/free_time_queries.py EVENT_MILESTONES), in
-- the order it reads them, with every column it reads (an index-only scan per shipment)
CREATE INDEX IF NOT EXISTS tracking_events_free_time_idx ON tracking_events (shipment_id, occurred_at, id)
  INCLUDE (milestone, actual, occurred_at_offset_minutes, container_number)
  WHERE milestone IN ('delivered', 'discharged', 'empty_return', 'gate_out', 'loaded', 'stripped',
                      'transshipment_discharge', 'transshipment_load', 'untracked');

DROP INDEX IF EXISTS tracking_events_discharged_idx;
CREATE INDEX IF NOT EXISTS tracking_events_discharged_idx ON tracking_events (occurred_at, shipment_id)
  INCLUDE (container_number, occurred_at_offset_minutes) WHERE milestone = 'discharged' AND actual;

DROP INDEX IF EXISTS shipments_free_time_idx;
CREATE INDEX IF NOT EXISTS shipments_free_time_idx ON shipments (organization_id, id)
  INCLUDE (carrier_name, demurrage_free_days)
  WHERE transport_type = 'ocean' AND NOT archived AND status <> 'in_warehouse'
    AND NOT awaiting_approval AND NOT owned_elsewhere;
