"""The free-time engine without a database: every worked example of docs/free-time.md.

`NOW` is Tuesday 2026-03-10 12:00 UTC; every example's events are placed relative to it.
"""
from datetime import date, datetime, timezone

import pytest

from models import free_time
from models.free_time_rules import (UNKNOWN_TERMS, Terms, free_days_used, last_free_day, local_day,
                                    resolve_terms)

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)
BOX, BOX2 = "MSCU1234567", "TGHU7654321"
CARRIER5 = Terms(5, "carrier", "calendar")
CARRIER4 = Terms(4, "carrier", "calendar")


def ev(milestone, when, container=BOX, offset=0, actual=True):
    """A tracking event; `when` is 'MM-DDTHH:MM' in March 2026 UTC unless it is None."""
    occurred_at = None if when is None else datetime.fromisoformat(f"2026-{when}:00+00:00")
    return {"milestone": milestone, "actual": actual, "occurred_at": occurred_at,
            "occurred_at_offset_minutes": offset, "container_number": container}


def shipment(**values):
    return {"id": 7, "reference": "SHIP-20260301-AB12", "transport_reference": "MEDU1234567",
            "transport_type": "ocean", "status": "arrived", "carrier_name": "MSC", **values}


def d(month_day):
    return None if month_day is None else date.fromisoformat(f"2026-{month_day}")


def clock_tuple(clock):
    """(state, started_on, ended_on, last_free_day, days_left, elapsed, used, overdue) of a clock."""
    return (clock["state"], clock["started_on"], clock["ended_on"], clock["last_free_day"],
            clock["days_left"], clock["elapsed_days"], clock["used_days"], clock["overdue_days"])


def c(state, started=None, ended=None, last_free=None, left=None, elapsed=None, used=None, overdue=None):
    return (state, d(started), d(ended), d(last_free), left, elapsed, used, overdue)


NOT_STARTED = c("not_started")

# (example id, shipment overrides, container numbers, events, (demurrage terms, detention terms),
#  expected demurrage clocks, expected detention clocks, at_risk, active clock (kind, container) or None)
EXAMPLES = [
    ("E1-in-transit", {}, [BOX], [ev("loaded", "02-10T08:00")], (CARRIER5, CARRIER4),
     [NOT_STARTED], [NOT_STARTED], False, ("demurrage", BOX)),
    ("E2-two-days-left", {}, [BOX], [ev("discharged", "03-08T10:00")], (CARRIER5, CARRIER4),
     [c("running", "03-08", None, "03-12", 2, 3, 3, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E3-three-days-left", {}, [BOX], [ev("discharged", "03-09T10:00")], (CARRIER5, CARRIER4),
     [c("running", "03-09", None, "03-13", 3, 2, 2, 0)], [NOT_STARTED], False, ("demurrage", BOX)),
    ("E4-last-free-day-today", {}, [BOX], [ev("discharged", "03-06T10:00")], (CARRIER5, CARRIER4),
     [c("running", "03-06", None, "03-10", 0, 5, 5, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E5-overdue", {}, [BOX], [ev("discharged", "03-01T10:00")], (CARRIER5, CARRIER4),
     [c("overdue", "03-01", None, "03-05", -5, 10, 5, 5)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E6-zero-free-days", {}, [BOX], [ev("discharged", "03-10T06:00")], (Terms(0, "shipment"), CARRIER4),
     [c("overdue", "03-10", None, "03-09", -1, 1, 0, 1)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E7-gated-out-detention-overdue", {}, [BOX],
     [ev("discharged", "03-01T10:00"), ev("gate_out", "03-04T15:00")], (CARRIER5, CARRIER4),
     [c("stopped", "03-01", "03-04", "03-05", None, 4, 4, 0)],
     [c("overdue", "03-04", None, "03-07", -3, 7, 4, 3)], False, ("detention", BOX)),
    ("E8-both-stopped", {}, [BOX],
     [ev("discharged", "03-01T10:00"), ev("gate_out", "03-08T09:00"), ev("empty_return", "03-09T11:00")],
     (CARRIER5, CARRIER4),
     [c("stopped", "03-01", "03-08", "03-05", None, 8, 5, 3)],
     [c("stopped", "03-08", "03-09", "03-11", None, 2, 2, 0)], False, None),
    ("E9-working-days-from-friday", {}, [BOX], [ev("discharged", "03-06T10:00")],
     (Terms(3, "arrival_notice", "working"), CARRIER4),
     [c("running", "03-06", None, "03-10", 0, 5, 3, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E10-working-days-from-saturday", {}, [BOX], [ev("discharged", "03-07T10:00")],
     (Terms(3, "arrival_notice", "working"), CARRIER4),
     [c("running", "03-07", None, "03-11", 1, 4, 2, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E11-port-local-day", {}, [BOX], [ev("discharged", "03-07T22:30", offset=120)], (CARRIER5, CARRIER4),
     [c("running", "03-08", None, "03-12", 2, 3, 3, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E12-unknown-terms", {}, [BOX], [ev("discharged", "03-08T10:00")], (UNKNOWN_TERMS, UNKNOWN_TERMS),
     [c("running", "03-08", None, None, None, 3)], [NOT_STARTED], False, ("demurrage", BOX)),
    ("E13-gate-out-without-discharge", {}, [BOX], [ev("gate_out", "03-09T08:00")], (CARRIER5, CARRIER4),
     [c("given_up")], [c("running", "03-09", None, "03-12", 2, 2, 2, 0)], False, ("detention", BOX)),
    ("E14-delivered-without-gate-out", {}, [BOX],
     [ev("discharged", "03-06T10:00"), ev("delivered", "03-09T10:00")], (CARRIER5, CARRIER4),
     [c("given_up", "03-06", None, "03-10")], [c("given_up")], False, None),
    ("E15-tracking-ended", {}, [BOX],
     [ev("discharged", "03-06T10:00"), ev("untracked", "03-07T00:00", container=None)], (CARRIER5, CARRIER4),
     [c("given_up", "03-06", None, "03-10")], [c("given_up")], False, None),
    ("E16-in-warehouse", {"status": "in_warehouse"}, [BOX], [ev("discharged", "03-06T10:00")],
     (CARRIER5, CARRIER4), [c("given_up", "03-06", None, "03-10")], [c("given_up")], False, None),
    ("E17-estimated-discharge", {}, [BOX], [ev("discharged", "03-09T10:00", actual=False)], (CARRIER5, CARRIER4),
     [NOT_STARTED], [NOT_STARTED], False, ("demurrage", BOX)),
    ("E18-corrected-discharge", {}, [BOX],
     [ev("discharged", "03-05T10:00"), ev("discharged", "03-07T10:00")], (CARRIER5, CARRIER4),
     [c("running", "03-07", None, "03-11", 1, 4, 4, 0)], [NOT_STARTED], True, ("demurrage", BOX)),
    ("E19-shipment-wide-discharge", {}, [BOX2, BOX],
     [ev("discharged", "03-02T10:00", container=None), ev("gate_out", "03-05T10:00", container=BOX)],
     (CARRIER5, CARRIER4),
     [c("overdue", "03-02", None, "03-06", -4, 9, 5, 4), c("stopped", "03-02", "03-05", "03-06", None, 4, 4, 0)],
     [NOT_STARTED, c("overdue", "03-05", None, "03-08", -2, 6, 4, 2)], True, ("demurrage", BOX2)),
    ("E20-most-urgent-container", {}, [BOX, BOX2],
     [ev("discharged", "03-08T10:00", container=BOX), ev("discharged", "03-07T10:00", container=BOX2)],
     (CARRIER5, CARRIER4),
     [c("running", "03-08", None, "03-12", 2, 3, 3, 0), c("running", "03-07", None, "03-11", 1, 4, 4, 0)],
     [NOT_STARTED, NOT_STARTED], True, ("demurrage", BOX2)),
    ("E21-containers-known-from-events-only", {}, [],
     [ev("loaded", "02-10T08:00", container="tghu 765-4321"), ev("loaded", "02-10T08:00", container=BOX)],
     (CARRIER5, CARRIER4), [NOT_STARTED, NOT_STARTED], [NOT_STARTED, NOT_STARTED], False, ("demurrage", BOX)),
    ("E22-no-clock-milestones", {}, [BOX], [ev("booked", "01-20T08:00")], (CARRIER5, CARRIER4),
     [], [], False, None),
    ("E23-air-shipment", {"transport_type": "air"}, [BOX], [ev("discharged", "03-08T10:00")],
     (CARRIER5, CARRIER4), [], [], False, None),
]


@pytest.mark.parametrize("name, overrides, numbers, events, terms, demurrage, detention, at_risk, active",
                         EXAMPLES, ids=[example[0] for example in EXAMPLES])
def test_worked_examples(name, overrides, numbers, events, terms, demurrage, detention, at_risk, active):
    summary = free_time.summarize(shipment(**overrides), numbers, events,
                                  {"demurrage": terms[0], "detention": terms[1]}, NOW)
    assert [clock_tuple(clock) for clock in summary["demurrage"]] == demurrage
    assert [clock_tuple(clock) for clock in summary["detention"]] == detention
    assert summary["at_risk"] is at_risk
    clock = summary["active_clock"]
    assert (clock and (clock["kind"], clock["container_number"])) == (active or None)


def test_whole_summary_with_unknown_terms():
    summary = free_time.summarize(shipment(carrier_name=None), [BOX], [ev("discharged", "03-08T10:00")],
                                  {"demurrage": UNKNOWN_TERMS, "detention": UNKNOWN_TERMS}, NOW)
    running = {"object": "free_time_clock", "kind": "demurrage", "container_number": BOX, "state": "running",
               "free_days": None, "free_days_source": "unknown", "free_days_basis": "calendar",
               "started_on": d("03-08"), "ended_on": None, "last_free_day": None, "days_left": None,
               "elapsed_days": 3, "used_days": None, "overdue_days": None, "carrier": None}
    waiting = {**running, "kind": "detention", "state": "not_started", "started_on": None, "elapsed_days": None}
    assert summary == {"object": "free_time_summary", "shipment_id": 7, "shipment_reference": "SHIP-20260301-AB12",
                       "transport_reference": "MEDU1234567", "at_risk": False, "terms_unknown": True,
                       "demurrage": [running], "detention": [waiting], "active_clock": running}


def test_terms_known_for_one_kind_only():
    summary = free_time.summarize(shipment(), [BOX], [ev("discharged", "03-09T10:00")],
                                  {"demurrage": Terms(1, "shipment"), "detention": UNKNOWN_TERMS}, NOW)
    assert (summary["terms_unknown"], summary["at_risk"]) == (False, True)


@pytest.mark.parametrize("transport_type, events, terms_unknown", [
    ("ocean", [ev("discharged", "03-08T10:00")], True),
    ("ocean", [ev("booked", "01-20T08:00")], True),     # no clock yet, but its clocks will need free days
    ("air", [ev("discharged", "03-08T10:00")], False),  # no clocks: no free days are missing
    ("road", [], False),
    (None, [ev("discharged", "03-08T10:00")], False),
])
def test_terms_unknown_only_where_clocks_need_free_days(transport_type, events, terms_unknown):
    summary = free_time.summarize(shipment(transport_type=transport_type), [BOX], events,
                                  {"demurrage": UNKNOWN_TERMS, "detention": UNKNOWN_TERMS}, NOW)
    assert (summary["terms_unknown"], summary["at_risk"]) == (terms_unknown, False)


NOTICES = [{"demurrage_free_days": None, "detention_free_days": 6, "free_days_basis": None},
           {"demurrage_free_days": 8, "detention_free_days": 5, "free_days_basis": "working"}]
CARRIER_TERMS = {"demurrage_free_days": 7, "detention_free_days": 4, "free_days_basis": "working"}
NO_TERMS = {"demurrage_free_days": None, "detention_free_days": None, "free_days_basis": None}


@pytest.mark.parametrize("kind, own, notices, carrier, expected", [
    ("demurrage", {**NO_TERMS, "demurrage_free_days": 10}, NOTICES, CARRIER_TERMS, Terms(10, "shipment", "calendar")),
    ("demurrage", {**NO_TERMS, "demurrage_free_days": 10, "free_days_basis": "working"}, [], None,
     Terms(10, "shipment", "working")),
    ("demurrage", NO_TERMS, NOTICES, CARRIER_TERMS, Terms(8, "arrival_notice", "working")),
    ("detention", NO_TERMS, NOTICES, CARRIER_TERMS, Terms(6, "arrival_notice", "calendar")),
    ("detention", NO_TERMS, [], CARRIER_TERMS, Terms(4, "carrier", "working")),
    ("detention", {**NO_TERMS, "demurrage_free_days": 10}, [], None, UNKNOWN_TERMS),
    ("demurrage", NO_TERMS, [NO_TERMS], None, UNKNOWN_TERMS),
])
def test_resolve_terms(kind, own, notices, carrier, expected):
    assert resolve_terms(kind, own, notices, carrier) == expected


@pytest.mark.parametrize("started, free_days, basis, expected", [
    ("03-06", 5, "calendar", "03-10"),
    ("03-06", 0, "calendar", "03-05"),
    ("03-06", 3, "working", "03-10"),
    ("03-07", 1, "working", "03-09"),
    ("03-07", 0, "working", "03-06"),
    ("03-02", 10, "working", "03-13"),
])
def test_last_free_day(started, free_days, basis, expected):
    assert last_free_day(d(started), free_days, basis) == d(expected)


@pytest.mark.parametrize("started, through, last_free, basis, expected", [
    ("03-06", "03-10", "03-10", "working", 3),
    ("03-06", "03-08", "03-10", "working", 1),
    ("03-06", "03-20", "03-10", "calendar", 5),
    ("03-06", "03-05", "03-10", "calendar", 0),
])
def test_free_days_used(started, through, last_free, basis, expected):
    assert free_days_used(d(started), d(through), d(last_free), basis) == expected


@pytest.mark.parametrize("moment, offset, expected", [
    ("03-07T22:30", 120, "03-08"),
    ("03-08T03:00", -300, "03-07"),
    ("03-08T03:00", None, "03-08"),
])
def test_local_day(moment, offset, expected):
    assert local_day(ev("x", moment)["occurred_at"], offset) == d(expected)


def test_today_is_the_ports_day():
    """At 23:00 UTC it is already the next day at a port two hours ahead."""
    late = datetime(2026, 3, 10, 23, 0, tzinfo=timezone.utc)
    summary = free_time.summarize(shipment(), [BOX], [ev("discharged", "03-08T10:00", offset=120)],
                                  {"demurrage": CARRIER5, "detention": CARRIER4}, late)
    assert clock_tuple(summary["demurrage"][0]) == c("running", "03-08", None, "03-12", 1, 4, 4, 0)


@pytest.mark.parametrize("discharged, listed", [("01-25T10:00", True), ("01-24T10:00", False)])
def test_at_risk_window_is_45_days(discharged, listed):
    entry = free_time.at_risk_entry(shipment(), [BOX], [ev("discharged", discharged)],
                                    {"demurrage": CARRIER5, "detention": CARRIER4}, NOW)
    assert (entry is not None) is listed


def test_at_risk_window_applies_to_the_clock_at_risk():
    """An old overdue container does not list a shipment whose recent container is safe."""
    events = [ev("discharged", "01-10T10:00", container=BOX), ev("discharged", "03-09T10:00", container=BOX2)]
    entry = free_time.at_risk_entry(shipment(), [BOX, BOX2], events,
                                    {"demurrage": CARRIER5, "detention": CARRIER4}, NOW)
    assert entry is None


@pytest.mark.parametrize("discharged, listed", [("03-08T10:00", True), ("03-09T10:00", False)])
def test_at_risk_threshold(discharged, listed):
    entry = free_time.at_risk_entry(shipment(), [BOX], [ev("discharged", discharged)],
                                    {"demurrage": CARRIER5, "detention": CARRIER4}, NOW)
    assert (entry is not None) is listed


def test_at_risk_urgency_orders_overdue_first_then_newest():
    terms = {"demurrage": CARRIER5, "detention": CARRIER4}
    entries = [free_time.at_risk_entry(shipment(id=number), [BOX], [ev("discharged", day)], terms, NOW)
               for number, day in ((1, "03-08T10:00"), (2, "03-01T10:00"), (3, "03-08T10:00"))]
    assert [entry[0] for entry in entries] == [(2, -1), (-5, -2), (2, -3)]
    ordered = sorted(entries, key=lambda entry: entry[0])
    assert [summary["shipment_id"] for _key, summary in ordered] == [2, 3, 1]
