"""The demo simulator behind `flask --app app demo simulate`: shipments live through a journey, step by step.

Each simulated shipment is booked, validated, departs, is transshipped, arrives, is discharged, leaves the
terminal and reaches the warehouse (demo/journeys.py has the plan, demo/journey_steps.py the steps), written
as the organization's application writes: plain SQL on the tables it owns (docs/decisions.md, "Who writes
what"). The database does the rest (revisions, ETA history, the change feed, the webhook events), as for any
writer. The seeded shipments are left as they are; the simulated ones say so in their `notes`.
"""
import random
from datetime import timedelta

from demo import catalog, codes
from demo.journey_steps import STEPS, record
from demo.journeys import CAST_PHASES, ENTRY_EVERY, JOURNEY, due_steps, finished, member, moment, offset_of, \
    past_steps

# The notes of every simulated shipment: how they are told from the seeded ones.
SIMULATED = "Simulated by the demo (docs/demo.md)."
# Shipments a simulated one copies its lane, parties, cargo and carrier from: visible ocean shipments between
# ports the catalog knows, with a carrier whose free days the organization has agreed in calendar days.
TEMPLATES = """SELECT s.id, s.origin_location, s.destination_location, s.carrier_name, s.cargo_type
  FROM shipments s JOIN carrier_terms t ON t.organization_id = s.organization_id AND t.carrier = s.carrier_name
 WHERE s.organization_id = %(org)s AND s.transport_type = 'ocean' AND t.free_days_basis = 'calendar'
   AND NOT s.awaiting_approval AND NOT s.owned_elsewhere AND (s.notes IS NULL OR s.notes <> %(notes)s)
   AND s.origin_location = ANY(%(ports)s) AND s.destination_location = ANY(%(ports)s)
 ORDER BY s.id"""
# A booking: a draft copied from the template, with its own references and times.
BOOK = """INSERT INTO shipments (organization_id, erp_reference, transport_reference, transport_type, cargo_type,
  temperature_celsius, origin_location, origin_country, origin_timezone, destination_location, destination_country,
  destination_timezone, carrier_name, carrier_scac, consignor, consignee, notify_party, draft_produce, status, etd,
  eta, tracking_state, tracking_status, last_tracked_at, carrier_updated_at, notes, awaiting_approval, approved_at,
  created_at)
SELECT organization_id, %(erp)s, %(transport_reference)s, 'ocean', cargo_type, temperature_celsius,
       origin_location, origin_country, origin_timezone, destination_location, destination_country,
       destination_timezone, carrier_name, carrier_scac, consignor, consignee, notify_party,
       CASE WHEN cardinality(produce) > 0 THEN produce ELSE draft_produce END, 'draft', %(etd)s, %(eta)s,
       'available', 'booked', %(at)s, %(at)s, %(notes)s, %(hidden)s, CASE WHEN NOT %(hidden)s THEN %(at)s END, %(at)s
  FROM shipments WHERE id = %(template)s
RETURNING id"""
ADD_CONTAINER = """INSERT INTO containers (organization_id, shipment_id, number, seal_number, vessel, voyage,
  port_of_loading, port_of_discharge, etd, eta, cargo_type, temperature_celsius, created_at)
SELECT organization_id, id, %(number)s, %(seal)s, %(vessel)s, %(voyage)s, %(loading)s, %(discharge)s, etd, eta,
       cargo_type, temperature_celsius, %(at)s
  FROM shipments WHERE id = %(id)s"""
# The past of a shipment that joins halfway is written while it awaits approval, which sends no events (it is
# not news); approved, it sends events from then on.
APPROVE = "UPDATE shipments SET awaiting_approval = false, approved_at = %(at)s WHERE id = %(id)s"
# A run stopped halfway leaves its shipments on the way: the next run archives them (nobody follows them).
ARCHIVE_LEFTOVERS = """UPDATE shipments SET archived = true
 WHERE organization_id = %(org)s AND notes = %(notes)s AND status <> 'in_warehouse' AND NOT archived
RETURNING id"""
# The receiving check that comes out as a warning, drawn per shipment (None: all pass).
WARNINGS = (None, "packing_list_totals_match", None, "has_phytosanitary_certificate")


def step(conn, org, cast, now, rng=random):
    """One step at `now`: the shipments join that are due, each makes the steps whose time has come, each change
    in a transaction of its own; yields a line per change. `cast` starts as {} and is kept between steps."""
    if not cast:
        cast.update(members=[], next_entry=now + timedelta(seconds=ENTRY_EVERY))
        archived = _committed(conn, lambda: archive_leftovers(conn, org))
        if archived:
            yield archived
        for phase in sorted(CAST_PHASES, reverse=True):   # the longest on the way first: ids follow bookings
            yield _join(conn, org, cast, now, phase, rng)
    while cast["next_entry"] <= now:
        yield _join(conn, org, cast, cast["next_entry"], 0, rng)
        cast["next_entry"] += timedelta(seconds=ENTRY_EVERY)
    for shipment in list(cast["members"]):
        for offset, name, argument in due_steps(shipment, now):
            words = _committed(conn, lambda: _make(conn, shipment, offset, name, argument))
            shipment["done"] += 1
            yield f"shp_{shipment['shipment_id']} {words}"
        if finished(shipment):
            cast["members"].remove(shipment)


def archive_leftovers(conn, org):
    """Archive the simulated shipments a stopped run left on the way; a line, or None."""
    with conn.cursor() as cur:
        cur.execute(ARCHIVE_LEFTOVERS, {"org": org["id"], "notes": SIMULATED})
        count = len(cur.fetchall())
    return f"archived {count} simulated shipments a previous run left on the way" if count else None


def join(conn, org, entered, phase, rng):
    """Book a shipment whose journey stood at `phase` seconds at `entered`, with its past; (shipment, line)."""
    with conn.cursor() as cur:
        cur.execute(TEMPLATES, {"org": org["id"], "notes": SIMULATED, "ports": list(catalog.PORTS)})
        templates = cur.fetchall()
        if not templates:
            raise LookupError("no ocean shipment between known ports with a carrier's free days to copy "
                              "(seed the organization with: flask --app app demo seed)")
        template = rng.choice(templates)
        shipment = {**member(None, entered, phase), **facts(org, template, rng)}
        at, hidden = moment(shipment, 0), phase > 0
        cur.execute(BOOK, {"template": template["id"], "erp": f"PO-{rng.randrange(90000, 99999)}",
                           "transport_reference": codes.bill_of_lading(template["carrier_name"], rng),
                           "etd": moment(shipment, offset_of("depart")), "eta": moment(shipment, JOURNEY[0][2]),
                           "at": at, "notes": SIMULATED, "hidden": hidden})
        shipment["shipment_id"] = cur.fetchone()["id"]
        for number in shipment["containers"]:
            vessel = shipment["vessels"][0]
            cur.execute(ADD_CONTAINER, {"id": shipment["shipment_id"], "number": number, "at": at,
                                        "seal": codes.seal_number(template["carrier_name"], rng), "vessel": vessel[0],
                                        "voyage": vessel[2], "loading": shipment["origin"].name,
                                        "discharge": shipment["destination"].name})
        record(cur, shipment, "booked", at, shipment["origin"], each_container=False)
        shipment["done"] = 1
        for offset, name, argument in past_steps(phase)[1:]:
            _make(conn, shipment, offset, name, argument)
            shipment["done"] += 1
        if hidden:
            cur.execute(APPROVE, {"id": shipment["shipment_id"], "at": entered})
        cur.execute("SELECT status FROM shipments WHERE id = %(id)s", {"id": shipment["shipment_id"]})
        status = cur.fetchone()["status"]
    route = f"{shipment['origin'].name} -> {shipment['destination'].name} by {template['carrier_name']}"
    if not hidden:
        return shipment, f"shp_{shipment['shipment_id']} booked {route}, {len(shipment['containers'])} container(s)"
    return shipment, (f"shp_{shipment['shipment_id']} joins: {route}, booked {(entered - at).days} days ago, "
                      f"now {status}")


def facts(org, template, rng):
    """What the booking chooses: places, containers, vessels, the cargo, the receiving check that will warn."""
    carrier = catalog.CARRIERS_BY_NAME[template["carrier_name"]]
    origin = catalog.PORTS[template["origin_location"]]
    importer = catalog.IMPORTERS.get(org["slug"])
    destination = catalog.PORTS[template["destination_location"]]
    return {"origin": origin, "destination": destination,
            "hub": catalog.PORTS[catalog.TRANSSHIPMENT_PORTS.get(origin.country, "Algeciras")],
            "warehouse": catalog.INLAND[importer.warehouse] if importer else destination,
            "containers": [codes.container_number(rng.choice(carrier.prefixes), rng.randrange(1_000_000))
                           for _ in range(rng.choice((1, 1, 2)))],
            "vessels": [(*rng.choice(carrier.vessels), codes.voyage(rng)) for _ in range(2)],
            "cargo_type": template["cargo_type"], "warning": rng.choice(WARNINGS)}


def _join(conn, org, cast, entered, phase, rng):
    shipment, line = _committed(conn, lambda: join(conn, org, entered, phase, rng))
    cast["members"].append(shipment)
    return line


def _make(conn, shipment, offset, name, argument):
    with conn.cursor() as cur:
        return STEPS[name](cur, shipment, moment(shipment, offset), argument)


def _committed(conn, change):
    try:
        result = change()
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return result
