"""Free time from the database: load the facts the engine needs, for one shipment or the at-risk candidates.

A constant number of statements whatever the number of shipments: one per kind of fact.
"""
import json
from datetime import datetime, timezone

from models import db, free_time
from models.free_time_rules import KINDS, resolve_terms

# The milestones the engine reads; tracking_events_free_time_idx holds exactly these (a literal list, so
# that the planner can use that partial index).
EVENT_MILESTONES = sorted(free_time.CLOCK_MILESTONES | free_time.LEFT_TERMINAL | {"untracked"})

# free-time facts of visible shipments, one row each: the shipment's id and, as one JSON text, everything
# the engine reads of it: the shipment with its own terms, the latest arrival notice stating each kind's
# free days, the organization's terms for its carrier (FACT_FIELDS names these positions), then its
# container numbers (oldest first) and, for ocean shipments, the tracking events that start, stop or end a
# clock, in time order (one row per shipment keeps a page of candidates to one round trip; one text lets
# the at-risk list recognise facts it has already summarised without parsing them: api/free_time.py).
# An array, not an object: keys would be repeated in every row, half the bytes returned, and an array
# parses faster (docs/free-time.md, "Speed").
# The milestone list is EVENT_MILESTONES written out (tests/database/test_statements.py holds them equal).
FACTS_SQL = """
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
            ORDER BY v.occurred_at, v.id)))::text AS facts
  FROM shipments s
  LEFT JOIN carrier_terms ct ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
  LEFT JOIN LATERAL (
    SELECT n.demurrage_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
     WHERE n.shipment_id = s.id AND n.demurrage_free_days IS NOT NULL
     ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nd ON true
  LEFT JOIN LATERAL (
    SELECT n.detention_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
     WHERE n.shipment_id = s.id AND n.detention_free_days IS NOT NULL
     ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nt ON true
 WHERE s.organization_id = %(organization_id)s AND s.id IN (SELECT unnest(%(ids)s::bigint[]))
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
"""

# list_free_time_at_risk: FACTS_SQL (the same text) for the candidate shipments, found through
# tracking_events_discharged_idx (recent actual discharges) and shipments_free_time_idx (the shipments the
# list considers), both read from the index alone; a discharge counts when no gate-out of its container
# follows it (tracking_events_gate_out_idx), its port day is within the window, and the demurrage free days
# are known and few enough to leave at most 2 days. A superset: the engine decides.
AT_RISK_SQL = """
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
            ORDER BY v.occurred_at, v.id)))::text AS facts
  FROM shipments s
  LEFT JOIN carrier_terms ct ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
  LEFT JOIN LATERAL (
    SELECT n.demurrage_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
     WHERE n.shipment_id = s.id AND n.demurrage_free_days IS NOT NULL
     ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nd ON true
  LEFT JOIN LATERAL (
    SELECT n.detention_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
     WHERE n.shipment_id = s.id AND n.detention_free_days IS NOT NULL
     ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nt ON true
 WHERE s.organization_id = %(organization_id)s AND s.id IN (
  SELECT o.shipment_id
    FROM (SELECT s.id AS shipment_id, s.organization_id, s.carrier_name, s.demurrage_free_days,
                 -- The most whole days from an open discharge's port day to today there (0 when it is
                 -- later), among those within the window (its port day is day 1).
                 max(d.age) FILTER (WHERE d.age < %(window_days)s::integer) AS age
            FROM tracking_events e
            JOIN shipments s ON s.id = e.shipment_id
           CROSS JOIN LATERAL (
             SELECT greatest(0, ((%(now)s::timestamptz AT TIME ZONE 'UTC')
                                 + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date
                                - ((e.occurred_at AT TIME ZONE 'UTC')
                                   + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date) AS age
             ) d
           WHERE e.milestone = 'discharged' AND e.actual
             AND e.occurred_at >= %(now)s::timestamptz - make_interval(days => %(window_days)s::integer + 1)
             AND s.organization_id = %(organization_id)s::bigint
             AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
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
)
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
"""
# at_risk candidates alone (bench/at_risk.py times them): AT_RISK_SQL's subquery, written out the same.
_AT_RISK_CANDIDATES_SQL = """
  SELECT o.shipment_id
    FROM (SELECT s.id AS shipment_id, s.organization_id, s.carrier_name, s.demurrage_free_days,
                 -- The most whole days from an open discharge's port day to today there (0 when it is
                 -- later), among those within the window (its port day is day 1).
                 max(d.age) FILTER (WHERE d.age < %(window_days)s::integer) AS age
            FROM tracking_events e
            JOIN shipments s ON s.id = e.shipment_id
           CROSS JOIN LATERAL (
             SELECT greatest(0, ((%(now)s::timestamptz AT TIME ZONE 'UTC')
                                 + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date
                                - ((e.occurred_at AT TIME ZONE 'UTC')
                                   + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date) AS age
             ) d
           WHERE e.milestone = 'discharged' AND e.actual
             AND e.occurred_at >= %(now)s::timestamptz - make_interval(days => %(window_days)s::integer + 1)
             AND s.organization_id = %(organization_id)s::bigint
             AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
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
"""
# Prepared: planning it costs about as much as running it, and its plan does not depend on the values.
_AT_RISK = db.Prepared("free_time_at_risk", AT_RISK_SQL)


def utc_now():
    """The current instant, aware, in UTC."""
    return datetime.now(timezone.utc)


# The positions of FACTS_SQL's array before the container numbers and the events.
FACT_FIELDS = ("id", "reference", "transport_reference", "transport_type", "status", "carrier_name",
               "demurrage_free_days", "detention_free_days", "free_days_basis",
               "notice_demurrage_free_days", "notice_demurrage_basis",
               "notice_detention_free_days", "notice_detention_basis",
               "carrier_terms_id", "carrier_demurrage_free_days", "carrier_detention_free_days",
               "carrier_free_days_basis")


def parse_facts(text):
    """(shipment, container numbers, events, terms by kind) from the `facts` text of a FACTS_SQL row."""
    *fields, numbers, raw_events = json.loads(text)
    row = dict(zip(FACT_FIELDS, fields, strict=True))
    carrier_terms = None
    if row["carrier_terms_id"] is not None:
        carrier_terms = {"demurrage_free_days": row["carrier_demurrage_free_days"],
                         "detention_free_days": row["carrier_detention_free_days"],
                         "free_days_basis": row["carrier_free_days_basis"]}
    terms = {}
    for kind in KINDS:
        notice = {f"{kind}_free_days": row[f"notice_{kind}_free_days"],
                  "free_days_basis": row[f"notice_{kind}_basis"]}
        terms[kind] = resolve_terms(kind, row, [notice], carrier_terms)
    events = [{"milestone": milestone, "actual": actual,
               "occurred_at": None if occurred_at is None else datetime.fromisoformat(occurred_at),
               "occurred_at_offset_minutes": offset, "container_number": number}
              for milestone, actual, occurred_at, offset, number in raw_events]
    return row, numbers, events, terms


def load_facts(conn, organization_id, ids):
    """The engine's inputs (shipment, container numbers, events, terms by kind) for the visible ones of `ids`."""
    with conn.cursor() as cur:
        cur.execute(FACTS_SQL, {"organization_id": organization_id, "ids": list(ids)})
        return [parse_facts(row["facts"]) for row in cur.fetchall()]


def get_free_time(conn, organization_id, shipment_id, now=None):
    """The FreeTimeSummary of one visible shipment, or None."""
    for facts in load_facts(conn, organization_id, [shipment_id]):
        return free_time.summarize(*facts, now or utc_now())
    return None


def at_risk_candidates(conn, organization_id, now, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Rows (id, facts) of the shipments that may be at risk at `now` (a superset), in one statement."""
    with conn.cursor() as cur:
        _AT_RISK.execute(cur, {"organization_id": organization_id, "now": now, "window_days": window_days})
        return cur.fetchall()


def list_at_risk(conn, organization_id, now=None, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Summaries of the shipments whose demurrage is at risk, most urgent first, in one statement."""
    now = now or utc_now()
    entries = [free_time.at_risk_entry(*parse_facts(row["facts"]), now, window_days)
               for row in at_risk_candidates(conn, organization_id, now, window_days)]
    return [summary for _key, summary in sorted((entry for entry in entries if entry is not None),
                                                key=lambda entry: entry[0])]
