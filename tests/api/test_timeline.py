"""GET /shipments/{shipment_id}/timeline: legs, events in journey order, ETA revisions."""
import pytest

from models.timeline import journey_order
from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_org, make_shipment, make_token

NULL_EVENT_PARTS = {"container_number": None, "leg_index": None,
                    "location": {"name": None, "code": None, "country_code": None},
                    "vessel": {"name": None, "imo": None, "voyage": None}, "flight_number": None,
                    "position": {"latitude": None, "longitude": None}}


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id)}


def make_event(conn, shipment_id, milestone, occurred_at=None, **values):
    return insert(conn, "tracking_events", shipment_id=shipment_id, milestone=milestone,
                  occurred_at=occurred_at, **values)


def get(client, org, shipment_id=None):
    return client.get(f"/shipments/shp_{shipment_id or org['shipment']}/timeline", headers=auth(org["token"]))


def test_full_timeline(conn, client, org):
    shipment = make_shipment(conn, org["id"], archived=True)
    # Stored positions with a gap and out of order: served zero-based in travel order.
    second = insert(conn, "shipment_legs", shipment_id=shipment, position=5, transport_type="road",
                    origin_location="Rotterdam", origin_country="Netherlands", origin_timezone="+01:00")
    first = insert(conn, "shipment_legs", shipment_id=shipment, position=2, transport_type="ocean",
                   carrier="Maersk", transport_reference="MAEU123456", origin_location="Callao",
                   origin_country="Peru", origin_timezone="-05:00", destination_location="Rotterdam",
                   destination_country="Netherlands", destination_timezone="+01:00",
                   etd="2026-05-01T10:00:00Z", eta="2026-05-25T06:00:00Z")
    event = make_event(conn, shipment, "departed", "2026-05-03T17:05:09.75Z", actual=True,
                       occurred_at_offset_minutes=-300, container_number="MSCU1234567", leg_index=1,
                       location_name="Callao", location_code="PECLL", location_country_code="PE",
                       vessel_name="MSC Anna", vessel_imo="9777777", vessel_voyage="FA123",
                       latitude=-12.05, longitude=-77.15)
    estimate = make_event(conn, shipment, "arrived", "2026-05-25T06:00:00Z", actual=False,
                          occurred_at_offset_minutes=90, flight_number=None)
    untimed = make_event(conn, shipment, "discharged", occurred_at_offset_minutes=60)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET eta = '2026-05-20T00:00:00Z' WHERE id = %s", (shipment,))
        cur.execute("UPDATE shipments SET eta = '2026-05-22T12:00:00Z' WHERE id = %s", (shipment,))
        cur.execute("UPDATE shipments SET eta = '2026-05-22T12:04:00Z' WHERE id = %s", (shipment,))  # < 5 min
        cur.execute("UPDATE eta_revisions SET observed_at = ('2026-05-0' || id || 'T00:00:00Z')::timestamptz")
    # Backfilled by the application, observed before the others: listed first.
    backfilled = insert(conn, "eta_revisions", shipment_id=shipment, observed_at="2026-04-30T00:00:00Z",
                        previous_eta="2026-05-22T12:00:00Z", new_eta="2026-05-21T12:00:00Z", backfilled=True)

    response = get(client, org, shipment)

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {
        "object": "timeline", "shipment_id": f"shp_{shipment}",
        "legs": [
            {"object": "shipment_leg", "id": f"leg_{first}", "position": 0, "transport_type": "ocean",
             "carrier": "Maersk", "transport_reference": "MAEU123456",
             "origin": {"location": "Callao", "country": "Peru", "timezone": "-05:00"},
             "destination": {"location": "Rotterdam", "country": "Netherlands", "timezone": "+01:00"},
             "etd": "2026-05-01T10:00:00Z", "eta": "2026-05-25T06:00:00Z"},
            {"object": "shipment_leg", "id": f"leg_{second}", "position": 1, "transport_type": "road",
             "carrier": None, "transport_reference": None,
             "origin": {"location": "Rotterdam", "country": "Netherlands", "timezone": "+01:00"},
             "destination": {"location": None, "country": None, "timezone": None}, "etd": None, "eta": None},
        ],
        "events": [
            {"object": "tracking_event", "id": f"evt_{event}", "milestone": "departed", "actual": True,
             "occurred_at": "2026-05-03T17:05:09Z", "occurred_at_local": "2026-05-03T12:05:09-05:00",
             "container_number": "MSCU1234567", "leg_index": 1,
             "location": {"name": "Callao", "code": "PECLL", "country_code": "PE"},
             "vessel": {"name": "MSC Anna", "imo": "9777777", "voyage": "FA123"}, "flight_number": None,
             "position": {"latitude": -12.05, "longitude": -77.15}},
            {"object": "tracking_event", "id": f"evt_{estimate}", "milestone": "arrived", "actual": False,
             "occurred_at": "2026-05-25T06:00:00Z", "occurred_at_local": "2026-05-25T07:30:00+01:30",
             **NULL_EVENT_PARTS},
            {"object": "tracking_event", "id": f"evt_{untimed}", "milestone": "discharged", "actual": True,
             "occurred_at": None, "occurred_at_local": None, **NULL_EVENT_PARTS},
        ],
        "eta_revisions": [
            {"object": "eta_revision", "id": f"eta_{backfilled}", "observed_at": "2026-04-30T00:00:00Z",
             "previous_eta": "2026-05-22T12:00:00Z", "new_eta": "2026-05-21T12:00:00Z", "slip_seconds": -86400,
             "first_estimate": False, "backfilled": True},
            {"object": "eta_revision", "id": "eta_1", "observed_at": "2026-05-01T00:00:00Z", "previous_eta": None,
             "new_eta": "2026-05-20T00:00:00Z", "slip_seconds": None, "first_estimate": True,
             "backfilled": False},
            {"object": "eta_revision", "id": "eta_2", "observed_at": "2026-05-02T00:00:00Z",
             "previous_eta": "2026-05-20T00:00:00Z", "new_eta": "2026-05-22T12:00:00Z", "slip_seconds": 216000,
             "first_estimate": False, "backfilled": False},
        ],
    }


def test_empty_timeline(client, org):
    response = client.get(f"/shipments/shp_{org['shipment']}/timeline.json", headers=auth(org["token"]))
    assert (response.status_code, response.json) == (200, {
        "object": "timeline", "shipment_id": f"shp_{org['shipment']}", "legs": [], "events": [],
        "eta_revisions": []})


def test_utc_when_the_source_gave_no_offset(conn, client, org):
    make_event(conn, org["shipment"], "loaded", "2026-05-03T17:05:00+02:00")
    make_event(conn, org["shipment"], "departed", "2026-05-04T00:00:00Z", occurred_at_offset_minutes=0)
    events = get(client, org).json["events"]
    assert [(e["occurred_at"], e["occurred_at_local"]) for e in events] == [
        ("2026-05-03T15:05:00Z", "2026-05-03T15:05:00Z"), ("2026-05-04T00:00:00Z", "2026-05-04T00:00:00Z")]


def test_documented_example(conn, client, org):
    """The example of docs/timeline.md."""
    stored = [("departed", "2026-05-03"), ("gate_in", None), ("loaded", "2026-05-02"), ("discharged", None),
              ("arrived", "2026-05-20"), ("booked", None), ("exception", None), ("customs_cleared", None),
              ("eta_revised", "2026-05-10")]
    ids = [make_event(conn, org["shipment"], milestone, at) for milestone, at in stored]
    events = get(client, org).json["events"]
    assert [int(e["id"][4:]) - ids[0] + 1 for e in events] == [6, 2, 3, 1, 9, 5, 4, 8, 7]


def _event(event_id, milestone, rank, at=None):
    return {"id": event_id, "milestone": milestone, "rank": rank, "occurred_at": at}


@pytest.mark.parametrize("events, expected", [
    ([], []),
    # Only untimed: by rank, then id.
    ([_event(1, "arrived", 14), _event(2, "booked", 1), _event(3, "booked", 1)], [2, 3, 1]),
    # Equal times: by rank, then id.
    ([_event(1, "departed", 8, 5), _event(2, "loaded", 7, 5), _event(3, "loaded", 7, 5)], [2, 3, 1]),
    # Time beats rank: a late 'loaded' stays late; an untimed 'departed' follows the last timed rank <= 8.
    ([_event(1, "loaded", 7, 9), _event(2, "arrived", 14, 5), _event(3, "departed", 8)], [2, 1, 3]),
    # Air: an untimed 'manifested' (rank 6) follows the last timed event of rank <= 6
    # (received_from_shipper); an untimed 'notified' (17) follows arrived.
    ([_event(1, "received_from_shipper", 2, 1), _event(2, "loaded", 7, 3), _event(3, "manifested", 6),
      _event(4, "notified", 17), _event(5, "arrived", 14, 8)], [1, 3, 2, 5, 4]),
    # Lifecycle without time: last, even after a late timed lifecycle event.
    ([_event(1, "untracked", 25), _event(2, "exception", 24, 10), _event(3, "delivered", 20, 4)], [3, 2, 1]),
])
def test_journey_order(events, expected):
    assert [e["id"] for e in journey_order(events)] == expected


def test_missing_shipments_are_404(conn, client, org):
    other = make_org(conn, "other")
    foreign = make_shipment(conn, other)
    make_event(conn, foreign, "loaded", "2026-01-01")
    ids = [f"shp_{n}" for n in (foreign, make_shipment(conn, org["id"], awaiting_approval=True),
                                make_shipment(conn, org["id"], owned_elsewhere=True), 999999)]
    for shipment_id in ids + ["shp_0", "shp_007", "evt_1", "shp_-1", "shp_1234567890123456789"]:
        response = client.get(f"/shipments/{shipment_id}/timeline", headers=auth(org["token"]))
        assert response.status_code == 404, shipment_id
        assert response.headers["Service-Version"] == "2026-10-01"
        assert response.json == {"error": {"type": "not_found_error", "code": "resource_missing", "param": None,
                                           "message": f"No such shipment: {shipment_id!r}."}}


def test_common_rules(app, client, org):
    path = f"/shipments/shp_{org['shipment']}/timeline"
    missing = client.get(path)
    assert (missing.status_code, missing.json["error"]["code"]) == (401, "missing_token")
    assert "Service-Version" not in missing.headers
    invalid = client.get(path, headers={"Authorization": "Bearer sv_" + "x" * 40})
    assert (invalid.status_code, invalid.json["error"]["code"]) == (401, "invalid_token")
    version = client.get(path, headers=auth(org["token"], **{"Service-Version": "2026-10-02"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    assert client.get(path + ".html", headers=auth(org["token"])).status_code == 404
    client = with_limits(app, per_token=0).test_client()
    assert client.get(path, headers=auth(org["token"])).status_code == 429


def test_statement_count_does_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    shipment = org["shipment"]
    insert(conn, "shipment_legs", shipment_id=shipment, position=0)
    make_event(conn, shipment, "loaded", "2026-01-01")
    statement_counts(app).clear()
    get(client, org)
    for n in range(1, 20):
        insert(conn, "shipment_legs", shipment_id=shipment, position=n)
        make_event(conn, shipment, "departed", f"2026-01-{n + 1:02d}")
        make_event(conn, shipment, "arrived")
        insert(conn, "eta_revisions", shipment_id=shipment, new_eta=f"2026-02-{n:02d}T00:00:00Z")
    body = get(client, org).json
    assert (len(body["legs"]), len(body["events"]), len(body["eta_revisions"])) == (20, 39, 19)
    one, many = statement_counts(app)
    assert one == many
