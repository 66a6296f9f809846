"""Hand-picked shipments, so every state, enum value and edge of the spec appears in a small demo.

Each spec pins a shipment's moments relative to today (for example "discharged so that one free
day is left"); anything it does not say is filled in as for a natural plan.  They are the
newest shipments of their organization.
"""
from datetime import datetime, time, timedelta, timezone

from demo import catalog
from demo.plans import DAY, HOUR, Plan, choose_parties, plan_route, set_carrier, set_ocean_ports
from models.free_time_rules import last_free_day

# Free-time situations and their sources (ocean shipments at the terminal or gated out).
_FREE_TIME = [
    dict(phase="at_terminal", days_left=5, source="carrier", carrier="Maersk", labels=["Rotterdam hub"]),
    dict(phase="at_terminal", days_left=2, source="shipment", carrier="Maersk"),
    dict(phase="at_terminal", days_left=1, source="notice", carrier="ONE", flags={"second_notice"}),
    dict(phase="at_terminal", days_left=0, source="carrier", carrier="MSC", labels=["Urgent"]),
    dict(phase="at_terminal", days_left=-3, source="carrier", carrier="Hapag-Lloyd", labels=["Urgent", "Claims"]),
    dict(phase="at_terminal", days_left=-1, source="shipment", carrier="Evergreen"),
    dict(phase="at_terminal", days_left=3, source="unknown", carrier="CMA CGM"),
    dict(phase="at_terminal", days_left=1, source="carrier", carrier="Maersk", containers=2, split="not_discharged"),
    dict(phase="at_terminal", days_left=2, source="carrier", carrier="MSC", containers=2, split="gated_out"),
    dict(phase="at_terminal", days_left=1, source="carrier", carrier="Maersk", archived=True),
    dict(phase="at_terminal", days_left=-2, source="carrier", carrier="MSC", status="in_warehouse"),
    dict(phase="at_terminal", days_left=-40, source="carrier", carrier="Maersk"),
    dict(phase="at_terminal", days_left=4, source="notice", carrier="Maersk"),
    dict(phase="arrived", source="carrier", carrier="Hapag-Lloyd", containers=3),
    dict(phase="gated_out", detention_left=3, source="carrier", carrier="Maersk"),
    dict(phase="gated_out", detention_left=-2, source="shipment", carrier="ONE"),
    dict(phase="gated_out", detention_left=1, source="unknown", carrier="Evergreen"),
    dict(phase="returned", source="carrier", carrier="MSC"),
]

# Tracking, references, ETAs and hidden shipments.
_TRACKING = [
    dict(phase="sailing", via=True, on_carriage=True, revisions=5, labels=["Key account FreshMart"]),
    dict(phase="arriving", predicted=True, revisions=2, flags={"rollover", "live_update"}),
    dict(phase="sailing", eta_style="container_only", containers=2),
    dict(phase="planned", status="validated", tracking=("not_started", None, None)),
    dict(phase="planned", status="draft", tracking=("pending", None, None), flags={"parse_pending"}),
    dict(phase="planned", status="draft", transport_reference_kind="missing", eta_style="none",
         reference_kind="database", tracking=("awaiting_reference", None, None)),
    dict(phase="sailing", carrier="Seatrade", source="unknown", tracking=("unavailable", "unsupported_carrier", None)),
    dict(phase="planned", status="validated", transport_reference_kind="invalid",
         tracking=("unavailable", "invalid_reference", None)),
    dict(phase="sailing", tracking=("unavailable", "not_found", None)),
    dict(mode="air", phase="flying", tracking=("unavailable", "provider_error", None)),
    dict(phase="old", tracking=("unavailable", "past_voyage", None), archived=True),
    dict(phase="sailing", tracking=("available", None, "errored")),
    dict(phase="sailing", tracking=("available", None, "dropped")),
    dict(mode="air", phase="done", via=True, labels=["Samples"]),
    dict(mode="air", phase="flying", flags={"scanning"}),
    dict(mode="air", phase="arrived"),
    dict(mode="air", phase="planned", status="validated"),
    dict(mode="road", phase="moving", labels=["Promotion"]),
    dict(mode="road", phase="done", flags={"no_invoice"}),
    dict(phase="sailing", produce="Mango pulp", lane="Brazil", labels=["Cold treatment"]),
    dict(phase="sailing", produce="Coconut", lane="Colombia", status="error"),
    dict(phase="sailing", awaiting_approval=True, flags={"temperature"}),
    dict(phase="sailing", owned_elsewhere=True),
    dict(phase="returned", containers=2, flags={"big", "organic"}, labels=["Organic", "Season 2025/26 program"]),
    dict(phase="sailing", transport_reference_kind="container", reference_kind="person",
         flags={"replaced_pl", "reference_only", "page_split", "blocked", "loose_pallet"}),
    dict(mode="air", phase="done", transport_reference_kind=None, flags={"totals_mismatch", "no_file"}),
    dict(phase="old", revisions=4, flags={"container_mismatch"}),
    dict(phase="sailing", flags={"run_unfinished", "no_invoice", "organic"}, labels=["Temperature alarm"]),
    dict(phase="old", archived=True, labels=["Priority customer"]),
]

SHOWCASE = {"acme": _FREE_TIME + _TRACKING,
            "globex": [_FREE_TIME[0] | {"carrier": "Maersk"}, _FREE_TIME[3] | {"carrier": "MSC"}, _FREE_TIME[14],
                       _TRACKING[0], _TRACKING[5], _TRACKING[13], _TRACKING[17], _TRACKING[21]]}


def plan_showcase(org, index, rng, spec):
    """A plan pinned by a showcase spec."""
    plan = Plan(org, index, rng)
    plan.mode = spec.get("mode", "ocean")
    lane = next((ln for ln in catalog.LANES if ln.country == spec.get("lane")), None)
    choose_parties(plan, lane)
    if "produce" in spec:
        plan.produce = [spec["produce"]]
    if spec["phase"] == "old":
        plan_route(plan, org.now - rng.uniform(150, 400) * DAY)
    elif plan.mode == "ocean":
        _pin_ocean(plan, spec)
    else:
        _pin_other(plan, spec)
    for name in ("tracking", "eta_style", "revisions", "predicted", "reference_kind", "transport_reference_kind",
                 "archived", "awaiting_approval", "owned_elsewhere", "status"):
        if name in spec:
            setattr(plan, name, spec[name])
    if plan.status is None:
        plan.status = {"planned": "validated", "moving": "in_transit", "arrived": "arrived",
                       "done": "in_warehouse"}[plan.lifecycle()]
    if "tracking" not in spec and plan.mode != "road" and spec["phase"] != "planned":
        plan.tracking = ("available", None, None)  # a showcase must not lose its events to chance
    plan.flags |= set(spec.get("flags", ()))
    plan.labels = spec.get("labels", [])
    return plan


def _day(today, offset, hour):
    day = today + timedelta(days=offset)
    return datetime.combine(day, time(hour), tzinfo=timezone.utc)


def _elapsed(today, free_days, basis, days_left):
    """Days since the clock started such that `days_left` free days remain (the start day is the first)."""
    for elapsed in range(0, 400):
        start = today - timedelta(days=elapsed)
        if (last_free_day(start, free_days, basis) - today).days <= days_left:
            return elapsed
    return 0


def _pin_ocean(plan, spec):
    rng, now = plan.rng, plan.org.now
    plan.terms_source = spec.get("source", "carrier")
    set_carrier(plan, spec.get("carrier", "Maersk"))
    dem, det, basis = plan.free_days
    transit = plan.lane.transit_days * DAY
    phase, n = spec["phase"], spec.get("containers", 1)
    # The free-time engine counts days at the port of discharge, in its local time when the events carry
    # its UTC offset: so the ports come first and the moments are pinned to that port's today (near
    # midnight it is not UTC's).
    set_ocean_ports(plan, n)
    plan.local_offsets = True
    today = (now + timedelta(minutes=plan.destination.offset)).date()
    discharge = gate_out = empty_return = None
    if phase == "planned":
        etd = _day(today, 6, 14)
        arrival = etd + transit
    elif phase == "sailing":
        etd, arrival = _day(today, -9, 16), _day(today, 14, 6)
    elif phase == "arriving":
        arrival = _day(today, 2, 5)
        etd = arrival - transit
    elif phase == "arrived":
        arrival, discharge = now - 6 * HOUR, now + 20 * HOUR
    elif phase == "at_terminal":
        discharge = _day(today, -_elapsed(today, dem or 7, basis, spec["days_left"]), 7)
        arrival = discharge - 14 * HOUR
    elif phase == "gated_out":
        gate_out = _day(today, -_elapsed(today, det or 10, basis, spec["detention_left"]), 10)
        discharge = gate_out - 3 * DAY
        arrival = discharge - 12 * HOUR
    else:  # returned
        discharge, gate_out, empty_return = _day(today, -12, 7), _day(today, -9, 10), _day(today, -3, 11)
        arrival = discharge - 12 * HOUR
    if phase not in ("planned", "sailing", "arriving"):
        etd = arrival - transit
    created = min(now - 2 * DAY, etd - 6 * DAY) - rng.uniform(0, 5) * HOUR
    plan.created, plan.etd, plan.arrival = created, etd, arrival
    plan.via = catalog.PORTS[catalog.TRANSSHIPMENT_PORTS[plan.lane.country]] if spec.get("via") else None
    plan.on_carriage = spec.get("on_carriage", False)
    if discharge is None:
        discharge = arrival + 12 * HOUR
    plan.discharge = [discharge + i * HOUR for i in range(n)]
    plan.gate_out = [gate_out] * n
    plan.empty_return = [empty_return] * n
    if spec.get("split") == "not_discharged":
        plan.discharge[-1] = now + DAY
    elif spec.get("split") == "gated_out":
        plan.gate_out[-1] = now - DAY
    plan.delivered = max(plan.gate_out) + 4 * HOUR if all(plan.gate_out) else None


def _pin_other(plan, spec):
    now, phase = plan.org.now, spec["phase"]
    plan_route(plan, now - 3 * DAY)
    if phase == "planned":
        shift = _day(now.date(), 3, 9) - plan.etd
    elif phase in ("flying", "moving"):
        shift = now - 5 * HOUR - plan.etd
    elif phase == "arrived":
        shift = now - 5 * HOUR - plan.arrival
        plan.delivered = plan.notified = None
    else:  # done
        shift = now - 6 * DAY - plan.delivered
    for name in ("created", "etd", "arrival", "notified", "delivered"):
        value = getattr(plan, name, None)
        if value is not None:
            setattr(plan, name, value + shift)
    if phase == "arrived":
        plan.notified, plan.delivered = now - HOUR, now + 10 * HOUR
    plan.created = min(plan.created, now - HOUR)
    if phase in ("flying", "moving"):
        plan.arrival = max(plan.arrival, now + 6 * HOUR)
        plan.delivered = plan.arrival + 10 * HOUR
    if not spec.get("via") and plan.mode == "air":
        plan.via = None
    elif spec.get("via") and plan.mode == "air" and plan.via is None:
        plan.via = catalog.AIRPORTS["Doha"]
