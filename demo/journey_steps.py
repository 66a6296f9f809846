"""The steps of a simulated journey (demo/journeys.py), each what the organization's application writes then.

A step is `fn(cur, shipment, at, argument)` on the tables the application owns; it returns the words of its
line. `shipment` is the journey's record of it (demo/journeys.py `member`, plus the facts the booking chose:
places, carrier, containers, vessels), `at` the moment the step happens. The database does the rest: status and
ETA events, ETA revisions, the change feed, the events of finished check runs and new alerts.
"""
from datetime import timedelta

from demo import catalog
from demo.journeys import moment, offset_of
from demo.tracking import STATUS_WORDS
from models.free_time_rules import last_free_day, local_day

# The status a shipment moves to at a step, and the carrier's words for the milestone (STATUS_WORDS).
SET_STATUS = """UPDATE shipments SET status = coalesce(%(status)s, status), tracking_status = %(tracking)s,
       last_tracked_at = %(at)s, carrier_updated_at = %(at)s
 WHERE id = %(id)s RETURNING status"""
SET_ETA = "UPDATE shipments SET eta = %(eta)s WHERE id = %(id)s RETURNING original_eta"
SET_CONTAINER_TIMES = """UPDATE containers SET eta = coalesce(%(eta)s, eta), etd = coalesce(%(etd)s, etd)
 WHERE shipment_id = %(id)s"""
SET_ETD = "UPDATE shipments SET etd = %(at)s WHERE id = %(id)s"
INSERT_EVENT = """INSERT INTO tracking_events (shipment_id, milestone, actual, occurred_at, occurred_at_offset_minutes,
  container_number, leg_index, location_name, location_code, location_country_code, vessel_name, vessel_imo,
  vessel_voyage, latitude, longitude, created_at)
VALUES (%(id)s, %(milestone)s, true, %(at)s, %(offset)s, %(container)s, %(leg)s, %(place)s, %(code)s, %(country)s,
        %(vessel)s, %(imo)s, %(voyage)s, %(latitude)s, %(longitude)s, %(at)s)"""
# The monitoring raises an alert of a kind only while none of that kind is open on the shipment.
OPEN_ALERT = """INSERT INTO alerts (organization_id, shipment_id, key, severity, title, summary, since,
  first_detected_at, last_detected_at)
SELECT s.organization_id, s.id, %(key)s, %(severity)s, %(title)s, %(summary)s, %(at)s, %(at)s, %(at)s
  FROM shipments s
 WHERE s.id = %(id)s
   AND NOT EXISTS (SELECT 1 FROM alerts a WHERE a.shipment_id = s.id AND a.key = %(key)s AND a.resolved_at IS NULL)
RETURNING id"""
RESOLVE_ALERTS = """UPDATE alerts SET resolved_at = %(at)s, last_detected_at = %(at)s
 WHERE shipment_id = %(id)s AND key = %(key)s AND resolved_at IS NULL RETURNING id"""
START_RUN = """INSERT INTO check_runs (organization_id, shipment_id, started_at)
SELECT organization_id, id, %(at)s FROM shipments WHERE id = %(id)s RETURNING id"""
WRITE_CHECK = """INSERT INTO checks (organization_id, shipment_id, check_run_id, key, category, status, title, message,
  ran_at)
SELECT organization_id, id, %(run)s, %(key)s, %(category)s, %(status)s, %(title)s, %(message)s, %(at)s
  FROM shipments WHERE id = %(id)s
ON CONFLICT (shipment_id, key) DO UPDATE SET check_run_id = excluded.check_run_id, status = excluded.status,
  message = excluded.message, ran_at = excluded.ran_at"""
# The run finishes: the trigger makes the checks_completed event from its results.
FINISH_RUN = "UPDATE check_runs SET finished_at = %(at)s WHERE id = %(run)s"
# The free days of the shipment's demurrage: its own, else its carrier's terms (no arrival notices here).
DEMURRAGE_TERMS = """SELECT coalesce(s.demurrage_free_days, t.demurrage_free_days) AS free_days,
       coalesce(s.free_days_basis, t.free_days_basis, 'calendar') AS basis
  FROM shipments s LEFT JOIN carrier_terms t ON t.organization_id = s.organization_id AND t.carrier = s.carrier_name
 WHERE s.id = %(id)s"""

# An ETA this much later than the first estimate raises an eta_drift alert (the demo's minutes are a voyage's days).
DRIFT_ALERT = timedelta(minutes=8)
# A running demurrage clock with this many free days left or fewer raises a demurrage_risk alert (the spec's at_risk).
AT_RISK_DAYS = 2
# The receiving checks: (key, status, message); the one the carrier's papers got wrong becomes a warning.
RECEIVING_CHECKS = {
    "has_commercial_invoice": ("passed", "Invoice received with the arrival notice."),
    "has_packing_list": ("passed", "Packing list read."),
    "has_transport_document": ("passed", "Bill of lading received."),
    "has_phytosanitary_certificate": ("passed", "Certificate received."),
    "packing_list_totals_match": ("passed", "Declared totals match the lines."),
    "container_numbers_match": ("passed", "Container numbers match."),
    "temperature_set_point": ("passed", "Set point suits the produce."),
    "consignee_matches": ("passed", "The consignee is the organization."),
}
RECEIVING_WARNINGS = {"packing_list_totals_match": "The packing list declares 12 boxes more than its lines add up to.",
                      "has_phytosanitary_certificate": "The certificate names another port of entry."}


def set_status(cur, shipment, at, status, milestone):
    """Move the shipment to `status` (None: keep it), with the carrier's words for `milestone`; (old, new)."""
    cur.execute("SELECT status FROM shipments WHERE id = %(id)s", {"id": shipment["shipment_id"]})
    old = cur.fetchone()["status"]
    cur.execute(SET_STATUS, {"status": status, "tracking": STATUS_WORDS[milestone], "at": at,
                             "id": shipment["shipment_id"]})
    return "" if status is None or status == old else f", status {old} -> {status}"


def record(cur, shipment, milestone, at, place, leg=None, vessel=None, each_container=True):
    """The carrier's milestone at `place`, for each container (or for the shipment)."""
    containers = shipment["containers"] if each_container else [None]
    for number in containers:
        cur.execute(INSERT_EVENT, {
            "id": shipment["shipment_id"], "milestone": milestone, "at": at, "offset": place.offset,
            "container": number, "leg": leg, "place": place.name, "code": place.locode,
            "country": place.country_code, "vessel": vessel and vessel[0], "imo": vessel and vessel[1],
            "voyage": vessel and vessel[2], "latitude": place.latitude if vessel else None,
            "longitude": place.longitude if vessel else None})


def open_alert(cur, shipment, at, key, severity, title, summary):
    """Open an alert of `key` unless one is open; the words of the line."""
    cur.execute(OPEN_ALERT, {"id": shipment["shipment_id"], "key": key, "severity": severity, "title": title,
                             "summary": summary, "at": at})
    return f", alert {key}" if cur.fetchone() else ""


def resolve_alerts(cur, shipment, at, key):
    """Resolve the open alert of `key`; the words of the line."""
    cur.execute(RESOLVE_ALERTS, {"id": shipment["shipment_id"], "key": key, "at": at})
    return f", alert {key} resolved" if cur.fetchall() else ""


def validate(cur, shipment, at, _argument):
    """The key facts are confirmed: draft -> validated."""
    return "validated" + set_status(cur, shipment, at, "validated", "booked")


def depart(cur, shipment, at, _argument):
    """Loaded and departed on the first vessel: in transit."""
    record(cur, shipment, "loaded", at, shipment["origin"], 1, shipment["vessels"][0])
    record(cur, shipment, "departed", at, shipment["origin"], 1, shipment["vessels"][0])
    cur.execute(SET_ETD, {"id": shipment["shipment_id"], "at": at})
    cur.execute(SET_CONTAINER_TIMES, {"id": shipment["shipment_id"], "etd": at, "eta": None})
    return f"departed {shipment['origin'].name}" + set_status(cur, shipment, at, "in_transit", "departed")


def revise_eta(cur, shipment, at, offset):
    """The carrier's new ETA, later than the last; an eta_drift alert once it is well past the first estimate."""
    eta = moment(shipment, offset).replace(microsecond=0)
    cur.execute("SELECT eta FROM shipments WHERE id = %(id)s", {"id": shipment["shipment_id"]})
    previous = cur.fetchone()["eta"]
    cur.execute(SET_ETA, {"id": shipment["shipment_id"], "eta": eta})
    original = cur.fetchone()["original_eta"]
    cur.execute(SET_CONTAINER_TIMES, {"id": shipment["shipment_id"], "eta": eta, "etd": None})
    line = f"eta {(eta - previous).total_seconds() / 60:+.0f} min -> {eta:%Y-%m-%d %H:%M}Z"
    if original is not None and eta - original > DRIFT_ALERT:
        line += open_alert(cur, shipment, at, "eta_drift", "warning", "ETA moved",
                           f"The carrier moved the arrival to {eta:%d %b %Y %H:%M} UTC.")
    return line


def transship(cur, shipment, at, _argument):
    """Arrived at the hub and discharged there, to wait for the second vessel."""
    record(cur, shipment, "transshipment_arrival", at, shipment["hub"], 1, shipment["vessels"][0])
    record(cur, shipment, "transshipment_discharge", at, shipment["hub"], 1, shipment["vessels"][0])
    set_status(cur, shipment, at, None, "transshipment_discharge")
    return f"transshipped at {shipment['hub'].name}"


def transship_depart(cur, shipment, at, _argument):
    """Loaded on the second vessel, which departs the hub."""
    record(cur, shipment, "transshipment_load", at, shipment["hub"], 2, shipment["vessels"][1])
    record(cur, shipment, "transshipment_departure", at, shipment["hub"], 2, shipment["vessels"][1])
    set_status(cur, shipment, at, None, "transshipment_departure")
    return f"departed {shipment['hub'].name} on {shipment['vessels'][1][0]}"


def arrive(cur, shipment, at, _argument):
    """Arrived at the port of discharge (at its ETA, which has settled): its eta_drift alert is over."""
    record(cur, shipment, "arrived", at, shipment["destination"], 2, shipment["vessels"][1])
    line = f"arrived {shipment['destination'].name}" + set_status(cur, shipment, at, "arrived", "arrived")
    return line + resolve_alerts(cur, shipment, at, "eta_drift")


def discharge(cur, shipment, at, _argument):
    """Discharged: the demurrage clocks start; the receiving checks run on what came in."""
    record(cur, shipment, "discharged", at, shipment["destination"], 2, shipment["vessels"][1])
    set_status(cur, shipment, at, None, "discharged")
    cur.execute(START_RUN, {"id": shipment["shipment_id"], "at": at})
    run = cur.fetchone()["id"]
    warned = shipment["warning"]
    for key, category, title in catalog.CHECKS:
        status, message = RECEIVING_CHECKS[key]
        if key == warned:
            status, message = "warning", RECEIVING_WARNINGS[key]
        elif key == "temperature_set_point" and shipment["cargo_type"] == "ambient":
            status, message = "skipped", "Ambient cargo has no set point."
        cur.execute(WRITE_CHECK, {"id": shipment["shipment_id"], "run": run, "key": key, "category": category,
                                  "status": status, "title": title, "message": message, "at": at})
    cur.execute(FINISH_RUN, {"run": run, "at": at})
    return f"discharged {shipment['destination'].name}, demurrage starts; checks run" + (
        f", {warned} warning" if warned else ", all passed")


def watch_free_time(cur, shipment, at, _argument):
    """The monitoring looks at the demurrage clock: a demurrage_risk alert when it runs out or nearly."""
    cur.execute(DEMURRAGE_TERMS, {"id": shipment["shipment_id"]})
    terms = cur.fetchone()
    if terms["free_days"] is None:
        return "free time: terms unknown"
    offset = shipment["destination"].offset
    started = local_day(moment(shipment, offset_of("discharge")), offset)
    left = (last_free_day(started, terms["free_days"], terms["basis"]) - local_day(at, offset)).days
    line = (f"free time: {left} of {terms['free_days']} free days left" if left >= 0
            else f"free time: {-left} days past its {terms['free_days']} free days")
    if left <= AT_RISK_DAYS:
        title = "Demurrage overdue" if left < 0 else "Demurrage free time ends soon"
        summary = f"{-left} days past the last free day." if left < 0 else f"{left} free days left at the terminal."
        line += open_alert(cur, shipment, at, "demurrage_risk", "critical" if left < 0 else "warning", title, summary)
    return line


def gate_out(cur, shipment, at, _argument):
    """Out of the terminal on a truck: demurrage stops (detention runs until the empty is returned)."""
    record(cur, shipment, "gate_out", at, shipment["destination"])
    return "gated out" + set_status(cur, shipment, at, None, "gate_out") + resolve_alerts(
        cur, shipment, at, "demurrage_risk")


def deliver(cur, shipment, at, _argument):
    """Delivered to the organization's warehouse: in_warehouse."""
    record(cur, shipment, "delivered", at, shipment["warehouse"])
    return f"delivered to {shipment['warehouse'].name}" + set_status(cur, shipment, at, "in_warehouse", "delivered")


STEPS = {"validate": validate, "depart": depart, "revise_eta": revise_eta, "transship": transship,
         "transship_depart": transship_depart, "arrive": arrive, "discharge": discharge,
         "watch_free_time": watch_free_time, "gate_out": gate_out, "deliver": deliver}
