"""GET /checks: current checks, failed and warning by default, keyset-paged."""
import pytest

from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_org, make_shipment, make_token

STATUSES = ("pending", "passed", "failed", "skipped", "warning")


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


def make_check(conn, org_id, shipment_id, status, key=None):
    return insert(conn, "checks", organization_id=org_id, shipment_id=shipment_id, status=status,
                  key=key or f"has_{status}", category="documents", title="Has a commercial invoice",
                  message="No invoice was found.", ran_at="2026-02-03T04:05:06Z")


def check_body(check_id, shipment_id, reference, status):
    return {"object": "shipment_check", "id": f"chk_{check_id}", "shipment_id": f"shp_{shipment_id}",
            "shipment_reference": reference, "key": f"has_{status}", "category": "documents", "status": status,
            "title": "Has a commercial invoice", "message": "No invoice was found.", "ran_at": "2026-02-03T04:05:06Z"}


@pytest.fixture
def every_status(conn, org):
    """One check of each status on an archived shipment; returns {status: id} and the shipment id."""
    shipment = make_shipment(conn, org["id"], reference="S-1", archived=True)
    return shipment, {status: make_check(conn, org["id"], shipment, status) for status in STATUSES}


@pytest.mark.parametrize("query, expected", [
    ("", ("warning", "failed")),
    ("?status=", ("warning", "failed")),
    ("?status=passed", ("passed",)),
    ("?status=pending,skipped", ("skipped", "pending")),
    ("?status=failed,failed", ("failed",)),
    ("?status=pending,passed,failed,skipped,warning", ("warning", "skipped", "failed", "passed", "pending")),
    ("?status=failed&status=passed", ("passed",)),
])
def test_status_filter(client, org, every_status, query, expected):
    shipment, ids = every_status
    response = client.get(f"/checks{query}", headers=auth(org["token"]))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {"object": "list", "has_more": False,
                             "data": [check_body(ids[s], shipment, "S-1", s) for s in expected]}


def test_the_documented_default_is_a_value_the_api_accepts(client, org, every_status):
    parameters = client.get("/openapi.json").json["paths"]["/checks"]["get"]["parameters"]
    status = next(p for p in parameters if isinstance(p, dict) and p.get("name") == "status")
    # One comma-separated value, the text a client sends.
    assert status["schema"]["type"] == "string"
    assert status["schema"]["default"] == "failed,warning"
    sent = client.get(f"/checks?status={status['schema']['default']}", headers=auth(org["token"]))
    omitted = client.get("/checks", headers=auth(org["token"]))
    assert sent.status_code == 200
    assert sent.json == omitted.json
    assert [item["status"] for item in sent.json["data"]] == ["warning", "failed"]


def test_hidden_and_foreign_shipments_left_out(conn, client, org):
    visible = make_shipment(conn, org["id"], reference="S-1")
    wanted = make_check(conn, org["id"], visible, "failed")
    make_check(conn, org["id"], make_shipment(conn, org["id"], awaiting_approval=True), "failed")
    make_check(conn, org["id"], make_shipment(conn, org["id"], owned_elsewhere=True), "failed")
    other = make_org(conn, "other")
    make_check(conn, other, make_shipment(conn, other), "failed")
    response = client.get("/checks.json", headers=auth(org["token"]))
    assert response.json == {"object": "list", "has_more": False,
                             "data": [check_body(wanted, visible, "S-1", "failed")]}


def test_shipment_filter(conn, client, org):
    one = make_shipment(conn, org["id"], reference="S-1")
    two = make_shipment(conn, org["id"], reference="S-2")
    make_check(conn, org["id"], one, "failed")
    wanted = make_check(conn, org["id"], two, "failed")
    response = client.get(f"/checks?shipment=shp_{two}", headers=auth(org["token"]))
    assert response.json["data"] == [check_body(wanted, two, "S-2", "failed")]
    other = make_org(conn, "other")
    for absent in (make_shipment(conn, other), 424242):
        response = client.get(f"/checks?shipment=shp_{absent}", headers=auth(org["token"]))
        assert (response.status_code, response.json) == (200, {"object": "list", "data": [], "has_more": False})


def test_keyset_paging(conn, client, org):
    shipment = make_shipment(conn, org["id"])
    ids = [make_check(conn, org["id"], shipment, "warning", key=f"k{n}") for n in range(5)]
    seen, cursor = [], None
    for expected_more in (True, True, False):
        query = "/checks?limit=2" + (f"&starting_after={cursor}" if cursor else "")
        page = client.get(query, headers=auth(org["token"])).json
        assert page["has_more"] is expected_more
        seen += [item["id"] for item in page["data"]]
        cursor = page["data"][-1]["id"]
        make_check(conn, org["id"], shipment, "warning", key=f"new{cursor}")
    assert seen == [f"chk_{n}" for n in reversed(ids)]


@pytest.mark.parametrize("query, param", [
    ("status=unknown", "status"), ("status=failed,", "status"), ("status=FAILED", "status"),
    ("status=error", "status"), ("status[]=failed", "status"), ("status[a]=failed", "status"),
    ("shipment=shp_x", "shipment"), ("shipment=chk_1", "shipment"), ("shipment[]=shp_1", "shipment"),
    ("limit=0", "limit"), ("limit=101", "limit"), ("limit=1e1", "limit"), ("limit=0x10", "limit"),
    ("limit=-5", "limit"), ("limit=", "limit"),
    ("starting_after=alr_1", "starting_after"), ("starting_after=chk_01", "starting_after"),
])
def test_invalid_parameters(client, org, query, param):
    response = client.get(f"/checks?{query}", headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.headers["Service-Version"] == "2026-10-01"
    error = response.json["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_parameter", param)


def test_common_rules(app, client, org):
    missing = client.get("/checks")
    assert (missing.status_code, missing.json["error"]["code"]) == (401, "missing_token")
    assert missing.headers["WWW-Authenticate"].startswith("Bearer realm=")
    assert "Service-Version" not in missing.headers
    version = client.get("/checks", headers=auth(org["token"], **{"Service-Version": "2099-01-01"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    assert client.get("/checks.csv", headers=auth(org["token"])).status_code == 404


def test_rate_limited(app, client, org):
    client = with_limits(app, per_token=1).test_client()
    assert client.get("/checks", headers=auth(org["token"])).status_code == 200
    limited = client.get("/checks", headers=auth(org["token"]))
    assert (limited.status_code, limited.json["error"]["code"]) == (429, "rate_limited")
    assert int(limited.headers["Retry-After"]) > 0


def test_statement_count_does_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    make_check(conn, org["id"], make_shipment(conn, org["id"]), "failed")
    statement_counts(app).clear()
    assert len(client.get("/checks", headers=auth(org["token"])).json["data"]) == 1
    for _ in range(30):
        make_check(conn, org["id"], make_shipment(conn, org["id"]), "failed")
    assert len(client.get("/checks?limit=100", headers=auth(org["token"])).json["data"]) == 31
    one, many = statement_counts(app)
    assert one == many
