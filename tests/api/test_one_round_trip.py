"""The guard decides every request before its view, and the page is the view's one statement: what refuses a
request comes first, and a warm process's guard asks the database nothing."""
from rendering import versions
from tests.support.apps import warmed, with_limits
from tests.support.counting import guard_statement_counts, statement_counts
from tests.support.factories import auth, make_org, make_shipment, make_token

UNKNOWN = "sv_" + "A" * 40          # well formed, and no token's


def test_a_refused_parameter_with_an_unknown_token_is_a_401_first(client, conn):
    make_org(conn, "acme")
    for path in ("/shipments?limit=abc", "/shipments/shp_x", "/shipments/ord_1", "/shipments?limit=100"):
        response = client.get(path, headers=auth(UNKNOWN))
        assert (response.status_code, response.json["error"]["code"]) == (401, "invalid_token"), path
        assert response.headers["RateLimit-Policy"].startswith('"anonymous_per_ip";'), path


def test_a_refused_parameter_with_a_valid_token_is_counted_once(app, conn):
    token = make_token(conn, make_org(conn, "acme"))
    app = with_limits(app, per_token=100_000, per_ip=100_000)
    client = app.test_client()
    warmed(app, client, auth(token))
    before = client.get("/organization", headers=auth(token)).headers["RateLimit"]
    left = int(before.split(";r=")[1].split(";")[0])
    counts = statement_counts(app)
    counts.clear()
    guard_counts = guard_statement_counts(app)
    guard_counts.clear()
    response = client.get("/shipments?limit=abc", headers=auth(token))
    assert (response.status_code, response.json["error"]["code"]) == (400, "invalid_parameter")
    assert response.headers["RateLimit"].startswith(f'"per_token";r={left - 1};')
    # The principal and a reservation of the token's limits are kept from the first request: no statement.
    assert (counts, guard_counts) == ([], [0])


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
