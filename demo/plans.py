"""What happens to each shipment: mode, lane, carrier, key moments and flags, before any row is built.

A natural plan is created at a point of the past ~18 months that grows with its index (so ids
follow creation time) and runs its course with random durations; whatever lies after "now" has
not happened yet.  Showcase plans (showcase.py) pin the moments instead, relative to today.
"""
from datetime import timedelta

from demo import catalog

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
HISTORY_DAYS = 540
# Plans created before this age have ETA histories reconstructed from older data (backfilled).
BACKFILL_AGE = timedelta(days=365)


class Plan:
    """The story of one shipment; attributes are filled by plan_natural and the showcase."""

    def __init__(self, org, index, rng):
        self.org, self.index, self.rng = org, index, rng
        self.mode = "ocean"
        self.status = None
        self.archived = self.awaiting_approval = self.owned_elsewhere = False
        self.tracking = None          # (state, unavailable_reason, halted_reason) or None: derive
        self.eta_style = "set"        # 'set', 'container_only', 'none'
        self.revisions = 0
        self.predicted = False
        self.reference_kind = "generated"   # 'generated', 'person', 'database'
        self.transport_reference_kind = None  # None: the mode's usual; 'container', 'missing', 'invalid'
        self.terms_source = "carrier"
        self.free_days = (None, None, "calendar")
        self.flags = set()
        self.labels = None
        self.pallets_per_container = None
        self.lines_per_pallet = None
        self.local_offsets = None     # whether events carry their place's UTC offset; None: drawn (80 %)

    def lifecycle(self):
        """'planned', 'moving', 'arrived' or 'done' as of now."""
        now = self.org.now
        if now < self.etd:
            return "planned"
        if now < self.arrival:
            return "moving"
        if self.delivered is not None and self.delivered <= now:
            return "done"
        return "arrived"


def plan_natural(org, index, rng):
    """A plan whose creation time follows its index and whose moments follow at random durations."""
    plan = Plan(org, index, rng)
    span = HISTORY_DAYS * DAY
    start = org.now - span - 2 * DAY
    created = start + span * ((index + rng.random()) / max(org.count, 1))
    created = created.replace(hour=rng.randrange(6, 18), minute=rng.randrange(60), second=rng.randrange(60),
                              microsecond=0)
    roll = rng.random()
    plan.mode = "ocean" if roll < 0.75 else "air" if roll < 0.87 else "road"
    choose_parties(plan)
    plan_route(plan, created)
    _natural_flags(plan)
    return plan


def plan_route(plan, created):
    """Carrier, route and moments of a plan created at `created`, with random durations."""
    {"ocean": _ocean, "air": _air, "road": _road}[plan.mode](plan, created)


def choose_parties(plan, lane=None):
    """Lane, produce, consignor and consignee."""
    rng, importer = plan.rng, plan.org.importer
    if plan.mode == "road":
        plan.lane = catalog.ROAD_LANE
    else:
        lanes = [ln for ln in catalog.LANES if plan.mode == "ocean" or ln.airport]
        plan.lane = lane or rng.choice(lanes)
    choices = plan.lane.produce + catalog.LANE_EXTRAS.get(plan.lane.country, ())
    plan.produce = [rng.choice(choices)]
    if rng.random() < 0.2:
        plan.produce.append(rng.choice(plan.lane.produce))
    plan.produce = list(dict.fromkeys(plan.produce))
    plan.consignor = rng.choice(plan.lane.exporters)
    plan.consignee = importer.consignee if rng.random() < 0.9 else rng.choice(importer.others)
    plan.notify_party = rng.choice(importer.notify) if rng.random() < 0.8 else None


def set_carrier(plan, name=None):
    """Pick the ocean carrier that fits the plan's terms source (or the named one)."""
    terms = catalog.CARRIER_TERMS[plan.org.slug]
    if name is None:
        supported = [c.name for c in catalog.OCEAN_CARRIERS if c.name != catalog.UNSUPPORTED_CARRIER]
        if plan.terms_source == "carrier":
            pool = list(terms)
        elif plan.terms_source == "unknown":
            pool = [n for n in supported if n not in terms]
        else:
            pool = supported
        name = plan.rng.choice(pool)
    plan.carrier = catalog.CARRIERS_BY_NAME[name]
    dem, det, basis = terms.get(name, (None, None, "calendar"))
    if plan.terms_source in ("shipment", "notice") and plan.free_days[0] is None:
        dem = plan.rng.choice((7, 10, 14, 21))
        det = dem + plan.rng.choice((0, 2, 4))
        basis = "calendar"
    plan.free_days = (dem, det, basis)


def set_ocean_ports(plan, containers):
    """Ports, transshipment, on-carriage and the number of containers (the moments are the caller's)."""
    rng = plan.rng
    plan.origin = catalog.PORTS[rng.choice(plan.lane.ports)]
    plan.destination = catalog.PORTS[rng.choice(plan.org.importer.ports)]
    plan.via = None
    if rng.random() < 0.3:
        plan.via = catalog.PORTS[catalog.TRANSSHIPMENT_PORTS[plan.lane.country]]
    plan.on_carriage = rng.random() < 0.5
    plan.containers = containers


def _ocean(plan, created):
    rng = plan.rng
    roll = rng.random()
    plan.terms_source = ("carrier" if roll < 0.55 else "shipment" if roll < 0.65
                         else "notice" if roll < 0.8 else "unknown")
    set_carrier(plan, catalog.UNSUPPORTED_CARRIER if rng.random() < 0.03 else None)
    etd = created + rng.uniform(2, 12) * DAY
    arrival = etd + (plan.lane.transit_days + rng.uniform(-3, 5)) * DAY
    containers = 1 if rng.random() < 0.7 else 2 if rng.random() < 0.75 else rng.choice((3, 4))
    set_ocean_ports(plan, containers)
    plan.created, plan.etd, plan.arrival = created, etd, arrival
    dem, det, _ = plan.free_days
    dem, det = dem or 7, det or 10
    plan.discharge, plan.gate_out, plan.empty_return = [], [], []
    for _ in range(containers):
        discharge = arrival + rng.uniform(6, 30) * HOUR
        gate_out = discharge + rng.uniform(0.5, dem + 4) * DAY
        plan.discharge.append(discharge)
        plan.gate_out.append(gate_out)
        plan.empty_return.append(gate_out + rng.uniform(1, det + 3) * DAY)
    plan.delivered = max(plan.gate_out) + 4 * HOUR


def _air(plan, created):
    rng = plan.rng
    plan.airline = rng.choice(catalog.AIRLINES)
    plan.origin = catalog.AIRPORTS[plan.lane.airport]
    plan.destination = catalog.AIRPORTS[plan.org.importer.airport]
    plan.via = catalog.AIRPORTS[rng.choice(("Doha", "Frankfurt"))] if rng.random() < 0.3 else None
    if plan.via == plan.destination:
        plan.via = catalog.AIRPORTS["Doha"]
    plan.created = created
    plan.etd = created + rng.uniform(1, 4) * DAY
    plan.arrival = plan.etd + rng.uniform(14, 40) * HOUR
    plan.notified = plan.arrival + rng.uniform(2, 8) * HOUR
    plan.delivered = plan.arrival + rng.uniform(12, 36) * HOUR
    plan.containers = 0
    plan.terms_source = None


def _road(plan, created):
    rng = plan.rng
    plan.road_carrier = rng.choice(catalog.ROAD_CARRIERS)
    plan.origin = catalog.INLAND[rng.choice(("Valencia", "Murcia"))]
    plan.destination = catalog.INLAND[plan.org.importer.warehouse]
    plan.via = None
    plan.created = created
    plan.etd = created + rng.uniform(1, 3) * DAY
    plan.arrival = plan.etd + rng.uniform(30, 60) * HOUR
    plan.delivered = plan.arrival + rng.uniform(1, 5) * HOUR
    plan.containers = 0
    plan.terms_source = None


def _natural_flags(plan):
    rng, now = plan.rng, plan.org.now
    stage = plan.lifecycle()
    if stage == "planned":
        plan.status = rng.choice(("draft", "validated"))
        if plan.mode != "road" and rng.random() < 0.2:
            plan.eta_style = "none"
            plan.transport_reference_kind = "missing" if rng.random() < 0.5 else None
    else:
        plan.status = {"moving": "in_transit", "arrived": "arrived", "done": "in_warehouse"}[stage]
        if stage == "done" and rng.random() < 0.05:
            plan.status = "arrived"  # nobody confirmed receipt
    if plan.mode == "ocean" and rng.random() < 0.05 and plan.eta_style == "set":
        plan.eta_style = "container_only"
    roll = rng.random()
    plan.revisions = 0 if roll < 0.55 else rng.randint(1, 2) if roll < 0.85 else rng.randint(3, 6)
    plan.predicted = stage == "moving" and plan.arrival - now < 3 * DAY and rng.random() < 0.6
    if stage == "done" and now - plan.arrival > 60 * DAY and rng.random() < 0.7:
        plan.archived = True
    if rng.random() < 0.01:
        plan.awaiting_approval = True
    elif rng.random() < 0.005:
        plan.owned_elsewhere = True
    if rng.random() < 0.02:
        plan.reference_kind = "person"
    if rng.random() < 0.12:
        plan.flags.add("organic")


def is_backfilled(plan):
    """Whether the plan's ETA history predates live tracking and was reconstructed."""
    return plan.org.now - plan.created > BACKFILL_AGE

