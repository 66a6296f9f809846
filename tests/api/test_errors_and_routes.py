"""The error contract, routes, the `.json` suffix, methods, path ids and the absence of CORS."""
import pytest

from tests.support.factories import auth, make_container, make_label, make_org, make_shipment, make_token

VERSION = "2026-10-01"
UNKNOWN_ROUTE = {"error": {"type": "not_found_error", "code": "resource_missing",
                           "message": "Unrecognized request URL. See the API reference for the available paths.",
                           "param": None}}
METHOD_NOT_ALLOWED = {"error": {"type": "invalid_request_error", "code": "method_not_allowed",
                                "message": "Only GET is supported; the API is read-only.", "param": None}}


def no_such_shipment(value):
    return {"error": {"type": "not_found_error", "code": "resource_missing",
                      "message": f"No such shipment: {value!r}.", "param": None}}


@pytest.fixture
def token(conn):
    return make_token(conn, make_org(conn, "acme"))


@pytest.mark.parametrize("path", [
    "/", "/nope", "/shipment", "/Shipments", "/shipments/", "/organization/", "/shipments/shp_1/nope",
    "/organizations", "/v1/shipments", "//shipments", "/openapi", "/openapi.yaml",
    "/organization.xml", "/organization.JSON", "/shipments.csv", "/shipments.json/",
])
def test_unknown_route_is_404_without_version(client, token, path):
    response = client.get(path, headers=auth(token))
    assert response.status_code == 404
    assert response.json == UNKNOWN_ROUTE
    assert response.headers["Content-Type"] == "application/json"
    assert "Service-Version" not in response.headers


def test_unknown_route_needs_no_token(client, token):
    response = client.get("/nope")
    assert (response.status_code, response.json) == (404, UNKNOWN_ROUTE)
    assert "WWW-Authenticate" not in response.headers


@pytest.mark.parametrize("path", ["/organization", "/shipments", "/openapi.json"])
def test_json_suffix_serves_the_same_resource(conn, client, token, path):
    make_shipment(conn, 1, reference="R-1")
    plain, suffixed = client.get(path, headers=auth(token)), client.get(path + ".json", headers=auth(token))
    assert plain.status_code == suffixed.status_code == 200
    assert plain.json == suffixed.json
    assert plain.headers.get("Service-Version") == suffixed.headers.get("Service-Version")


def test_json_suffix_on_a_shipment_id(conn, client, token):
    shipment_id = make_shipment(conn, 1, reference="R-1")
    response = client.get(f"/shipments/shp_{shipment_id}.json?archived=true", headers=auth(token))
    assert response.status_code == 200
    assert response.json["id"] == f"shp_{shipment_id}"
    assert response.headers["Service-Version"] == VERSION


@pytest.mark.parametrize("suffix", [".xml", ".csv", ".html", ".JSON", ".json.xml", ".jsonx", "."])
def test_other_extension_on_a_shipment_id_is_404(conn, client, token, suffix):
    shipment_id = make_shipment(conn, 1)
    value = f"shp_{shipment_id}{suffix}"
    response = client.get(f"/shipments/{value}", headers=auth(token))
    assert response.status_code == 404
    assert response.json == no_such_shipment(value)
    # The path matched a route and the token was accepted: a 404 for a path id carries the version.
    assert response.headers["Service-Version"] == VERSION


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/organization", "/shipments", "/shipments/shp_1", "/openapi.json"])
def test_other_methods_are_405(client, token, method, path):
    response = client.open(path, method=method, headers=auth(token, Origin="https://example.com"),
                           json={"a": 1} if method in ("POST", "PUT", "PATCH") else None)
    assert response.status_code == 405
    assert response.json == METHOD_NOT_ALLOWED
    assert response.headers["Allow"] == "GET, HEAD"
    assert "Service-Version" not in response.headers
    assert not [name for name in response.headers.keys() if name.lower().startswith("access-control-")]


def test_head_is_answered_like_get(client, token):
    response = client.head("/organization", headers=auth(token))
    assert response.status_code == 200
    assert response.data == b""
    assert response.headers["Service-Version"] == VERSION
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("path", ["/organization", "/shipments", "/openapi.json", "/nope"])
def test_no_cors_headers(client, token, path):
    headers = auth(token, Origin="https://evil.example", **{"Access-Control-Request-Method": "GET"})
    response = client.get(path, headers=headers)
    assert not [name for name in response.headers.keys() if name.lower().startswith("access-control-")]
    preflight = client.options(path, headers=headers)
    assert preflight.status_code in (404, 405)
    assert not [name for name in preflight.headers.keys() if name.lower().startswith("access-control-")]


@pytest.mark.parametrize("value", [
    "shp_0", "shp_01", "shp_-1", "shp_+1", "shp_1.5", "shp_1e3", "shp_abc", "shp_", "shp", "1", "",
    "SHP_{id}", "shp__{id}", "shp_{id} ", " shp_{id}", "shp_{id}x", "ctr_{id}", "lbl_{id}", "org_1",
    "shp_1234567890123456789", "shp_999999999999999999", "shp_\u0661", "shp_{id}%00",
])
def test_malformed_or_wrong_prefix_path_id_is_404(conn, client, token, value):
    shipment_id = make_shipment(conn, 1)
    make_container(conn, shipment_id)
    make_label(conn, 1, "x", shipment_ids=[shipment_id])
    value = value.replace("{id}", str(shipment_id))
    response = client.get(f"/shipments/{value}", headers=auth(token))
    if value == "":
        assert (response.status_code, response.json) == (404, UNKNOWN_ROUTE)
        return
    assert response.status_code == 404
    assert response.json == no_such_shipment(value.replace("%00", "\x00"))
    assert response.headers["Service-Version"] == VERSION


@pytest.mark.parametrize("hidden", [
    {"organization": "other"}, {"awaiting_approval": True}, {"owned_elsewhere": True},
])
def test_foreign_or_hidden_shipment_is_404(conn, client, token, hidden):
    organization_id = make_org(conn, "globex") if hidden.pop("organization", None) else 1
    shipment_id = make_shipment(conn, organization_id, **hidden)
    response = client.get(f"/shipments/shp_{shipment_id}", headers=auth(token))
    assert response.status_code == 404
    assert response.json == no_such_shipment(f"shp_{shipment_id}")
    assert response.headers["Service-Version"] == VERSION


def test_400_error_body_names_the_parameter_and_carries_the_version(client, token):
    response = client.get("/shipments?limit=0", headers=auth(token))
    assert response.status_code == 400
    assert response.json == {"error": {
        "type": "invalid_request_error", "code": "invalid_parameter",
        "message": "limit must be an integer from 1 to 100, written in decimal digits.", "param": "limit"}}
    assert response.headers["Service-Version"] == VERSION
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("query", [
    "q=%00", "q=a%00b", "q=" + "x" * 501, "q=%FF%FE", "q=%ED%A0%80", "q=%25%5C_", "q='%3B--",
    "status=%00", "labels=lbl_1%00", "labels=" + ",".join(["lbl_1"] * 200), "archived=%00",
    "created_after=%00", "created_after=9999-12-31T23:59:59-14:00", "created_before=0001-01-01T00:00:00%2B14:00",
    "eta_after=2026-02-30", "eta_before=2026-01-01T25:00:00Z", "eta_before=2026-01-01T10:00:00%2B99:00",
    "starting_after=shp_999999999999999999", "limit=%00", "limit=999999999999999999999",
    "q=\u0000".encode("utf-8").decode("latin-1"),
])
def test_bad_input_is_never_a_500(conn, client, token, query):
    make_shipment(conn, 1, consignor="Frutas del Sol")
    response = client.get(f"/shipments?{query}", headers=auth(token))
    assert response.status_code in (200, 400), response.json
    assert response.headers["Content-Type"] == "application/json"
    text = response.get_data(as_text=True)
    assert "Traceback" not in text and "psycopg2" not in text
    if response.status_code == 400:
        assert response.json["error"]["code"] == "invalid_parameter"


def test_an_unexpected_failure_is_500_without_a_trace(app, client, token, monkeypatch):
    from models import shipments

    def boom(*args, **kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(shipments, "page_digests", boom)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = client.get("/shipments", headers=auth(token))
    assert response.status_code == 500
    assert response.json["error"]["type"] == "api_error"
    assert response.json["error"]["code"] == "internal_error"
    assert "secret detail" not in response.get_data(as_text=True)
    assert "Traceback" not in response.get_data(as_text=True)
