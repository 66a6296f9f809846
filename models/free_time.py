"""The free-time engine: demurrage and detention clocks as plain functions of facts and the current time.

No database here.  A shipment's facts are plain mappings: the shipment (id, reference,
transport_reference, transport_type, status, carrier_name), its container numbers in
order, its tracking events (milestone, actual, occurred_at, occurred_at_offset_minutes,
container_number) and its Terms per kind.  `now` is an aware datetime, injected so that
tests fix it.  The rules are in docs/free-time.md.
"""
from datetime import date, datetime, time, timedelta, timezone

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
        for position, (number, track) in enumerate(_containers(container_numbers, events)):
            demurrage.append(_demurrage(number, track, shipment, terms["demurrage"], now, position))
            detention.append(_detention(number, track, shipment, terms["detention"], now, position))
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


def same_days_span(now, offsets):
    """[start, end): the instants around `now` at which the port's day is the one of `now`, at every offset.

    `now` reaches a summary only as the port's day at the offset of each clock's start event
    (`_clock`), so a summary made at `now` from events with these offsets holds all through the span.
    """
    start = datetime.min.replace(tzinfo=timezone.utc)
    end = datetime.max.replace(tzinfo=timezone.utc)
    for offset in set(offsets):
        midnight = (datetime.combine(local_day(now, offset), time(0), timezone.utc)
                    - timedelta(minutes=offset or 0))
        start, end = max(start, midnight), min(end, midnight + timedelta(days=1))
    return start, end


def is_at_risk(clock):
    """A counting demurrage clock with known free days and 2 or fewer left (overdue included)."""
    return (clock["kind"] == "demurrage" and clock["state"] in COUNTING and clock["free_days"] is not None
            and clock["days_left"] <= AT_RISK_DAYS_LEFT)


def _summary(shipment, demurrage, detention, terms):
    public = {id(clock): _public(clock) for clock in demurrage + detention}
    active = _active_clock(demurrage, detention)
    return {
        "object": "free_time_summary",
        "shipment_id": shipment["id"],
        "shipment_reference": shipment["reference"],
        "transport_reference": shipment["transport_reference"],
        "at_risk": any(is_at_risk(clock) for clock in demurrage),
        "terms_unknown": _terms_unknown(shipment, terms),
        "demurrage": [public[id(clock)] for clock in demurrage],
        "detention": [public[id(clock)] for clock in detention],
        "active_clock": None if active is None else public[id(active)],
    }


def _terms_unknown(shipment, terms):
    """Whether free days the shipment's clocks need are supplied by none of the sources, for either kind.

    Only ocean shipments have clocks, so only they need free days: an air or road shipment
    (or one without a transport type) is never missing terms (docs/free-time.md).
    """
    if shipment["transport_type"] != "ocean":
        return False
    return not terms["demurrage"].known and not terms["detention"].known


def _containers(container_numbers, events):
    """(number, Track) for each container with clock milestones, in shipment order."""
    shared, own = [], {}
    for event in events:
        number = compact_number(event["container_number"])
        # Shipment-wide events (no container number) concern every container.
        (shared if number is None else own.setdefault(number, [])).append(event)
    numbers = [compact_number(number) for number in container_numbers if number]
    numbers += sorted(set(own) - set(numbers))
    result = []
    for number in dict.fromkeys(numbers):
        concerned = own.get(number, []) + shared
        if any(event["milestone"] in CLOCK_MILESTONES for event in concerned):
            result.append((number, Track(concerned)))
    return result


def _at(event):
    return event["occurred_at"]


class Track:
    """The actual events concerning one container: timed ones by milestone in time order, untimed milestones."""

    __slots__ = ("timed", "untimed")

    def __init__(self, events):
        self.timed, self.untimed = {}, set()
        for event in events:
            if not event["actual"]:
                continue
            if event["occurred_at"] is None:
                self.untimed.add(event["milestone"])
            else:
                self.timed.setdefault(event["milestone"], []).append(event)
        for timed in self.timed.values():
            timed.sort(key=_at)

    def last(self, milestone):
        """The latest timed event of `milestone`, or None."""
        timed = self.timed.get(milestone)
        return timed[-1] if timed else None

    def first(self, milestone, after=None):
        """The earliest timed event of `milestone` at or after the event `after`, or None."""
        for event in self.timed.get(milestone, ()):
            if after is None or event["occurred_at"] >= after["occurred_at"]:
                return event
        return None

    def seen(self, milestones, since=None):
        """Whether any of `milestones` happened at or after the event `since`, or at an unknown time."""
        if self.untimed & milestones:
            return True
        # Each list is in time order, so its last event is the one that may fall after `since`.
        return any(since is None or self.timed[milestone][-1]["occurred_at"] >= since["occurred_at"]
                   for milestone in milestones & self.timed.keys())


def _demurrage(number, track, shipment, terms, now, position):
    """Demurrage: from the latest actual discharge to the first actual gate-out after it."""
    in_warehouse = shipment["status"] == "in_warehouse"
    start = track.last("discharged")
    if start is None:
        lost = "discharged" in track.untimed or track.seen(LEFT_TERMINAL) or in_warehouse
        return _clock("demurrage", number, GIVEN_UP if lost else NOT_STARTED, None, None,
                      shipment, terms, now, position)
    stop = track.first("gate_out", start)
    if stop is not None:
        return _clock("demurrage", number, STOPPED, start, stop, shipment, terms, now, position)
    lost = track.seen(LEFT_TERMINAL | {"untracked"}, start) or in_warehouse
    return _clock("demurrage", number, GIVEN_UP if lost else RUNNING, start, None, shipment, terms, now, position)


def _detention(number, track, shipment, terms, now, position):
    """Detention: from the first actual gate-out after discharge to the first actual empty return after it."""
    discharge = track.last("discharged")
    start = track.first("gate_out", discharge)
    if start is None:
        # Once discharged, an end of tracking means the gate-out will never be seen.
        if discharge is None:
            lost = track.seen(LEFT_TERMINAL)
        else:
            lost = track.seen(LEFT_TERMINAL | {"untracked"}, discharge)
        lost = lost or shipment["status"] == "in_warehouse"
        return _clock("detention", number, GIVEN_UP if lost else NOT_STARTED, None, None,
                      shipment, terms, now, position)
    stop = track.first("empty_return", start)
    if stop is not None:
        return _clock("detention", number, STOPPED, start, stop, shipment, terms, now, position)
    lost = track.seen({"empty_return", "untracked"}, start)
    return _clock("detention", number, GIVEN_UP if lost else RUNNING, start, None, shipment, terms, now, position)


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
    public = clock.copy()
    del public["_today"], public["_position"]
    return public
