"""Free time from the database: load the facts the engine needs, for one shipment or the at-risk candidates.

A constant number of statements whatever the number of shipments: one per kind of fact.
"""
from datetime import datetime, timezone

from models import free_time
from models.free_time_rules import KINDS, resolve_terms

# free-time facts of visible shipments, one row each: the shipment with its own terms, the latest arrival
# notice stating each kind's free days, the organization's terms for its carrier, its container numbers
# (oldest first) and, for ocean shipments, the tracking events that start, stop or end a clock, as parallel
# arrays (one row per shipment keeps a page of candidates to one round trip).  {shipments} picks the ids.
_FACTS_SQL = """
SELECT s.id, s.reference, s.transport_reference, s.transport_type, s.status, s.carrier_name,
       s.demurrage_free_days, s.detention_free_days, s.free_days_basis,
       nd.free_days AS notice_demurrage_free_days, nd.basis AS notice_demurrage_basis,
       nt.free_days AS notice_detention_free_days, nt.basis AS notice_detention_basis,
       ct.id AS carrier_terms_id, ct.demurrage_free_days AS carrier_demurrage_free_days,
       ct.detention_free_days AS carrier_detention_free_days, ct.free_days_basis AS carrier_free_days_basis,
       c.numbers, e.milestones, e.actuals, e.occurred_ats, e.offsets, e.container_numbers
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
  CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(k.number ORDER BY k.id), '{{}}') AS numbers FROM containers k
     WHERE k.shipment_id = s.id AND k.number IS NOT NULL) c
  CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(v.milestone ORDER BY v.occurred_at, v.id), '{{}}') AS milestones,
           coalesce(array_agg(v.actual ORDER BY v.occurred_at, v.id), '{{}}') AS actuals,
           coalesce(array_agg(v.occurred_at ORDER BY v.occurred_at, v.id), '{{}}') AS occurred_ats,
           coalesce(array_agg(v.occurred_at_offset_minutes ORDER BY v.occurred_at, v.id), '{{}}') AS offsets,
           coalesce(array_agg(v.container_number ORDER BY v.occurred_at, v.id), '{{}}') AS container_numbers
      FROM tracking_events v
     WHERE v.shipment_id = s.id AND s.transport_type = 'ocean' AND v.milestone = ANY (%(milestones)s)) e
 WHERE s.organization_id = %(organization_id)s AND s.id IN ({shipments})
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
"""

# list_free_time_at_risk: candidate shipments, found through tracking_events_discharged_idx (recent actual
# discharges); a discharge counts when no gate-out of its container follows it (tracking_events_gate_out_idx)
# and the demurrage free days are known and few enough to leave at most 2 days.  A superset: the engine decides.
_AT_RISK_CANDIDATES_SQL = """
  WITH open_discharges AS MATERIALIZED (
    SELECT d.shipment_id, d.occurred_at, s.organization_id, s.carrier_name, s.demurrage_free_days,
           s.free_days_basis
      FROM tracking_events d
      JOIN shipments s ON s.id = d.shipment_id
     WHERE d.milestone = 'discharged' AND d.actual
       AND d.occurred_at >= %(now)s - make_interval(days => %(window_days)s + 1)
       AND s.organization_id = %(organization_id)s
       AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
       AND s.transport_type = 'ocean' AND NOT s.archived AND s.status <> 'in_warehouse'
       AND NOT EXISTS (
         SELECT 1 FROM tracking_events g
          WHERE g.shipment_id = d.shipment_id AND g.milestone = 'gate_out' AND g.actual
            AND g.occurred_at >= d.occurred_at
            AND (g.container_number IS NULL
                 OR compact_reference(g.container_number) = compact_reference(d.container_number))))
  SELECT o.shipment_id
    FROM open_discharges o
    LEFT JOIN carrier_terms ct ON ct.organization_id = o.organization_id AND lower(ct.carrier) = lower(o.carrier_name)
   CROSS JOIN LATERAL (
     SELECT f.free_days, coalesce(f.basis, 'calendar') AS basis
       FROM (SELECT 1 AS rank, o.demurrage_free_days AS free_days, o.free_days_basis AS basis
              WHERE o.demurrage_free_days IS NOT NULL
             UNION ALL
             (SELECT 2, n.demurrage_free_days, n.free_days_basis FROM arrival_notices n
               WHERE n.shipment_id = o.shipment_id AND n.demurrage_free_days IS NOT NULL
               ORDER BY n.received_at DESC, n.id DESC LIMIT 1)
             UNION ALL
             SELECT 3, ct.demurrage_free_days, ct.free_days_basis WHERE ct.id IS NOT NULL) f
      ORDER BY f.rank LIMIT 1) t
   -- At most 2 days left: on the calendar basis, discharge day + free days <= today + 3, so the
   -- discharge instant + free days < now + 4 days (the port's offset shifts both days alike); on the
   -- working basis the last free day may be a weekend later, so < now + 6 days.
   WHERE o.occurred_at + make_interval(days => t.free_days)
         < %(now)s + CASE t.basis WHEN 'working' THEN interval '6 days' ELSE interval '4 days' END
"""

FACTS_SQL = _FACTS_SQL.format(shipments="SELECT unnest(%(ids)s::bigint[])")
AT_RISK_SQL = _FACTS_SQL.format(shipments=_AT_RISK_CANDIDATES_SQL)

EVENT_MILESTONES = sorted(free_time.CLOCK_MILESTONES | free_time.LEFT_TERMINAL | {"untracked"})


def _utc_now():
    return datetime.now(timezone.utc)


def _facts(rows):
    """(shipment, container numbers, events, terms by kind) from rows of FACTS_SQL."""
    for row in rows:
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
        events = [{"milestone": milestone, "actual": actual, "occurred_at": occurred_at,
                   "occurred_at_offset_minutes": offset, "container_number": number}
                  for milestone, actual, occurred_at, offset, number
                  in zip(row["milestones"], row["actuals"], row["occurred_ats"], row["offsets"],
                         row["container_numbers"])]
        yield row, row["numbers"], events, terms


def load_facts(conn, organization_id, ids):
    """The engine's inputs (shipment, container numbers, events, terms by kind) for the visible ones of `ids`."""
    with conn.cursor() as cur:
        cur.execute(FACTS_SQL, {"organization_id": organization_id, "ids": list(ids),
                                "milestones": EVENT_MILESTONES})
        return list(_facts(cur.fetchall()))


def get_free_time(conn, organization_id, shipment_id, now=None):
    """The FreeTimeSummary of one visible shipment, or None."""
    for facts in load_facts(conn, organization_id, [shipment_id]):
        return free_time.summarize(*facts, now or _utc_now())
    return None


def list_at_risk(conn, organization_id, now=None, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Summaries of the shipments whose demurrage is at risk, most urgent first, in one statement."""
    now = now or _utc_now()
    with conn.cursor() as cur:
        cur.execute(AT_RISK_SQL, {"organization_id": organization_id, "now": now, "window_days": window_days,
                                  "milestones": EVENT_MILESTONES})
        rows = cur.fetchall()
    entries = [free_time.at_risk_entry(*facts, now, window_days) for facts in _facts(rows)]
    return [summary for _key, summary in sorted((entry for entry in entries if entry is not None),
                                                key=lambda entry: entry[0])]
