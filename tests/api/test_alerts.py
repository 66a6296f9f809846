"""GET /alerts: open alerts of customer-visible kinds, keyset-paged, and the webhook accessor get_alert."""
import pytest

from models import alerts as alerts_model
from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_org, make_shipment, make_token

MISSING_TOKEN = {"error": {"type": "authentication_error", "code": "missing_token", "param": None,
                           "message": "No API token was sent. Send it as `Authorization: Bearer <ACCESS_TOKEN>`."}}


@pytest.fixture
def org(conn):
    """An organization with a token, and the alert kinds the tests use."""
    org_id = make_org(conn, "acme")
    insert_kind(conn, "eta_drift", "schedule", True)
    insert_kind(conn, "internal_probe", "ops", False)
    return {"id": org_id, "token": make_token(conn, org_id)}


def insert_kind(conn, key, group, visible):
    with conn.cursor() as cur:
        cur.execute('INSERT INTO alert_kinds (key, "group", customer_visible) VALUES (%s, %s, %s)',
                    (key, group, visible))


def make_alert(conn, org_id, shipment_id, key="eta_drift", **values):
    values = {"organization_id": org_id, "shipment_id": shipment_id, "key": key, "severity": "warning",
              "title": "ETA moved", "summary": "The ETA moved by 3 days.",
              "since": "2026-01-02T03:04:05Z", "first_detected_at": "2026-01-02T03:04:06Z",
              "last_detected_at": "2026-01-03T00:00:00Z", **values}
    return insert(conn, "alerts", **values)


def alert_body(alert_id, shipment_id, reference):
    return {"object": "monitoring_alert", "id": f"alr_{alert_id}", "shipment_id": f"shp_{shipment_id}",
            "shipment_reference": reference, "key": "eta_drift", "group": "schedule", "severity": "warning",
            "title": "ETA moved", "summary": "The ETA moved by 3 days.", "since": "2026-01-02T03:04:05Z",
            "first_detected_at": "2026-01-02T03:04:06Z", "last_detected_at": "2026-01-03T00:00:00Z",
            "resolved_at": None}


def test_lists_open_visible_alerts_newest_first(conn, client, org):
    active = make_shipment(conn, org["id"], reference="S-1")
    archived = make_shipment(conn, org["id"], reference="S-2", archived=True)
    hidden = make_shipment(conn, org["id"], reference="S-3", awaiting_approval=True)
    elsewhere = make_shipment(conn, org["id"], reference="S-4", owned_elsewhere=True)
    other_org = make_org(conn, "other")
    foreign = make_shipment(conn, other_org, reference="S-5")
    first = make_alert(conn, org["id"], active)
    second = make_alert(conn, org["id"], archived)
    make_alert(conn, org["id"], active, resolved_at="2026-01-04T00:00:00Z")
    make_alert(conn, org["id"], active, key="internal_probe")
    make_alert(conn, org["id"], hidden)
    make_alert(conn, org["id"], elsewhere)
    make_alert(conn, other_org, foreign)

    response = client.get("/alerts", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.headers["Content-Type"] == "application/json"
    assert response.json == {"object": "list", "has_more": False,
                             "data": [alert_body(second, archived, "S-2"), alert_body(first, active, "S-1")]}


def test_empty_list(client, org):
    response = client.get("/alerts.json", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.json == {"object": "list", "data": [], "has_more": False}


def test_keyset_paging(conn, client, org):
    shipment = make_shipment(conn, org["id"], reference="S-1")
    ids = [make_alert(conn, org["id"], shipment) for _ in range(5)]
    seen, starting_after = [], None
    for expected_more in (True, True, False):
        query = "/alerts?limit=2" + (f"&starting_after=alr_{starting_after}" if starting_after else "")
        page = client.get(query, headers=auth(org["token"])).json
        assert page["has_more"] is expected_more
        seen += [item["id"] for item in page["data"]]
        starting_after = page["data"][-1]["id"][4:]
        # An alert arriving during paging lands before the cursor: no gap, no repeat.
        make_alert(conn, org["id"], shipment)
    assert seen == [f"alr_{n}" for n in reversed(ids)]


def test_shipment_filter(conn, client, org):
    one = make_shipment(conn, org["id"], reference="S-1")
    two = make_shipment(conn, org["id"], reference="S-2")
    make_alert(conn, org["id"], one)
    wanted = make_alert(conn, org["id"], two)
    foreign = make_shipment(conn, make_org(conn, "other"), reference="S-9")
    response = client.get(f"/alerts?shipment=shp_{two}", headers=auth(org["token"]))
    assert response.json == {"object": "list", "data": [alert_body(wanted, two, "S-2")], "has_more": False}
    for absent in (foreign, 999999):
        response = client.get(f"/alerts?shipment=shp_{absent}", headers=auth(org["token"]))
        assert response.status_code == 200
        assert response.json == {"object": "list", "data": [], "has_more": False}


@pytest.mark.parametrize("query, param", [
    ("shipment=ctr_1", "shipment"), ("shipment=shp_0", "shipment"), ("shipment=shp_01", "shipment"),
    ("shipment=1", "shipment"), ("shipment[]=shp_1", "shipment"), ("shipment[a]=shp_1", "shipment"),
    ("shipment=shp_1234567890123456789", "shipment"),
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=1e1", "limit"), ("limit=0x10", "limit"),
    ("limit=-1", "limit"), ("limit=", "limit"), ("limit[]=5", "limit"),
    ("starting_after=shp_1", "starting_after"), ("starting_after=alr_x", "starting_after"),
    ("starting_after=alr_0", "starting_after"),
])
def test_invalid_parameters(client, org, query, param):
    response = client.get(f"/alerts?{query}", headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.headers["Service-Version"] == "2026-10-01"
    error = response.json["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_parameter", param)


def test_unknown_parameters_ignored_and_last_occurrence_wins(conn, client, org):
    shipment = make_shipment(conn, org["id"], reference="S-1")
    alert = make_alert(conn, org["id"], shipment)
    response = client.get(f"/alerts?foo=bar&shipment=shp_999&shipment=shp_{shipment}", headers=auth(org["token"]))
    assert response.json["data"] == [alert_body(alert, shipment, "S-1")]


def test_common_rules(conn, client, org):
    assert client.get("/alerts").json == MISSING_TOKEN
    assert "Service-Version" not in client.get("/alerts").headers
    bad = client.get("/alerts", headers=auth("sv_" + "a" * 40))
    assert (bad.status_code, bad.json["error"]["code"]) == (401, "invalid_token")
    version = client.get("/alerts", headers=auth(org["token"], **{"Service-Version": "2020-01-01"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    assert "Service-Version" not in version.headers
    pinned = client.get("/alerts", headers=auth(org["token"], **{"Service-Version": "2026-10-01"}))
    assert pinned.status_code == 200
    assert pinned.headers["Service-Version"] == "2026-10-01"
    assert client.get("/alerts.xml", headers=auth(org["token"])).status_code == 404


def test_rate_limited(app, client, org):
    client = with_limits(app, per_token=2).test_client()
    statuses = [client.get("/alerts", headers=auth(org["token"])).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_statement_count_does_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    shipment = make_shipment(conn, org["id"], reference="S-1")
    make_alert(conn, org["id"], shipment)
    statement_counts(app).clear()
    assert len(client.get("/alerts", headers=auth(org["token"])).json["data"]) == 1
    for _ in range(30):
        make_alert(conn, org["id"], make_shipment(conn, org["id"]))
    assert len(client.get("/alerts?limit=100", headers=auth(org["token"])).json["data"]) == 31
    one, many = statement_counts(app)
    assert one == many


def test_get_alert_matches_the_listed_object(conn, client, org):
    shipment = make_shipment(conn, org["id"], reference="S-1")
    alert = make_alert(conn, org["id"], shipment)
    internal = make_alert(conn, org["id"], shipment, key="internal_probe")
    from rendering.schemas.alerts import MonitoringAlertSchema

    dumped = MonitoringAlertSchema().dump(alerts_model.get_alert(conn, org["id"], alert))
    assert dumped == client.get("/alerts", headers=auth(org["token"])).json["data"][0]
    assert alerts_model.get_alert(conn, org["id"], internal) is None
    hidden = make_alert(conn, org["id"], make_shipment(conn, org["id"], awaiting_approval=True))
    assert alerts_model.get_alert(conn, org["id"], hidden) is None
    # Resolved before the webhook was rendered: still found, with resolved_at.
    resolved = make_alert(conn, org["id"], shipment, resolved_at="2026-01-04T00:00:00Z")
    dumped = MonitoringAlertSchema().dump(alerts_model.get_alert(conn, org["id"], resolved))
    assert dumped == {**alert_body(resolved, shipment, "S-1"), "resolved_at": "2026-01-04T00:00:00Z"}
    assert alerts_model.get_alert(conn, make_org(conn, "other"), alert) is None
