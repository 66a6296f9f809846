"""Free time from the database: load the facts the engine needs, for one shipment or the at-risk candidates.

A constant number of statements whatever the number of shipments: one per kind of fact.
"""
import json
from datetime import datetime, timezone

from models import free_time
from models.db import Prepared, execute_all
from models.free_time_rules import KINDS, resolve_terms

# The milestones the engine reads; tracking_events_free_time_idx holds exactly these (a literal list, so
# that the planner can use that partial index).
EVENT_MILESTONES = sorted(free_time.CLOCK_MILESTONES | free_time.LEFT_TERMINAL | {"untracked"})

# load_facts: the free-time facts of these visible shipments, one row (id, facts) each: the free_time_facts
# function of schema.sql (it says what the facts text holds), inlined here for these ids.
FACTS_SQL = """
SELECT f.id, f.facts
  FROM free_time_facts(%(organization_id)s) f
 WHERE f.id IN (SELECT unnest(%(ids)s::bigint[]))
"""

# list_free_time_at_risk: the same facts, of the shipments that may be at risk at `now` (the
# at_risk_candidates function of schema.sql: a superset, the engine decides), in one statement.
AT_RISK_SQL = """
SELECT f.id, f.facts
  FROM free_time_facts(%(organization_id)s) f
 WHERE f.id IN (SELECT c.shipment_id FROM at_risk_candidates(%(organization_id)s, %(now)s, %(window_days)s) c)
"""
# Prepared: planning it costs about as much as running it, and its plan does not depend on the values.
_AT_RISK = Prepared("free_time_at_risk", AT_RISK_SQL)


def utc_now():
    """The current instant, aware, in UTC."""
    return datetime.now(timezone.utc)


# The positions of the facts array (schema.sql free_time_facts) before the container numbers and the events.
FACT_FIELDS = ("id", "reference", "transport_reference", "transport_type", "status", "carrier_name",
               "demurrage_free_days", "detention_free_days", "free_days_basis",
               "notice_demurrage_free_days", "notice_demurrage_basis",
               "notice_detention_free_days", "notice_detention_basis",
               "carrier_terms_id", "carrier_demurrage_free_days", "carrier_detention_free_days",
               "carrier_free_days_basis")


def parse_facts(text):
    """(shipment, container numbers, events, terms by kind) from the `facts` text of a free_time_facts row."""
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
    rows = execute_all(conn, FACTS_SQL, {"organization_id": organization_id, "ids": list(ids)})
    return [parse_facts(row["facts"]) for row in rows]


def get_free_time(conn, organization_id, shipment_id, now=None):
    """The FreeTimeSummary of one visible shipment, or None."""
    for facts in load_facts(conn, organization_id, [shipment_id]):
        return free_time.summarize(*facts, now or utc_now())
    return None


def at_risk_candidates(conn, organization_id, now, window_days=free_time.AT_RISK_WINDOW_DAYS):
    """Rows (id, facts) of the shipments that may be at risk at `now` (a superset), in one statement."""
    return execute_all(conn, _AT_RISK, {"organization_id": organization_id, "now": now, "window_days": window_days})

