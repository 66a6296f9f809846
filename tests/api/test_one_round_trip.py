"""The count and the page in one statement: what refuses a request still comes first, and nothing else changes."""
from rendering import versions
from tests.support.counting import statement_counts
from tests.support.factories import auth, make_org, make_shipment, make_token

UNKNOWN = "sv_" + "A" * 40          # well formed, so the count is left to the view


def test_a_refused_parameter_with_an_unknown_token_is_a_401_first(client, conn):
    make_org(conn, "acme")
    for path in ("/shipments?limit=abc", "/shipments/shp_x", "/shipments/ord_1", "/shipments?limit=100"):
        response = client.get(path, headers=auth(UNKNOWN))
        assert (response.status_code, response.json["error"]["code"]) == (401, "invalid_token"), path
        assert response.headers["RateLimit-Policy"].startswith('"anonymous_per_ip";'), path


def test_a_refused_parameter_with_a_valid_token_is_counted_once(app, client, conn):
    token = make_token(conn, make_org(conn, "acme"))
    client.get("/organization", headers=auth(token))                   # the version pin is a one-off statement
    counts = statement_counts(app)
    counts.clear()
    response = client.get("/shipments?limit=abc", headers=auth(token))
    assert (response.status_code, response.json["error"]["code"]) == (400, "invalid_parameter")
    assert response.headers["RateLimit"].startswith('"per_token";r=598;')
    assert counts == [1]


def test_the_first_request_of_an_unpinned_organization_pins_it_and_serves_the_page(app, client, conn):
    token = make_token(conn, make_org(conn, "acme"))
    make_shipment(conn, 1, reference="R-1")
    response = client.get("/shipments", headers=auth(token))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == versions.LATEST
    assert [item["reference"] for item in response.json["data"]] == ["R-1"]
    counts = statement_counts(app)
    counts.clear()
    again = client.get("/shipments", headers=auth(token, **{"Service-Version": versions.LATEST}))
    assert (again.status_code, again.get_data(), counts) == (200, response.get_data(), [1])
    assert again.headers["ETag"] == response.headers["ETag"]
