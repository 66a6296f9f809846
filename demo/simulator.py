"""The demo simulator behind `flask --app app demo simulate`: a few shipments change every few seconds.

It writes what the organization's application would write, in plain SQL on the tables the application
owns (docs/decisions.md, "Who writes what"): a shipment moves on to its next status with a tracking event, the
carrier revises an ETA (an `eta_drift` alert when it slips by more than six hours), a check run
finishes, an old alert is resolved, and, once nothing is left to move on, a new draft arrives. The
database does the rest (revisions, ETA history, the change feed, the webhook events), as for any writer.
"""
import random

# The next status of a shipment that moves on, and the tracking milestone recorded with it.
NEXT_STATUS = {"draft": ("validated", None), "validated": ("in_transit", "departed"),
               "in_transit": ("arrived", "arrived"), "arrived": ("in_warehouse", "delivered")}
# An ETA that slips by more than this many minutes raises an eta_drift alert.
DRIFT_ALERT_MINUTES = 6 * 60
# Open alerts of the organization above this number are resolved, oldest first, one a step.
OPEN_ALERTS_KEPT = 40

# A shipment that can move on: visible, not archived, in a status that has a next one.
PICK_MOVABLE = """SELECT id, status FROM shipments
 WHERE organization_id = %(org)s AND status = ANY(%(statuses)s)
   AND NOT archived AND NOT awaiting_approval AND NOT owned_elsewhere
 ORDER BY random() LIMIT 1"""
# The application moves a shipment to its next status.
SET_STATUS = "UPDATE shipments SET status = %(status)s, updated_at = now() WHERE id = %(id)s"
# The carrier reports the milestone that goes with it.
INSERT_MILESTONE = """INSERT INTO tracking_events (shipment_id, milestone, actual, occurred_at, location_name)
SELECT id, %(milestone)s, true, now(),
       CASE WHEN %(milestone)s = 'departed' THEN origin_location ELSE destination_location END
  FROM shipments WHERE id = %(id)s"""
# A shipment in transit whose ETA the carrier can revise.
PICK_IN_TRANSIT = """SELECT id, eta FROM shipments
 WHERE organization_id = %(org)s AND status = 'in_transit' AND eta IS NOT NULL
   AND NOT archived AND NOT awaiting_approval AND NOT owned_elsewhere
 ORDER BY random() LIMIT 1"""
# The carrier's new ETA (the trigger writes the revision and the event).
MOVE_ETA = """UPDATE shipments SET eta = eta + %(minutes)s * interval '1 minute', updated_at = now()
 WHERE id = %(id)s RETURNING eta"""
# The monitoring raises an alert on the shipment.
INSERT_ALERT = """INSERT INTO alerts (organization_id, shipment_id, key, severity, title, summary)
VALUES (%(org)s, %(id)s, %(key)s, %(severity)s, %(title)s, %(summary)s)"""
# A shipment whose checks can run again.
PICK_CHECKED = """SELECT s.id FROM shipments s
 WHERE s.organization_id = %(org)s AND NOT s.archived AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
   AND EXISTS (SELECT 1 FROM checks c WHERE c.shipment_id = s.id)
 ORDER BY random() LIMIT 1"""
# A new check run, still going.
START_RUN = """INSERT INTO check_runs (organization_id, shipment_id, started_at)
VALUES (%(org)s, %(id)s, now()) RETURNING id"""
# The run's results: every check of the shipment, one of them with a new outcome.
WRITE_RESULTS = """UPDATE checks SET check_run_id = %(run)s, ran_at = now(),
       status = CASE WHEN key = %(key)s THEN %(status)s ELSE status END,
       message = CASE WHEN key = %(key)s THEN %(message)s ELSE message END
 WHERE shipment_id = %(id)s RETURNING key"""
# The run finishes (the trigger makes the checks_completed event from its results).
FINISH_RUN = "UPDATE check_runs SET finished_at = now() WHERE id = %(run)s"
# The oldest open alert, resolved when the organization has more than OPEN_ALERTS_KEPT.
RESOLVE_OLDEST_ALERT = """UPDATE alerts SET resolved_at = now()
 WHERE id = (SELECT id FROM alerts WHERE organization_id = %(org)s AND resolved_at IS NULL ORDER BY id LIMIT 1)
   AND (SELECT count(*) FROM alerts WHERE organization_id = %(org)s AND resolved_at IS NULL) > %(kept)s
RETURNING id, shipment_id"""
# A new draft entered by a person, copied from one of the organization's shipments (the reference is the
# database's default).
NEW_DRAFT = """INSERT INTO shipments (organization_id, erp_reference, transport_type, cargo_type, temperature_celsius,
  origin_location, origin_country, origin_timezone, destination_location, destination_country, destination_timezone,
  carrier_name, carrier_scac, consignor, consignee, draft_produce, status)
SELECT organization_id, 'PO-' || (90000 + floor(random() * 9999))::int, transport_type, cargo_type,
       temperature_celsius, origin_location, origin_country, origin_timezone, destination_location,
       destination_country, destination_timezone, carrier_name, carrier_scac, consignor, consignee,
       draft_produce, 'draft'
  FROM shipments WHERE organization_id = %(org)s AND NOT awaiting_approval AND NOT owned_elsewhere
 ORDER BY random() LIMIT 1 RETURNING id"""
# Outcomes a re-run check may get.
CHECK_OUTCOMES = (("passed", "Checked again: fine."), ("warning", "Checked again: worth a look."),
                  ("failed", "Checked again: this needs fixing."))


def advance_status(conn, org):
    """Move one shipment on to its next status, with its milestone; a line saying so, or None."""
    with conn.cursor() as cur:
        cur.execute(PICK_MOVABLE, {"org": org, "statuses": list(NEXT_STATUS)})
        row = cur.fetchone()
        if row is None:
            return None
        status, milestone = NEXT_STATUS[row["status"]]
        cur.execute(SET_STATUS, {"status": status, "id": row["id"]})
        if milestone:
            cur.execute(INSERT_MILESTONE, {"milestone": milestone, "id": row["id"]})
    return f"shp_{row['id']} status {row['status']} -> {status}"


def revise_eta(conn, org, rng):
    """Move one ETA in transit by 20 minutes to 9 hours either way; an alert when it slips far."""
    minutes = rng.choice((-1, 1, 1)) * rng.randint(20, 9 * 60)
    with conn.cursor() as cur:
        cur.execute(PICK_IN_TRANSIT, {"org": org})
        row = cur.fetchone()
        if row is None:
            return None
        cur.execute(MOVE_ETA, {"minutes": minutes, "id": row["id"]})
        eta = cur.fetchone()["eta"]
        line = f"shp_{row['id']} eta {minutes:+d} min -> {eta:%Y-%m-%d %H:%M}Z"
        if minutes > DRIFT_ALERT_MINUTES:
            cur.execute(INSERT_ALERT, {"org": org, "id": row["id"], "key": "eta_drift", "severity": "warning",
                                       "title": "ETA moved", "summary": f"The carrier moved the arrival to "
                                                                        f"{eta:%d %b %Y %H:%M} UTC."})
            line += ", alert eta_drift"
    return line


def run_checks(conn, org, rng):
    """Run one shipment's checks again, one with a new outcome, and finish the run."""
    with conn.cursor() as cur:
        cur.execute(PICK_CHECKED, {"org": org})
        row = cur.fetchone()
        if row is None:
            return None
        cur.execute(START_RUN, {"org": org, "id": row["id"]})
        run = cur.fetchone()["id"]
        cur.execute("SELECT key FROM checks WHERE shipment_id = %(id)s ORDER BY id", {"id": row["id"]})
        key = rng.choice([each["key"] for each in cur.fetchall()])
        status, message = rng.choice(CHECK_OUTCOMES)
        cur.execute(WRITE_RESULTS, {"run": run, "key": key, "status": status, "message": message, "id": row["id"]})
        cur.execute(FINISH_RUN, {"run": run})
    return f"shp_{row['id']} checks run, {key} {status}"


def resolve_old_alert(conn, org):
    """Resolve the oldest open alert once the organization has more than OPEN_ALERTS_KEPT."""
    with conn.cursor() as cur:
        cur.execute(RESOLVE_OLDEST_ALERT, {"org": org, "kept": OPEN_ALERTS_KEPT})
        row = cur.fetchone()
    return None if row is None else f"shp_{row['shipment_id']} alert alr_{row['id']} resolved"


def new_draft(conn, org):
    """A new draft shipment, like one a person enters."""
    with conn.cursor() as cur:
        cur.execute(NEW_DRAFT, {"org": org})
        row = cur.fetchone()
    return None if row is None else f"shp_{row['id']} new draft"


def step(conn, org, rng=random):
    """One step of the simulation, each change in a transaction of its own; yields a line per change made."""
    changes = [lambda: advance_status(conn, org) or new_draft(conn, org), lambda: revise_eta(conn, org, rng),
               lambda: run_checks(conn, org, rng), lambda: resolve_old_alert(conn, org)]
    for change in changes:
        try:
            line = change()
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        if line:
            yield line
