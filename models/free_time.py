"""The free-time engine: demurrage and detention clocks as plain functions of facts and the current time.

No database here.  A shipment's facts are plain mappings: the shipment (id, reference,
transport_reference, transport_type, status, carrier_name), its container numbers in
order, its tracking events (milestone, actual, occurred_at, occurred_at_offset_minutes,
container_number) and its Terms per kind.  `now` is an aware datetime, injected so that
tests fix it.  The rules are in docs/free-time.md.
"""
from datetime import date

from models.free_time_rules import free_days_used, last_free_day, local_day

NOT_STARTED, RUNNING, OVERDUE, STOPPED, GIVEN_UP = "not_started", "running", "overdue", "stopped", "given_up"
STATES = (NOT_STARTED, RUNNING, OVERDUE, STOPPED, GIVEN_UP)
COUNTING = (RUNNING, OVERDUE)
UNFINISHED = (NOT_STARTED, RUNNING, OVERDUE)

# Any of these (actual or estimated) on a container gives it clocks.
CLOCK_MILESTONES = frozenset({"loaded", "transshipment_load", "transshipment_discharge",
                              "discharged", "gate_out", "empty_return"})
# Milestones that prove a container has left the terminal.
LEFT_TERMINAL = frozenset({"gate_out", "delivered", "stripped", "empty_return"})
# The at-risk threshold of the spec: 2 or fewer days left.
AT_RISK_DAYS_LEFT = 2
# The at-risk list considers shipments discharged within this many days (the discharge day is day 1).
AT_RISK_WINDOW_DAYS = 45


def compact_number(number):
    """A container number as compared: upper case without spaces or dashes."""
    return number.upper().replace(" ", "").replace("-", "") if number else None


def clocks(shipment, container_numbers, events, terms, now):
    """(demurrage, detention) clocks with private ordering keys; `terms` maps each kind to its Terms."""
    demurrage, detention = [], []
    if shipment["transport_type"] == "ocean":
        for position, (number, own) in enumerate(_containers(container_numbers, events)):
            demurrage.append(_demurrage(number, own, shipment, terms["demurrage"], now, position))
            detention.append(_detention(number, own, shipment, terms["detention"], now, position))
    return demurrage, detention


def summarize(shipment, container_numbers, events, terms, now):
    """The FreeTimeSummary of one shipment; `terms` maps each kind to its Terms."""
    demurrage, detention = clocks(shipment, container_numbers, events, terms, now)
    return _summary(shipment, demurrage, detention, terms)


def at_risk_entry(shipment, container_numbers, events, terms, now, window_days=AT_RISK_WINDOW_DAYS):
    """(sort key, summary) when the shipment belongs on the at-risk list, else None.

    It belongs there when a demurrage clock discharged within the window is at risk; the key
    puts the fewest days left first (the most overdue first), then the newest shipment.
    """
    demurrage, detention = clocks(shipment, container_numbers, events, terms, now)
    # The discharge day is day 1 of the window, so day 45 is its last.
    urgent = [clock["days_left"] for clock in demurrage
              if is_at_risk(clock) and (clock["_today"] - clock["started_on"]).days < window_days]
    if not urgent:
        return None
    return (min(urgent), -shipment["id"]), _summary(shipment, demurrage, detention, terms)


def is_at_risk(clock):
    """A counting demurrage clock with known free days and 2 or fewer left (overdue included)."""
    return (clock["kind"] == "demurrage" and clock["state"] in COUNTING and clock["free_days"] is not None
            and clock["days_left"] <= AT_RISK_DAYS_LEFT)


def _summary(shipment, demurrage, detention, terms):
    return {
        "object": "free_time_summary",
        "shipment_id": shipment["id"],
        "shipment_reference": shipment["reference"],
        "transport_reference": shipment["transport_reference"],
        "at_risk": any(is_at_risk(clock) for clock in demurrage),
        # "Supplied by none of" the sources: neither kind has free days from anywhere.
        "terms_unknown": not terms["demurrage"].known and not terms["detention"].known,
        "demurrage": [_public(clock) for clock in demurrage],
        "detention": [_public(clock) for clock in detention],
        "active_clock": _public(_active_clock(demurrage, detention)),
    }


def _containers(container_numbers, events):
    """(number, events that concern it) for each container with clock milestones, in shipment order."""
    numbers = [compact_number(n) for n in container_numbers if n]
    numbers += sorted({compact_number(e["container_number"]) for e in events if e["container_number"]}
                      - set(numbers))
    result = []
    for number in dict.fromkeys(numbers):
        # Shipment-wide events (no container number) concern every container.
        own = [e for e in events if compact_number(e["container_number"]) in (number, None)]
        if any(e["milestone"] in CLOCK_MILESTONES for e in own):
            result.append((number, own))
    return result


def _actual(events, milestones):
    return [e for e in events if e["actual"] and e["milestone"] in milestones]


def _timed(events, after=None):
    return sorted((e for e in events if e["occurred_at"] is not None
                   and (after is None or e["occurred_at"] >= after["occurred_at"])),
                  key=lambda e: e["occurred_at"])


def _since(events, start):
    """Events at or after `start`, or without a time (they cannot be placed before it)."""
    return [e for e in events if e["occurred_at"] is None or e["occurred_at"] >= start["occurred_at"]]


def _demurrage(number, events, shipment, terms, now, position):
    """Demurrage: from the latest actual discharge to the first actual gate-out after it."""
    discharges = _actual(events, {"discharged"})
    timed = _timed(discharges)
    start = timed[-1] if timed else None
    if start is None:
        left = _actual(events, LEFT_TERMINAL) or shipment["status"] == "in_warehouse"
        state = GIVEN_UP if discharges or left else NOT_STARTED
        return _clock("demurrage", number, state, None, None, shipment, terms, now, position)
    stops = _timed(_actual(events, {"gate_out"}), after=start)
    if stops:
        return _clock("demurrage", number, STOPPED, start, stops[0], shipment, terms, now, position)
    lost = _since(_actual(events, LEFT_TERMINAL | {"untracked"}), start)
    if lost or shipment["status"] == "in_warehouse":
        return _clock("demurrage", number, GIVEN_UP, start, None, shipment, terms, now, position)
    return _clock("demurrage", number, RUNNING, start, None, shipment, terms, now, position)


def _detention(number, events, shipment, terms, now, position):
    """Detention: from the first actual gate-out after discharge to the first actual empty return after it."""
    timed_discharges = _timed(_actual(events, {"discharged"}))
    after = timed_discharges[-1] if timed_discharges else None
    starts = _timed(_actual(events, {"gate_out"}), after=after)
    if not starts:
        # Once discharged, an end of tracking means the gate-out will never be seen.
        if after is None:
            lost = _actual(events, LEFT_TERMINAL)
        else:
            lost = _since(_actual(events, LEFT_TERMINAL | {"untracked"}), after)
        state = GIVEN_UP if lost or shipment["status"] == "in_warehouse" else NOT_STARTED
        return _clock("detention", number, state, None, None, shipment, terms, now, position)
    start = starts[0]
    stops = _timed(_actual(events, {"empty_return"}), after=start)
    if stops:
        return _clock("detention", number, STOPPED, start, stops[0], shipment, terms, now, position)
    if _since(_actual(events, {"empty_return", "untracked"}), start):
        return _clock("detention", number, GIVEN_UP, start, None, shipment, terms, now, position)
    return _clock("detention", number, RUNNING, start, None, shipment, terms, now, position)


def _clock(kind, number, state, start, stop, shipment, terms, now, position):
    """A FreeTimeClock plus private keys (`_today`, `_position`) used for ordering."""
    started_on = local_day(start["occurred_at"], start["occurred_at_offset_minutes"]) if start else None
    ended_on = local_day(stop["occurred_at"], stop["occurred_at_offset_minutes"]) if stop else None
    # Today is the port's day: the current instant at the offset of the event that started the clock.
    today = max(local_day(now, start["occurred_at_offset_minutes"]), started_on) if start else None
    clock = {"object": "free_time_clock", "kind": kind, "container_number": number, "state": state,
             "free_days": terms.free_days, "free_days_source": terms.source, "free_days_basis": terms.basis,
             "started_on": started_on, "ended_on": ended_on, "last_free_day": None, "days_left": None,
             "elapsed_days": None, "used_days": None, "overdue_days": None,
             "carrier": shipment["carrier_name"], "_today": today, "_position": position}
    if started_on is None:
        return clock
    last_free = last_free_day(started_on, terms.free_days, terms.basis) if terms.known else None
    clock["last_free_day"] = last_free
    if state == GIVEN_UP:
        return clock
    through = ended_on or today
    clock["elapsed_days"] = (through - started_on).days + 1
    if last_free is None:
        return clock
    clock["used_days"] = free_days_used(started_on, through, last_free, terms.basis)
    clock["overdue_days"] = max(0, (through - last_free).days)
    if state == RUNNING:
        if clock["overdue_days"]:
            clock["state"] = OVERDUE
            clock["days_left"] = -clock["overdue_days"]
        else:
            clock["days_left"] = terms.free_days - clock["used_days"]
    return clock


def _urgency(clock):
    """Sort key: counting clocks before not-started ones, fewest days left first, then earliest start."""
    rank = 0 if clock["state"] in COUNTING else 1
    days_left = clock["days_left"] if clock["days_left"] is not None else float("inf")
    return (rank, days_left, clock["started_on"] or date.max, clock["_position"])


def _active_clock(demurrage, detention):
    unfinished = [clock for clock in demurrage if clock["state"] in UNFINISHED]
    if unfinished:
        return min(unfinished, key=_urgency)
    running = [clock for clock in detention if clock["state"] in COUNTING]
    return min(running, key=_urgency) if running else None


def _public(clock):
    if clock is None:
        return None
    return {key: value for key, value in clock.items() if not key.startswith("_")}

