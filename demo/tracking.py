"""The shipment row of a plan: references, tracking state, ETAs and the ETA revision history."""
from datetime import timedelta

from demo import codes
from demo.plans import DAY, HOUR, is_backfilled

MINUTE = timedelta(minutes=1)


def tz(place):
    """A place's UTC offset as '+HH:MM'."""
    sign = "-" if place.offset < 0 else "+"
    hours, minutes = divmod(abs(place.offset), 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def derive_tracking(plan):
    """(state, unavailable_reason, halted_reason) unless the plan fixed them."""
    if plan.tracking:
        return plan.tracking
    rng, stage = plan.rng, plan.lifecycle()
    if plan.mode == "road":
        return ("none", None, None)
    if plan.transport_reference_kind == "missing":
        return ("awaiting_reference", None, None)
    if plan.mode == "ocean" and plan.carrier.scac is None:
        return ("unavailable", "unsupported_carrier", None)
    if stage == "planned":
        return (rng.choice(("pending", "not_started")), None, None)
    roll = rng.random()
    if roll < 0.03:
        return ("unavailable", "past_voyage" if stage == "done" else "not_found", None)
    if roll < 0.05:
        return ("unavailable", "provider_error", None)
    if roll < 0.07 and stage != "done":
        return ("available", None, rng.choice(("errored", "dropped")))
    return ("available", None, None)


def transport_reference(plan):
    """The reference as the application received it (the database canonicalises it)."""
    rng, kind = plan.rng, plan.transport_reference_kind
    if kind == "missing":
        return None
    if plan.mode == "air":
        value = codes.air_waybill(plan.airline.prefix, rng.randrange(10_000_000))
        if kind == "invalid":
            return value[:-1] + str((int(value[-1]) + 1) % 10)
        return value if rng.random() < 0.7 else f"{value[:3]} {value[4:8]} {value[8:]}"
    if plan.mode == "road":
        return f"CMR/ES/{plan.created:%Y}/{plan.index:06d}"
    if kind == "container" or (kind is None and rng.random() < 0.2):
        number = plan.container_numbers[0]
        return number if rng.random() < 0.6 else f"{number[:4].lower()} {number[4:10]}-{number[10]}"
    if kind == "invalid":
        return f"{plan.carrier.scac or 'XXXX'}{rng.randrange(1000, 9999)}X"
    return codes.bill_of_lading(plan.carrier.name, rng)


def eta_history(plan, eta):
    """[(observed_at, previous_eta, new_eta, first_estimate, backfilled)] ending at `eta`."""
    rng, now = plan.rng, plan.org.now
    values = [eta]
    for _ in range(plan.revisions):
        slip = rng.choice((1, 1, 1, -1)) * rng.uniform(0.5, 96) * HOUR
        values.insert(0, (values[0] - slip).replace(second=0, microsecond=0))
    first_seen = plan.created + rng.uniform(0.2, 6) * HOUR
    backfilled = is_backfilled(plan)
    if backfilled:
        # Reconstructed later: the only time known is that of the last refresh.
        times = [plan.last_tracked_at or first_seen] * len(values)
    else:
        until = max(min(now, plan.arrival), first_seen + HOUR)
        times = [first_seen] + sorted(rng.uniform(0, 1) * (until - first_seen) + first_seen
                                      for _ in range(len(values) - 1))
    history, previous = [], None
    for observed, value in zip(times, values):
        history.append((observed, previous, value, previous is None, backfilled))
        previous = value
    return history


def tracking_times(plan, state, last_event):
    """(last_tracked_at, carrier_updated_at, status) for the plan's tracking state."""
    rng, now = plan.rng, plan.org.now
    stage = plan.lifecycle()
    if state in ("none", "not_started", "awaiting_reference"):
        return None, None, None
    if state == "pending":
        return None, None, None
    if state == "unavailable":
        status = {"not_found": "not_found", "past_voyage": "past_voyage"}.get(plan.tracking_reason)
        return now - rng.uniform(0.1, 30) * HOUR, None, status
    last_event_at = last_event[1] if last_event else plan.created + HOUR
    if stage == "done":
        tracked = min(now, last_event_at + rng.uniform(0.5, 2) * DAY)
    else:
        tracked = now - rng.uniform(5, 180) * MINUTE
    if plan.halted == "errored":
        tracked = max(last_event_at, now - rng.uniform(2, 5) * DAY)
    carrier_updated = min(tracked, last_event_at + rng.uniform(5, 90) * MINUTE)
    status = STATUS_WORDS.get(last_event[0], "in_transit") if last_event else "booked"
    return tracked, carrier_updated, status


# The feed's own words for the latest milestone (an open list in the spec).
STATUS_WORDS = {
    "booked": "booked", "empty_pickup": "booked", "gate_in": "gate_in", "received_from_shipper": "received",
    "manifested": "manifested", "loaded": "loaded", "departed": "in_transit", "transferred": "in_transit",
    "transshipment_arrival": "transshipment", "transshipment_discharge": "transshipment",
    "transshipment_load": "transshipment", "transshipment_departure": "in_transit", "arrived": "arrived",
    "discharged": "discharged", "customs_cleared": "discharged", "available_for_pickup": "discharged",
    "notified": "arrived", "gate_out": "gate_out", "delivered": "delivered", "stripped": "delivered",
    "empty_return": "empty_returned", "untracked": "untracked", "eta_revised": "in_transit",
    "exception": "exception",
}


def reference(plan):
    """The shipment reference: generated shape, one a person typed, or None for the database to make."""
    if plan.reference_kind == "database":
        return None
    if plan.reference_kind == "person":
        return f"{plan.org.slug[:2].upper()}-{plan.created:%y}-{plan.index:05d}"
    return codes.shipment_reference(plan.created, plan.org.reference_offset + plan.index)
