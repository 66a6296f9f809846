"""A shipment's timeline: legs, tracking events in journey order, ETA revisions.

The placement of events without a time is described, with an example, in docs/timeline.md.
"""
from datetime import timedelta, timezone

from models.db import execute_all

# get_timeline: the visible shipment (one row even without legs) and its legs in travel order.
# `position` is renumbered from zero so that gaps in the stored positions never show.
LEGS_SQL = """
SELECT s.id AS found_shipment_id, l.id,
       (row_number() OVER (ORDER BY l.position, l.id) - 1)::int AS position,
       l.transport_type, l.carrier, l.transport_reference,
       l.origin_location, l.origin_country, l.origin_timezone,
       l.destination_location, l.destination_country, l.destination_timezone, l.etd, l.eta
  FROM shipments s
  LEFT JOIN shipment_legs l ON l.shipment_id = s.id
 WHERE s.id = %(shipment_id)s AND visible_to(s, %(organization_id)s)
 ORDER BY l.position, l.id
"""

# The shipment's tracking events with the rank of their milestone; served by tracking_events_shipment_idx.
EVENTS_SQL = """
SELECT e.id, e.milestone, milestone_rank(e.milestone) AS rank, e.actual, e.occurred_at,
       e.occurred_at_offset_minutes, e.container_number, e.leg_index,
       e.location_name, e.location_code, e.location_country_code,
       e.vessel_name, e.vessel_imo, e.vessel_voyage, e.flight_number, e.latitude, e.longitude
  FROM tracking_events e
 WHERE e.shipment_id = %(shipment_id)s
 ORDER BY e.occurred_at, rank, e.id
"""

# The shipment's ETA revisions, oldest first; served by eta_revisions_shipment_idx.
REVISIONS_SQL = """
SELECT r.id, r.observed_at, r.previous_eta, r.new_eta, r.slip_seconds, r.first_estimate, r.backfilled
  FROM eta_revisions r
 WHERE r.shipment_id = %(shipment_id)s
 ORDER BY r.observed_at, r.id
"""


def get_timeline(conn, organization_id, shipment_id):
    """The timeline of a visible shipment, or None when the shipment is not found."""
    params = {"organization_id": organization_id, "shipment_id": shipment_id}
    legs = execute_all(conn, LEGS_SQL, params)
    if not legs:
        return None
    events = execute_all(conn, EVENTS_SQL, params)
    revisions = execute_all(conn, REVISIONS_SQL, params)
    return {"shipment_id": shipment_id,
            "legs": [_leg(row) for row in legs if row["id"] is not None],
            "events": [_event(row) for row in journey_order(events)],
            "eta_revisions": revisions}


def journey_order(events):
    """Timed events by (occurred_at, rank, id); each untimed one right after the last timed event of
    rank <= its own (first when there is none), untimed ones at the same place by (rank, id)."""
    timed = sorted((e for e in events if e["occurred_at"] is not None),
                   key=lambda e: (e["occurred_at"], e["rank"], e["id"]))
    last_of_rank = {}
    for index, event in enumerate(timed):
        last_of_rank[event["rank"]] = index
    after = {}  # index of the timed event an untimed one follows (-1: before all) -> untimed events
    for event in events:
        if event["occurred_at"] is None:
            anchor = max((i for rank, i in last_of_rank.items() if rank <= event["rank"]), default=-1)
            after.setdefault(anchor, []).append(event)
    ordered = []
    for index in range(-1, len(timed)):
        if index >= 0:
            ordered.append(timed[index])
        ordered.extend(sorted(after.get(index, []), key=lambda e: (e["rank"], e["id"])))
    return ordered


def _place(row, prefix):
    return {"location": row[prefix + "_location"], "country": row[prefix + "_country"],
            "timezone": row[prefix + "_timezone"]}


def _leg(row):
    return {**row, "origin": _place(row, "origin"), "destination": _place(row, "destination")}


def _event(row):
    """Nest a flat event row into the TrackingEvent shape."""
    occurred_at, offset = row["occurred_at"], row["occurred_at_offset_minutes"]
    local = occurred_at
    if occurred_at is not None:
        zone = timezone(timedelta(minutes=offset)) if offset is not None else timezone.utc
        local = occurred_at.astimezone(zone)
    return {**row, "occurred_at_local": local,
            "location": {"name": row["location_name"], "code": row["location_code"],
                         "country_code": row["location_country_code"]},
            "vessel": {"name": row["vessel_name"], "imo": row["vessel_imo"], "voyage": row["vessel_voyage"]},
            "position": {"latitude": row["latitude"], "longitude": row["longitude"]}}
