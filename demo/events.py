"""Containers, route legs and tracking events of a plan.

Moments after "now" have not happened: only the arrival and discharge are kept as estimates
(actual false), the discharge sometimes without a time, as carriers publish them.
"""
from demo import catalog, codes
from demo.plans import DAY, HOUR
from demo.tracking import tz


LEAN_MILESTONES = {"loaded", "departed", "arrived", "discharged", "gate_out", "empty_return"}


def container_numbers(plan):
    """ISO 6346 numbers of the plan's containers, in the carrier's owner codes."""
    rng = plan.rng
    return [codes.container_number(rng.choice(plan.carrier.prefixes), rng.randrange(1_000_000))
            for _ in range(plan.containers)]


def vessels(plan):
    """(name, imo, voyage) of the first and, after a transshipment, the second vessel."""
    rng = plan.rng
    first = rng.choice(plan.carrier.vessels)
    second = rng.choice(plan.carrier.vessels) if plan.via else first
    return [(first[0], first[1], codes.voyage(rng)), (second[0], second[1], codes.voyage(rng))]


def container_rows(plan, vessel):
    """Container columns (without shipment) as written in the documents."""
    rng = plan.rng
    produce = catalog.PRODUCE[plan.produce[0]]
    rows = []
    for i, number in enumerate(plan.container_numbers):
        eta = None
        if plan.eta_style != "none":
            eta = plan.container_etas[i]
        shout = rng.random() < 0.5
        rows.append({
            "organization_id": plan.org.id, "number": number, "seal_number": codes.seal_number(plan.carrier.name, rng),
            "vessel": vessel[0].upper() if shout else vessel[0], "voyage": vessel[2],
            "port_of_loading": f"{plan.origin.name.upper()}, {plan.origin.country.upper()}" if shout
            else f"{plan.origin.name} ({plan.origin.locode})",
            "port_of_discharge": f"{plan.destination.name.upper()}, {plan.destination.country.upper()}" if shout
            else f"{plan.destination.name} ({plan.destination.locode})",
            "etd": plan.etd, "eta": eta, "cargo_type": produce.cargo_type,
            "temperature_celsius": produce.temperature, "created_at": plan.created + HOUR})
    return rows


def lifecycle_event(milestone, at):
    """A shipment-wide lifecycle event (eta_revised, untracked): no place, vessel or container."""
    return {"milestone": milestone, "actual": True, "occurred_at": at, "occurred_at_offset_minutes": None,
            "container_number": None, "leg_index": None, "location_name": None, "location_code": None,
            "location_country_code": None, "vessel_name": None, "vessel_imo": None, "vessel_voyage": None,
            "flight_number": None, "latitude": None, "longitude": None, "created_at": at}


def _place(prefix, place):
    return {f"{prefix}_location": place.name, f"{prefix}_country": place.country, f"{prefix}_timezone": tz(place)}


def leg_rows(plan, transport_reference):
    """The route in travel order: sea or air legs, then an on-carriage truck to the warehouse."""
    warehouse = catalog.INLAND[plan.org.importer.warehouse]
    if plan.mode == "road":
        hops = [("road", plan.road_carrier, plan.origin, plan.destination, plan.etd, plan.arrival)]
    else:
        carrier = plan.carrier.name if plan.mode == "ocean" else plan.airline.name
        stops = [plan.origin] + ([plan.via] if plan.via else []) + [plan.destination]
        legs = len(stops) - 1
        span = (plan.arrival - plan.etd) / legs
        # A transshipment waits about a day between the two legs.
        hops = [(plan.mode, carrier, a, b, plan.etd + span * i,
                 plan.etd + span * (i + 1) - (DAY if i < legs - 1 else 0 * DAY))
                for i, (a, b) in enumerate(zip(stops, stops[1:]))]
        if plan.mode == "ocean" and plan.on_carriage and warehouse.name != plan.destination.name:
            leave = plan.arrival + 2 * DAY
            hops.append(("road", plan.org.importer.notify[0], plan.destination, warehouse, leave, leave + 5 * HOUR))
    return [{"position": i, "transport_type": mode, "carrier": carrier,
             "transport_reference": transport_reference if mode == plan.mode else None,
             **_place("origin", a), **_place("destination", b), "etd": etd, "eta": eta}
            for i, (mode, carrier, a, b, etd, eta) in enumerate(hops)]


def _event(plan, milestone, at, place, container=None, leg=None, vessel=None, flight=None, position=False):
    return {"milestone": milestone, "actual": True, "occurred_at": at,
            "occurred_at_offset_minutes": place.offset if plan.local_offsets else None,
            "container_number": container, "leg_index": leg, "location_name": place.name,
            "location_code": place.locode, "location_country_code": place.country_code,
            "vessel_name": vessel[0] if vessel else None, "vessel_imo": vessel[1] if vessel else None,
            "vessel_voyage": vessel[2] if vessel else None, "flight_number": flight,
            "latitude": place.latitude if position else None, "longitude": place.longitude if position else None,
            "created_at": at}


def ocean_events(plan, vessel_pair):
    """Milestones of every container, plus the shipment-wide booking."""
    rng, origin, dest = plan.rng, plan.origin, plan.destination
    first, second = vessel_pair
    last_leg = 2 if plan.via else 1
    last_vessel = second if plan.via else first
    warehouse = catalog.INLAND[plan.org.importer.warehouse]
    events = [_event(plan, "booked", plan.created + 2 * HOUR, origin)]
    for i, number in enumerate(plan.container_numbers):
        def add(milestone, at, place, leg=None, vessel=None, position=False):
            # Benchmark-scale shipments keep the milestones that drive ETAs and free time.
            if not plan.lean or milestone in LEAN_MILESTONES:
                events.append(_event(plan, milestone, at, place, number, leg, vessel, position=position))
        etd = plan.etd
        add("empty_pickup", max(plan.created + 3 * HOUR, etd - rng.uniform(5, 8) * DAY), origin)
        add("gate_in", max(plan.created + 5 * HOUR, etd - rng.uniform(2, 4) * DAY), origin)
        add("loaded", etd - rng.uniform(6, 20) * HOUR, origin, 1, first, True)
        add("departed", etd, origin, 1, first, True)
        if plan.via:
            at = etd + (plan.arrival - etd) * 0.45
            add("transshipment_arrival", at, plan.via, 1, first, True)
            add("transshipment_discharge", at + 8 * HOUR, plan.via, 1, first, True)
            add("transshipment_load", at + rng.uniform(2, 4) * DAY, plan.via, 2, second, True)
            add("transshipment_departure", at + 4.5 * DAY, plan.via, 2, second, True)
        add("arrived", plan.arrival, dest, last_leg, last_vessel, True)
        discharge = plan.discharge[i]
        if discharge is None:
            continue
        add("discharged", discharge, dest, last_leg, last_vessel, True)
        if rng.random() < 0.7:
            add("customs_cleared", discharge + rng.uniform(6, 30) * HOUR, dest)
        add("available_for_pickup", discharge + rng.uniform(8, 36) * HOUR, dest)
        gate_out = plan.gate_out[i]
        if gate_out is None:
            continue
        add("gate_out", gate_out, dest)
        if rng.random() < 0.6:
            add("delivered", gate_out + rng.uniform(2, 6) * HOUR, warehouse)
        if plan.empty_return[i] is not None:
            add("empty_return", plan.empty_return[i], dest)
    return _settle(plan, events)


def air_events(plan):
    """Air milestones with flight numbers; a transfer when the route has a hub."""
    rng = plan.rng
    flights = [f"{plan.airline.iata}{rng.randrange(100, 9999)}" for _ in range(2)]
    events = [_event(plan, "received_from_shipper", plan.etd - rng.uniform(4, 10) * HOUR, plan.origin),
              _event(plan, "manifested", plan.etd - rng.uniform(1, 3) * HOUR, plan.origin, flight=flights[0]),
              _event(plan, "departed", plan.etd, plan.origin, leg=1, flight=flights[0], position=True)]
    if plan.via:
        at = plan.etd + (plan.arrival - plan.etd) * 0.4
        events += [_event(plan, "arrived", at, plan.via, leg=1, flight=flights[0], position=True),
                   _event(plan, "transferred", at + 2 * HOUR, plan.via, leg=2, flight=flights[1]),
                   _event(plan, "departed", at + 4 * HOUR, plan.via, leg=2, flight=flights[1], position=True)]
    leg = 2 if plan.via else 1
    events += [_event(plan, "arrived", plan.arrival, plan.destination, leg=leg, flight=flights[-1], position=True),
               _event(plan, "notified", plan.notified, plan.destination),
               _event(plan, "delivered", plan.delivered, catalog.INLAND[plan.org.importer.warehouse])]
    if plan.lean:
        events = [e for e in events if e["milestone"] in ("departed", "arrived", "delivered")]
    return _settle(plan, events)


def _settle(plan, events):
    """Turn moments after now into estimates: arrival and discharge stay, later milestones go."""
    now, rng = plan.org.now, plan.rng
    settled = []
    for event in events:
        if event["occurred_at"] <= now:
            settled.append(event)
        elif event["milestone"] in ("arrived", "discharged") and event["location_name"] == plan.destination.name:
            event.update(actual=False, created_at=min(now, plan.created + DAY))
            if event["milestone"] == "discharged" and rng.random() < 0.5:
                event.update(occurred_at=None, occurred_at_offset_minutes=None)
            settled.append(event)
    return settled
