"""GET /shipments/{id}/free_time and GET /free_time/at_risk against a real PostgreSQL.

Events are placed relative to the real current day (UTC, offset 0) at 00:01, so they are never in the future.
"""
from datetime import date, datetime, time, timedelta, timezone

import pytest

from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_container, make_org, make_shipment, make_token

TODAY = datetime.now(timezone.utc).date()
BOX, BOX2 = "MSCU1234567", "TGHU7654321"


@pytest.fixture
def org(conn):
    """An organization with a token and 5/4 calendar free days agreed with MSC."""
    org_id = make_org(conn, "acme")
    insert(conn, "carrier_terms", organization_id=org_id, carrier="msc", demurrage_free_days=5,
           detention_free_days=4)
    return {"id": org_id, "token": make_token(conn, org_id)}


def at(days_ago):
    return datetime.combine(TODAY - timedelta(days=days_ago), time(0, 1), timezone.utc)


def day(days_ago):
    return (TODAY - timedelta(days=days_ago)).isoformat()


def event(conn, shipment_id, milestone, days_ago, container=BOX, **values):
    insert(conn, "tracking_events", shipment_id=shipment_id, milestone=milestone, occurred_at=at(days_ago),
           occurred_at_offset_minutes=0, container_number=container, **values)


def ocean(conn, org_id, reference, discharged_days_ago=None, **values):
    """An ocean shipment carried by MSC with one container, discharged that many days ago."""
    values = {"transport_type": "ocean", "status": "arrived", "carrier_name": "MSC", **values}
    shipment_id = make_shipment(conn, org_id, reference=reference, **values)
    make_container(conn, shipment_id, number=BOX)
    if discharged_days_ago is not None:
        event(conn, shipment_id, "discharged", discharged_days_ago)
    return shipment_id


def clock(kind, state, free_days=5, source="carrier", basis="calendar", started=None, ended=None,
          last_free=None, left=None, elapsed=None, used=None, overdue=None, number=BOX, carrier="MSC"):
    """A FreeTimeClock body; day arguments are days ago."""
    return {"object": "free_time_clock", "kind": kind, "container_number": number, "state": state,
            "free_days": free_days, "free_days_source": source, "free_days_basis": basis,
            "started_on": None if started is None else day(started),
            "ended_on": None if ended is None else day(ended),
            "last_free_day": None if last_free is None else day(last_free), "days_left": left,
            "elapsed_days": elapsed, "used_days": used, "overdue_days": overdue, "carrier": carrier}


def summary(shipment_id, reference, demurrage, detention, active, at_risk=False, terms_unknown=False,
            transport_reference=None):
    return {"object": "free_time_summary", "shipment_id": f"shp_{shipment_id}", "shipment_reference": reference,
            "transport_reference": transport_reference, "at_risk": at_risk, "terms_unknown": terms_unknown,
            "demurrage": demurrage, "detention": detention, "active_clock": active}


def test_free_time_of_one_shipment(conn, client, org):
    shipment_id = ocean(conn, org["id"], "S-1", transport_reference="MEDU1234567", carrier_name="Msc")
    make_container(conn, shipment_id, number=BOX2)
    make_container(conn, shipment_id, number=None)
    event(conn, shipment_id, "loaded", 30, container=None)
    event(conn, shipment_id, "discharged", 3, container=BOX)
    event(conn, shipment_id, "discharged", 10, container=BOX2)
    event(conn, shipment_id, "gate_out", 2, container=BOX2)
    event(conn, shipment_id, "discharged", 1, container=BOX2, actual=False)

    response = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.headers["Content-Type"] == "application/json"
    running = clock("demurrage", "running", started=3, last_free=-1, left=1, elapsed=4, used=4, overdue=0,
                    carrier="Msc")
    assert response.json == summary(
        shipment_id, "S-1", transport_reference="MEDU1234567", at_risk=True, active=running,
        demurrage=[running, clock("demurrage", "stopped", started=10, ended=2, last_free=6, elapsed=9, used=5,
                                  overdue=4, number=BOX2, carrier="Msc")],
        detention=[clock("detention", "not_started", free_days=4, carrier="Msc"),
                   clock("detention", "running", free_days=4, started=2, last_free=-1, left=1, elapsed=3,
                         used=3, overdue=0, number=BOX2, carrier="Msc")])


@pytest.mark.parametrize("shipment_values, notices, expected", [
    ({"demurrage_free_days": 10, "free_days_basis": "working"}, [(2, 8, 6)], (10, "shipment", "working")),
    ({}, [(2, 8, 6), (1, None, 7)], (8, "arrival_notice", "calendar")),
    ({}, [(2, 6, 6), (1, 8, 7)], (8, "arrival_notice", "calendar")),
    ({}, [], (5, "carrier", "calendar")),
    ({"carrier_name": "Maersk"}, [], (None, "unknown", "calendar")),
    ({"carrier_name": None}, [], (None, "unknown", "calendar")),
])
def test_free_days_sources(conn, client, org, shipment_values, notices, expected):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=0, **shipment_values)
    for received_days_ago, demurrage, detention in notices:
        insert(conn, "arrival_notices", shipment_id=shipment_id, received_at=at(received_days_ago),
               demurrage_free_days=demurrage, detention_free_days=detention)
    body = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=auth(org["token"])).json
    active = body["active_clock"]
    assert (active["free_days"], active["free_days_source"], active["free_days_basis"]) == expected
    assert body["terms_unknown"] is (expected[0] is None)


@pytest.mark.parametrize("transport_type", ["air", "road", None])
def test_no_clocks_for_other_transport(conn, client, org, transport_type):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=1, transport_type=transport_type)
    response = client.get(f"/shipments/shp_{shipment_id}/free_time.json", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.json == summary(shipment_id, "S-1", [], [], None)


@pytest.mark.parametrize("transport_type, carrier_name, notice, terms_unknown", [
    # Only ocean shipments have clocks, so only they can miss the free days their clocks need.
    ("ocean", "Maersk", None, True),
    ("ocean", "MSC", None, False),
    ("ocean", "Maersk", (3, None), False),
    ("ocean", None, (None, 4), False),
    ("air", "Maersk", None, False),
    ("air", "MSC", None, False),
    ("road", None, None, False),
    ("road", "MSC", (3, 4), False),
    (None, None, None, False),
])
def test_terms_unknown_only_for_ocean_shipments(conn, client, org, transport_type, carrier_name, notice,
                                                terms_unknown):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=1, transport_type=transport_type,
                        carrier_name=carrier_name)
    if notice is not None:
        insert(conn, "arrival_notices", shipment_id=shipment_id, received_at=at(1),
               demurrage_free_days=notice[0], detention_free_days=notice[1])
    response = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    if transport_type == "ocean":
        assert len(response.json["demurrage"]) == 1 and response.json["active_clock"]["state"] == "running"
        assert response.json["terms_unknown"] is terms_unknown
    else:
        assert response.json == summary(shipment_id, "S-1", [], [], None, terms_unknown=False)


def test_unknown_terms_of_an_ocean_shipment_in_full(conn, client, org):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=2, carrier_name="Maersk")
    response = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=auth(org["token"]))
    running = clock("demurrage", "running", free_days=None, source="unknown", started=2, elapsed=3,
                    carrier="Maersk")
    assert response.status_code == 200
    assert response.json == summary(shipment_id, "S-1", [running],
                                     [clock("detention", "not_started", free_days=None, source="unknown",
                                            carrier="Maersk")],
                                     running, terms_unknown=True)


@pytest.mark.parametrize("case", ["other_org", "awaiting_approval", "owned_elsewhere", "wrong_prefix",
                                  "malformed", "unknown"])
def test_missing_shipment_is_404(conn, client, org, case):
    owner = make_org(conn, "other") if case == "other_org" else org["id"]
    hidden = {"awaiting_approval": {"awaiting_approval": True},
              "owned_elsewhere": {"owned_elsewhere": True}}.get(case, {})
    shipment_id = ocean(conn, owner, "S-1", discharged_days_ago=1, **hidden)
    path_id = {"wrong_prefix": f"ctr_{shipment_id}", "malformed": f"shp_0{shipment_id}",
               "unknown": f"shp_{shipment_id + 1000}"}.get(case, f"shp_{shipment_id}")
    response = client.get(f"/shipments/{path_id}/free_time", headers=auth(org["token"]))
    assert response.status_code == 404
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {"error": {"type": "not_found_error", "code": "resource_missing",
                                       "message": f"No such shipment: '{path_id}'.", "param": None}}


def test_at_risk_lists_urgent_demurrage_most_urgent_first(conn, client, org):
    two_left = ocean(conn, org["id"], "S-two-left", discharged_days_ago=2)
    overdue = ocean(conn, org["id"], "S-overdue", discharged_days_ago=9)
    also_two_left = ocean(conn, org["id"], "S-two-left-newer", discharged_days_ago=2)
    ocean(conn, org["id"], "S-three-left", discharged_days_ago=1)
    ocean(conn, org["id"], "S-archived", discharged_days_ago=9, archived=True)
    ocean(conn, org["id"], "S-warehouse", discharged_days_ago=9, status="in_warehouse")
    ocean(conn, org["id"], "S-air", discharged_days_ago=9, transport_type="air")
    ocean(conn, org["id"], "S-approval", discharged_days_ago=9, awaiting_approval=True)
    ocean(conn, org["id"], "S-elsewhere", discharged_days_ago=9, owned_elsewhere=True)
    ocean(conn, org["id"], "S-unknown-terms", discharged_days_ago=9, carrier_name="Maersk")
    ocean(conn, org["id"], "S-long-ago", discharged_days_ago=45)
    gated = ocean(conn, org["id"], "S-gated-out", discharged_days_ago=9)
    event(conn, gated, "gate_out", 8)
    estimated = ocean(conn, org["id"], "S-estimated")
    event(conn, estimated, "discharged", 9, actual=False)
    ocean(conn, make_org(conn, "other"), "S-other-org", discharged_days_ago=9)
    in_window = ocean(conn, org["id"], "S-day-45", discharged_days_ago=44)

    response = client.get("/free_time/at_risk", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"

    def listed(shipment_id, reference, days_ago):
        """5 calendar free days from the discharge day: the last free day is 4 days after it."""
        overdue_days = max(0, days_ago - 4)
        demurrage = clock("demurrage", "overdue" if overdue_days else "running", started=days_ago,
                          last_free=days_ago - 4, left=-overdue_days if overdue_days else 4 - days_ago,
                          elapsed=days_ago + 1, used=min(days_ago + 1, 5), overdue=overdue_days)
        return summary(shipment_id, reference, [demurrage], [clock("detention", "not_started", free_days=4)],
                       demurrage, at_risk=True)

    assert response.json == {"object": "list", "has_more": False, "data": [
        listed(in_window, "S-day-45", 44), listed(overdue, "S-overdue", 9),
        listed(also_two_left, "S-two-left-newer", 2), listed(two_left, "S-two-left", 2)]}


def test_at_risk_empty(conn, client, org):
    ocean(conn, org["id"], "S-three-left", discharged_days_ago=1)
    response = client.get("/free_time/at_risk", headers=auth(org["token"]))
    assert (response.status_code, response.json) == (200, {"object": "list", "data": [], "has_more": False})


def test_statement_counts_do_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version once
    first = ocean(conn, org["id"], "S-0", discharged_days_ago=9)
    statement_counts(app).clear()
    assert len(client.get("/free_time/at_risk", headers=auth(org["token"])).json["data"]) == 1
    assert len(client.get(f"/shipments/shp_{first}/free_time", headers=auth(org["token"])).json["demurrage"]) == 1
    for number in range(1, 21):
        shipment_id = ocean(conn, org["id"], f"S-{number}", discharged_days_ago=9)
        insert(conn, "arrival_notices", shipment_id=shipment_id, demurrage_free_days=3)
    for number in range(10):
        container = f"ABCU{number:07d}"
        make_container(conn, first, number=container)
        event(conn, first, "discharged", 3, container=container)
    assert len(client.get("/free_time/at_risk", headers=auth(org["token"])).json["data"]) == 21
    assert len(client.get(f"/shipments/shp_{first}/free_time", headers=auth(org["token"])).json["demurrage"]) == 11
    few_list, few_one, many_list, many_one = statement_counts(app)
    assert (many_list, many_one) == (few_list, few_one)


def test_dates_are_days(conn, client, org):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=2)
    body = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=auth(org["token"])).json
    assert date.fromisoformat(body["active_clock"]["started_on"]) == TODAY - timedelta(days=2)


def test_at_risk_prefilter_never_drops_what_the_engine_lists(conn, org):
    """Over a week of 'today's, the SQL prefilter keeps every shipment the engine finds at risk."""
    from models import free_time, free_time_queries
    from tests.support.free_time import list_at_risk

    base = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)  # a Monday
    ids = []
    for days_ago in range(0, 16):
        for free_days in (0, 1, 3, 5, 8):
            for basis, offset in (("calendar", -600), ("working", 0), ("working", 600)):
                shipment_id = make_shipment(conn, org["id"], transport_type="ocean", status="arrived",
                                            carrier_name="MSC", demurrage_free_days=free_days,
                                            free_days_basis=basis)
                insert(conn, "tracking_events", shipment_id=shipment_id, milestone="discharged",
                       occurred_at=base - timedelta(days=days_ago, hours=8), occurred_at_offset_minutes=offset,
                       container_number=BOX)
                ids.append(shipment_id)
    for weekday in range(7):
        now = base + timedelta(days=weekday)
        listed = [item["shipment_id"] for item in list_at_risk(conn, org["id"], now=now)]
        expected = [facts[0]["id"] for facts in free_time_queries.load_facts(conn, org["id"], ids)
                    if free_time.summarize(*facts, now)["at_risk"]]
        assert sorted(listed) == sorted(expected)
        assert 0 < len(expected) < len(ids)


@pytest.mark.parametrize("gate_out_container, listed", [
    (BOX, False), ("mscu 123-4567", False), (None, False), (BOX2, True)])
def test_at_risk_gate_out_of_the_same_container_stops_demurrage(conn, client, org, gate_out_container, listed):
    shipment_id = ocean(conn, org["id"], "S-1", discharged_days_ago=9)
    event(conn, shipment_id, "gate_out", 1, container=gate_out_container)
    data = client.get("/free_time/at_risk", headers=auth(org["token"])).json["data"]
    assert [item["shipment_id"] for item in data] == ([f"shp_{shipment_id}"] if listed else [])


def test_at_risk_shipment_wide_discharge_and_notice_terms(conn, client, org):
    shipment_id = ocean(conn, org["id"], "S-1", carrier_name="Unknown Lines")
    event(conn, shipment_id, "discharged", 2, container=None)
    insert(conn, "arrival_notices", shipment_id=shipment_id, demurrage_free_days=4)
    data = client.get("/free_time/at_risk", headers=auth(org["token"])).json["data"]
    assert [(item["shipment_id"], item["active_clock"]["free_days_source"], item["active_clock"]["days_left"])
            for item in data] == [(f"shp_{shipment_id}", "arrival_notice", 1)]
