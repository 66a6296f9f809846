"""Free time from the database: load the facts the engine needs, for one shipment or the at-risk candidates.

A constant number of statements whatever the number of shipments: one per kind of fact.
"""
from datetime import datetime, timezone

from models import free_time
from models.free_time_rules import KINDS, resolve_terms

# free-time facts of a set of visible shipments: their own terms and the organization's terms for their carrier.
SHIPMENTS_SQL = """
SELECT s.id, s.reference, s.transport_reference, s.transport_type, s.status, s.carrier_name,
       s.demurrage_free_days, s.detention_free_days, s.free_days_basis,
       ct.id AS carrier_terms_id, ct.demurrage_free_days AS carrier_demurrage_free_days,
       ct.detention_free_days AS carrier_detention_free_days, ct.free_days_basis AS carrier_free_days_basis
  FROM shipments s
  LEFT JOIN carrier_terms ct ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
 WHERE s.organization_id = %(organization_id)s AND s.id = ANY (%(ids)s)
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
"""

# arrival notices of a set of shipments, latest received first (the latest one stating free days wins).
NOTICES_SQL = """
SELECT n.shipment_id, n.demurrage_free_days, n.detention_free_days, n.free_days_basis
  FROM arrival_notices n
 WHERE n.shipment_id = ANY (%(ids)s)
 ORDER BY n.shipment_id, n.received_at DESC, n.id DESC
"""

# container numbers of a set of shipments, oldest container first (the order of the clock lists).
CONTAINERS_SQL = """
SELECT c.shipment_id, c.number FROM containers c
 WHERE c.shipment_id = ANY (%(ids)s) AND c.number IS NOT NULL
 ORDER BY c.shipment_id, c.id
"""

# tracking events of a set of shipments that start, stop or end a clock.
EVENTS_SQL = """
SELECT e.shipment_id, e.milestone, e.actual, e.occurred_at, e.occurred_at_offset_minutes, e.container_number
  FROM tracking_events e
 WHERE e.shipment_id = ANY (%(ids)s) AND e.milestone = ANY (%(milestones)s)
 ORDER BY e.shipment_id, e.occurred_at, e.id
"""

# list_free_time_at_risk: candidate shipments, found through tracking_events_discharged_idx (recent actual
# discharges), then kept only when that discharge has no later gate-out for its container and the demurrage
# free days are known and few enough to leave at most 2 days.  A superset: the engine decides.
AT_RISK_CANDIDATES_SQL = """
SELECT DISTINCT d.shipment_id
  FROM tracking_events d
  JOIN shipments s ON s.id = d.shipment_id
  LEFT JOIN carrier_terms ct ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
  CROSS JOIN LATERAL (
    SELECT coalesce(s.demurrage_free_days,
                    (SELECT n.demurrage_free_days FROM arrival_notices n
                      WHERE n.shipment_id = s.id AND n.demurrage_free_days IS NOT NULL
                      ORDER BY n.received_at DESC, n.id DESC LIMIT 1),
                    ct.demurrage_free_days) AS free_days) t
 WHERE d.milestone = 'discharged' AND d.actual
   AND d.occurred_at >= %(now)s - make_interval(days => %(window_days)s + 1)
   AND s.organization_id = %(organization_id)s
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
   AND s.transport_type = 'ocean' AND NOT s.archived AND s.status <> 'in_warehouse'
   AND t.free_days IS NOT NULL
   -- At most 2 days left: the last free day is no later than today + 4 (a weekend on the working
   -- basis), and it is at least discharge + free days - 1; a day more for the port's offset.
   AND d.occurred_at + make_interval(days => t.free_days) <= %(now)s + interval '6 days'
   AND NOT EXISTS (
     SELECT 1 FROM tracking_events g
      WHERE g.shipment_id = d.shipment_id AND g.milestone = 'gate_out' AND g.actual
        AND g.occurred_at >= d.occurred_at
        AND (g.container_number IS NULL
             OR compact_reference(g.container_number) = compact_reference(d.container_number)))
"""

EVENT_MILESTONES = sorted(free_time.CLOCK_MILESTONES | free_time.LEFT_TERMINAL | {"untracked"})


def _utc_now():
    return datetime.now(timezone.utc)


def load_facts(conn, organization_id, ids):
    """{shipment id: (shipment, container numbers, events, terms by kind)} for the visible ones of `ids`."""
    with conn.cursor() as cur:
        cur.execute(SHIPMENTS_SQL, {"organization_id": organization_id, "ids": list(ids)})
        shipments = cur.fetchall()
        if not shipments:
            return {}
        # Only ocean shipments have clocks; the others need no more facts.
        ocean = [row["id"] for row in shipments if row["transport_type"] == "ocean"]
        notices, containers, events = {}, {}, {}
        if ocean:
            cur.execute(NOTICES_SQL, {"ids": ocean})
            notices = _group(cur.fetchall())
            cur.execute(CONTAINERS_SQL, {"ids": ocean})
            containers = _group(cur.fetchall())
            cur.execute(EVENTS_SQL, {"ids": ocean, "milestones": EVENT_MILESTONES})
            events = _group(cur.fetchall())
    facts = {}
    for row in shipments:
        carrier_terms = None
        if row["carrier_terms_id"] is not None:
            carrier_terms = {f"{kind}_free_days": row[f"carrier_{kind}_free_days"] for kind in KINDS}
            carrier_terms["free_days_basis"] = row["carrier_free_days_basis"]
        terms = {kind: resolve_terms(kind, row, notices.get(row["id"], []), carrier_terms) for kind in KINDS}
        numbers = [container["number"] for container in containers.get(row["id"], [])]
        facts[row["id"]] = (row, numbers, events.get(row["id"], []), terms)
    return facts


def get_free_time(conn, organization_id, shipment_id, now=None):
    """The FreeTimeSummary of one visible shipment, or None."""
    facts = load_facts(conn, organization_id, [shipment_id]).get(shipment_id)
    if facts is None:
        return None
    return free_time.summarize(*facts, now or _utc_now())


def list_at_risk(conn, organization_id, now=None, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Summaries of the shipments whose demurrage is at risk, most urgent first."""
    now = now or _utc_now()
    with conn.cursor() as cur:
        cur.execute(AT_RISK_CANDIDATES_SQL, {"organization_id": organization_id, "now": now,
                                             "window_days": window_days})
        ids = [row["shipment_id"] for row in cur.fetchall()]
    if not ids:
        return []
    entries = [free_time.at_risk_entry(*facts, now, window_days)
               for facts in load_facts(conn, organization_id, ids).values()]
    return [summary for _key, summary in sorted((entry for entry in entries if entry is not None),
                                                key=lambda entry: entry[0])]


def _group(rows):
    grouped = {}
    for row in rows:
        grouped.setdefault(row.pop("shipment_id"), []).append(row)
    return grouped
