"""Turn a plan into the rows of a shipment: the shipment, labels, containers, legs, events, ETA history."""
from demo import catalog, events, tracking
from demo.plans import DAY, HOUR

NOTES = ("Cold treatment protocol: 16 days at or below 1.1 °C.", "Customer asked for delivery before 10:00.",
         "Second container rolled to the next sailing.", "Check the temperature log on arrival.",
         "Inspection booked at the border control post.", "Pallets to be re-stacked at the cold store.")


def add_shipment(batch, plan):
    """Queue every row describing the plan's shipment; returns its local id."""
    rng, now = plan.rng, plan.org.now
    drawn = rng.random() < 0.8   # drawn for every plan, so one the showcase pinned leaves the stream as it was
    plan.local_offsets = drawn if plan.local_offsets is None else plan.local_offsets
    if plan.mode == "ocean":
        plan.container_numbers = events.container_numbers(plan)
    state, reason, halted = tracking.derive_tracking(plan)
    plan.tracking_reason, plan.halted = reason, halted
    _set_etas(plan)
    transport_reference = tracking.transport_reference(plan)
    vessel_pair = events.vessels(plan) if plan.mode == "ocean" else None
    timeline = []
    if state == "available":
        timeline = events.ocean_events(plan, vessel_pair) if plan.mode == "ocean" else events.air_events(plan)
        if halted == "dropped":
            timeline.append(events.lifecycle_event("untracked", now - rng.uniform(1, 4) * DAY))
    actual = [e for e in timeline if e["actual"] and e["occurred_at"] is not None]
    last = max(((e["milestone"], e["occurred_at"]) for e in actual), key=lambda m: m[1], default=None)
    plan.last_tracked_at, carrier_updated_at, tracking_status = tracking.tracking_times(plan, state, last)
    history = tracking.eta_history(plan, plan.eta) if plan.eta is not None else []
    if state == "available" and len(history) > 1 and not history[-1][4]:
        for observed, previous, _new, _first, _backfilled in history[1:]:
            if rng.random() < 0.5:
                timeline.append(events.lifecycle_event("eta_revised", observed))
    columns = _shipment_columns(plan, state, transport_reference, history, tracking_status, carrier_updated_at)
    plan.reference, plan.temperature = columns["reference"], columns["temperature_celsius"]
    plan.transport_reference_input = transport_reference
    shipment = batch.add("shipments", **columns)
    for label_id in plan.label_ids:
        batch.add("shipment_labels", shipment_id=shipment, label_id=label_id)
    plan.container_ids = []
    if plan.mode == "ocean":
        for row in events.container_rows(plan, vessel_pair[0]):
            plan.container_ids.append(batch.add("containers", shipment_id=shipment, **row))
    for row in events.leg_rows(plan, transport_reference):
        batch.add("shipment_legs", shipment_id=shipment, **row)
    for row in timeline:
        batch.add("tracking_events", shipment_id=shipment, **row)
    for observed, previous, new, first, backfilled in history:
        batch.add("eta_revisions", shipment_id=shipment, observed_at=observed, previous_eta=previous,
                  new_eta=new, first_estimate=first, backfilled=backfilled)
    plan.shipment_id = shipment
    return shipment


def _set_etas(plan):
    """Shipment and container ETAs for the plan's ETA style."""
    rng = plan.rng
    arrival = plan.arrival.replace(second=0, microsecond=0)
    plan.eta = arrival if plan.eta_style == "set" else None
    plan.container_etas = [arrival] * plan.containers
    if plan.eta_style == "container_only" and plan.containers:
        # Containers on different vessels: the earliest decides the effective ETA.
        plan.container_etas = [arrival + i * rng.uniform(0.5, 3) * DAY for i in range(plan.containers)]
        plan.container_etas = [e.replace(second=0, microsecond=0) for e in plan.container_etas]


def _shipment_columns(plan, state, transport_reference, history, tracking_status, carrier_updated_at):
    rng, now = plan.rng, plan.org.now
    produce = catalog.PRODUCE[plan.produce[0]]
    draft_unknown = plan.status == "draft" and plan.eta_style == "none"
    carrier_name, scac = _carrier(plan)
    validated_at = None
    if plan.status not in ("draft",):
        validated_at = min(now, plan.created + rng.uniform(1, 30) * HOUR)
    updated = min(now, max([plan.created + HOUR] + [t for t in (plan.last_tracked_at, validated_at) if t]))
    ocean_extras = plan.mode == "ocean" and rng.random() < 0.08
    columns = {
        "organization_id": plan.org.id, "reference": tracking.reference(plan),
        "erp_reference": f"PO-{plan.created:%y}-{plan.index:06d}" if rng.random() < 0.8 else None,
        "transport_reference": transport_reference, "transport_type": plan.mode,
        "cargo_type": None if draft_unknown else produce.cargo_type,
        "temperature_celsius": None if draft_unknown else produce.temperature,
        "status": plan.status, "awaiting_approval": plan.awaiting_approval, "owned_elsewhere": plan.owned_elsewhere,
        "archived": plan.archived, "archived_at": _archived_at(plan),
        "validated_at": validated_at,
        "approved_at": None if plan.awaiting_approval else plan.created + rng.uniform(2, 90) * tracking.MINUTE,
        "origin_location": plan.origin.name, "origin_country": plan.origin.country,
        "origin_timezone": tracking.tz(plan.origin),
        "destination_location": plan.destination.name, "destination_country": plan.destination.country,
        "destination_timezone": tracking.tz(plan.destination),
        "etd": plan.etd.replace(second=0, microsecond=0), "eta": plan.eta,
        "original_eta": history[0][2] if history else None,
        "predicted_eta": (plan.arrival + rng.uniform(-6, 10) * HOUR).replace(microsecond=0) if plan.predicted else None,
        "carrier_name": carrier_name, "carrier_scac": scac,
        "tracking_state": state, "tracking_status": tracking_status, "unavailable_reason": plan.tracking_reason,
        "halted_reason": plan.halted, "last_tracked_at": plan.last_tracked_at,
        "carrier_updated_at": carrier_updated_at,
        "consignor": plan.consignor, "consignee": plan.consignee, "notify_party": plan.notify_party,
        "draft_produce": plan.produce, "notes": rng.choice(NOTES) if rng.random() < 0.15 else None,
        "load_type": "FCL" if plan.mode == "ocean" and rng.random() < 0.6 else None,
        "house_bl": f"RCL{plan.created:%y}{plan.index:07d}" if ocean_extras else None,
        "forwarder_reference": f"RCL-{plan.index:06d}" if ocean_extras else None,
        "forwarder_eta": (plan.arrival + rng.uniform(-12, 36) * HOUR).replace(microsecond=0) if ocean_extras else None,
        "created_at": plan.created, "updated_at": updated,
    }
    if plan.terms_source == "shipment":
        columns.update(demurrage_free_days=plan.free_days[0], detention_free_days=plan.free_days[1],
                       free_days_basis=plan.free_days[2])
    return columns


def _archived_at(plan):
    if not plan.archived:
        return None
    done = plan.delivered or plan.arrival
    return min(plan.org.now, done + plan.rng.uniform(5, 40) * DAY)


def _carrier(plan):
    if plan.mode == "ocean":
        return plan.carrier.name, plan.carrier.scac
    if plan.mode == "air":
        return plan.airline.name, None
    return plan.road_carrier, None
