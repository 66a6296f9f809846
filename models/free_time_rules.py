"""Free-time rules: the port's calendar day, counting free days by basis, and where free days come from.

Every decision here is written out, with worked examples, in docs/free-time.md.
"""
from dataclasses import dataclass
from datetime import timedelta, timezone

CALENDAR = "calendar"
WORKING = "working"
KINDS = ("demurrage", "detention")
# Where free days come from, first match wins; `unknown` when none supplies them.
SOURCE_SHIPMENT = "shipment"
SOURCE_ARRIVAL_NOTICE = "arrival_notice"
SOURCE_CARRIER = "carrier"
SOURCE_UNKNOWN = "unknown"
SOURCES = (SOURCE_SHIPMENT, SOURCE_ARRIVAL_NOTICE, SOURCE_CARRIER, SOURCE_UNKNOWN)
BASES = (CALENDAR, WORKING)

_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Terms:
    """Free days of one kind and where they came from; free_days is None when unknown."""

    free_days: int | None
    source: str
    basis: str = CALENDAR

    @property
    def known(self):
        """Whether some source supplied the free days."""
        return self.free_days is not None


UNKNOWN_TERMS = Terms(None, SOURCE_UNKNOWN, CALENDAR)


def resolve_terms(kind, shipment, notices, carrier_terms):
    """Free days of `kind`: the shipment's, else the latest arrival notice stating them, else carrier terms.

    `shipment` and `carrier_terms` (or None) map `<kind>_free_days` and `free_days_basis`;
    `notices` are arrival notices, latest received first.
    """
    column = f"{kind}_free_days"
    candidates = [(SOURCE_SHIPMENT, shipment)]
    # A notice that leaves this kind blank says nothing about it; an older one that states it still counts.
    candidates += [(SOURCE_ARRIVAL_NOTICE, notice) for notice in notices]
    if carrier_terms is not None:
        candidates.append((SOURCE_CARRIER, carrier_terms))
    for source, row in candidates:
        if row.get(column) is not None:
            return Terms(row[column], source, row.get("free_days_basis") or CALENDAR)
    return UNKNOWN_TERMS


def local_day(moment, offset_minutes):
    """The calendar day at the place of an event: the UTC instant shifted by the source's offset."""
    return (moment.astimezone(timezone.utc) + timedelta(minutes=offset_minutes or 0)).date()


def is_free_day(day, basis):
    """Whether `day` consumes a free day: every day on the calendar basis, Monday to Friday on working."""
    return basis == CALENDAR or day.weekday() < 5


def last_free_day(started_on, free_days, basis):
    """The last day without charge; the start day is the first free day when it counts on the basis."""
    if basis == CALENDAR:
        return started_on + timedelta(days=free_days - 1)
    day = started_on - _ONE_DAY
    counted = 0
    while counted < free_days:
        day += _ONE_DAY
        if is_free_day(day, basis):
            counted += 1
    return day


def free_days_used(started_on, through, last_free, basis):
    """Free days consumed from `started_on` through `through`, both included."""
    end = min(through, last_free)
    if basis == CALENDAR:
        return max(0, (end - started_on).days + 1)
    used = 0
    day = started_on
    while day <= end:
        used += is_free_day(day, basis)
        day += _ONE_DAY
    return used
