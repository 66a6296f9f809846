"""The demo simulator behind `flask --app app demo simulate`: a few shipments change every few seconds.

It writes what the organization's application would write, in plain SQL on the tables the application
owns (docs/decisions.md, "Who writes what"): a shipment whose next milestone is due moves on to its next
status with the carrier's tracking event, the carrier revises an ETA (an `eta_drift` alert when it slips
by more than six hours), a check run finishes, an old alert is resolved, and now and then a new draft
arrives. The database does the rest (revisions, ETA history, the change feed, the webhook events), as for
any writer. Milestones keep real time and their order: a shipment arrives once its ETA has come, hours
after it left, and the carrier's estimate of a milestone becomes the actual event at its time.
"""
import random

# The next status of a shipment that moves on, the tracking milestone recorded with it and the tracking
# status the carrier reports then (None: no milestone, no report).
NEXT_STATUS = {"draft": ("validated", None, None), "validated": ("in_transit", "departed", "in_transit"),
               "in_transit": ("arrived", "arrived", "arrived"), "arrived": ("in_warehouse", "delivered", "delivered")}
# The carrier's tracking statuses in the order a shipment reaches them: one is never set back to an earlier.
TRACKING_ORDER = ("booked", "gate_in", "received", "manifested", "loaded", "in_transit", "transshipment", "arrived",
                  "discharged", "gate_out", "delivered", "empty_returned")
# An ETA that slips by more than this many minutes raises an eta_drift alert.
DRIFT_ALERT_MINUTES = 6 * 60
# Open alerts of the organization above this number are resolved, oldest first, one a step.
OPEN_ALERTS_KEPT = 40

# A shipment whose next milestone is due: a draft an hour after it was entered; a validated one at its
# departure (etd), an hour after validation at the earliest; one in transit once its ETA has come; one
# arrived four hours after its arrival and once the carrier's last estimate (a discharge) has come.
# Visible, not archived; None when nothing is due.
PICK_DUE = """SELECT id, status FROM (
  SELECT s.id, s.status, CASE s.status
           WHEN 'draft' THEN s.created_at + interval '1 hour'
           WHEN 'validated' THEN greatest(s.etd, s.validated_at + interval '1 hour')
           WHEN 'in_transit' THEN s.effective_eta
           WHEN 'arrived' THEN greatest(coalesce((SELECT max(e.occurred_at) FROM tracking_events e
                                                   WHERE e.shipment_id = s.id AND e.actual AND e.milestone = 'arrived'
                                                     AND e.location_name = s.destination_location),
                                                 s.effective_eta) + interval '4 hours',
                                        (SELECT max(e.occurred_at) FROM tracking_events e
                                          WHERE e.shipment_id = s.id AND NOT e.actual)) END AS due
    FROM shipments s
   WHERE s.organization_id = %(org)s AND s.status = ANY(%(statuses)s)
     AND NOT s.archived AND NOT s.awaiting_approval AND NOT s.owned_elsewhere) candidates
 WHERE due <= now() ORDER BY random() LIMIT 1"""
# The application moves a shipment to its next status; a tracked shipment's carrier reports it too.
SET_STATUS = """UPDATE shipments SET status = %(status)s, updated_at = now(),
       tracking_status = CASE WHEN %(tracking)s::text IS NULL OR tracking_state <> 'available'
                                   OR halted_reason IS NOT NULL OR tracking_status = ANY(%(reached)s)
                              THEN tracking_status ELSE %(tracking)s END,
       last_tracked_at = CASE WHEN %(tracking)s::text IS NULL OR tracking_state <> 'available'
                                   OR halted_reason IS NOT NULL THEN last_tracked_at ELSE now() END
 WHERE id = %(id)s"""
# The carrier confirms its estimates whose time has come: an estimated event becomes the actual one, at its time.
CONFIRM_ESTIMATES = """UPDATE tracking_events SET actual = true
 WHERE shipment_id = %(id)s AND NOT actual AND occurred_at <= now()"""
# The milestone that goes with the new status, now, unless the carrier already reported it or a later one.
INSERT_MILESTONE = """INSERT INTO tracking_events (shipment_id, milestone, actual, occurred_at, location_name)
SELECT s.id, %(milestone)s, true, now(),
       CASE WHEN %(milestone)s = 'departed' THEN s.origin_location ELSE s.destination_location END
  FROM shipments s
 WHERE s.id = %(id)s
   AND NOT EXISTS (SELECT 1 FROM tracking_events e
                    WHERE e.shipment_id = s.id AND e.actual
                      AND milestone_rank(e.milestone) BETWEEN milestone_rank(%(milestone)s)
                                                          AND milestone_rank('empty_return')
                      AND (e.milestone <> 'arrived' OR e.location_name = s.destination_location))"""
# Delivered: the carrier's estimates without a time (a discharge it never dated) are dropped.
DROP_ESTIMATES = "DELETE FROM tracking_events WHERE shipment_id = %(id)s AND NOT actual"
# A shipment in transit whose ETA is still ahead, for the carrier to revise.
PICK_IN_TRANSIT = """SELECT id, eta, now() AS now FROM shipments
 WHERE organization_id = %(org)s AND status = 'in_transit' AND eta > now()
   AND NOT archived AND NOT awaiting_approval AND NOT owned_elsewhere
 ORDER BY random() LIMIT 1"""
# The carrier's new ETA (the trigger writes the revision and the event); its containers' ETAs and its
# estimated arrival and discharge move with it.
MOVE_ETA = """UPDATE shipments SET eta = eta + %(minutes)s * interval '1 minute', updated_at = now()
 WHERE id = %(id)s RETURNING eta"""
MOVE_ESTIMATES = """UPDATE tracking_events SET occurred_at = occurred_at + %(minutes)s * interval '1 minute'
 WHERE shipment_id = %(id)s AND NOT actual AND occurred_at IS NOT NULL"""
MOVE_CONTAINER_ETAS = """UPDATE containers SET eta = eta + %(minutes)s * interval '1 minute'
 WHERE shipment_id = %(id)s AND eta IS NOT NULL"""
# A revised ETA is at least this far ahead: the carrier's estimate of an arrival still to come.
ETA_AHEAD_MINUTES = 30
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
# A new draft entered by a person, copied from one of the organization's shipments with its voyage's
# length (the reference is the database's default), leaving in a day; at most one every ten minutes.
NEW_DRAFT = """INSERT INTO shipments (organization_id, erp_reference, transport_type, cargo_type, temperature_celsius,
  origin_location, origin_country, origin_timezone, destination_location, destination_country, destination_timezone,
  carrier_name, carrier_scac, consignor, consignee, draft_produce, status, etd, eta)
SELECT organization_id, 'PO-' || (90000 + floor(random() * 9999))::int, transport_type, cargo_type,
       temperature_celsius, origin_location, origin_country, origin_timezone, destination_location,
       destination_country, destination_timezone, carrier_name, carrier_scac, consignor, consignee,
       draft_produce, 'draft', date_trunc('hour', now()) + interval '1 day',
       CASE WHEN eta > etd THEN date_trunc('hour', now()) + interval '1 day' + (eta - etd) END
  FROM shipments WHERE organization_id = %(org)s AND NOT awaiting_approval AND NOT owned_elsewhere
   AND NOT EXISTS (SELECT 1 FROM shipments WHERE organization_id = %(org)s
                    AND created_at > now() - interval '10 minutes')
 ORDER BY random() LIMIT 1 RETURNING id"""
# Outcomes a re-run check may get.
CHECK_OUTCOMES = (("passed", "Checked again: fine."), ("warning", "Checked again: worth a look."),
                  ("failed", "Checked again: this needs fixing."))


def advance_status(conn, org):
    """Move one shipment whose next milestone is due on to its next status, with its milestone; a line, or None."""
    with conn.cursor() as cur:
        cur.execute(PICK_DUE, {"org": org, "statuses": list(NEXT_STATUS)})
        row = cur.fetchone()
        if row is None:
            return None
        status, milestone, tracking = NEXT_STATUS[row["status"]]
        reached = list(TRACKING_ORDER[TRACKING_ORDER.index(tracking):]) if tracking else []
        cur.execute(SET_STATUS, {"status": status, "tracking": tracking, "reached": reached, "id": row["id"]})
        if milestone:
            cur.execute(CONFIRM_ESTIMATES, {"id": row["id"]})
            cur.execute(INSERT_MILESTONE, {"milestone": milestone, "id": row["id"]})
        if status == "in_warehouse":
            cur.execute(DROP_ESTIMATES, {"id": row["id"]})
    return f"shp_{row['id']} status {row['status']} -> {status}"


def revise_eta(conn, org, rng):
    """Move one ETA still ahead by 20 minutes to 9 hours either way (never into the past); an alert when it slips far."""
    minutes = rng.choice((-1, 1, 1)) * rng.randint(20, 9 * 60)
    with conn.cursor() as cur:
        cur.execute(PICK_IN_TRANSIT, {"org": org})
        row = cur.fetchone()
        if row is None:
            return None
        if minutes < 0 and (row["eta"] - row["now"]).total_seconds() / 60 + minutes < ETA_AHEAD_MINUTES:
            minutes = -minutes   # an earlier arrival than that would be one already past: later instead
        cur.execute(MOVE_ETA, {"minutes": minutes, "id": row["id"]})
        eta = cur.fetchone()["eta"]
        cur.execute(MOVE_ESTIMATES, {"minutes": minutes, "id": row["id"]})
        cur.execute(MOVE_CONTAINER_ETAS, {"minutes": minutes, "id": row["id"]})
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
