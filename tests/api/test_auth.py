"""Authentication: bearer tokens, the 401 bodies and WWW-Authenticate, expiry, revocation, removal."""
import pytest

from models import organizations
from tests.support.apps import once_seen
from tests.support.factories import auth, make_org, make_shipment, make_token

MISSING = {"error": {"type": "authentication_error", "code": "missing_token",
                     "message": "No API token was sent. Send it as `Authorization: Bearer <ACCESS_TOKEN>`.",
                     "param": None}}
INVALID = {"error": {"type": "authentication_error", "code": "invalid_token",
                     "message": "The API token is invalid, expired or revoked, or its user left the organization.",
                     "param": None}}
CHALLENGE_MISSING = 'Bearer realm="Shipment Tracking API"'
CHALLENGE_INVALID = 'Bearer realm="Shipment Tracking API", error="invalid_token"'


def assert_401(response, body, challenge):
    assert response.status_code == 401
    assert response.json == body
    assert response.headers["WWW-Authenticate"] == challenge
    assert response.headers["Content-Type"] == "application/json"
    assert "Service-Version" not in response.headers


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": ""},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer    "},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Token sv_" + "a" * 40},
    {"Authorization": "sv_" + "a" * 40},
])
@pytest.mark.parametrize("path", ["/organization", "/shipments", "/shipments/shp_1"])
def test_no_bearer_token_is_missing_token(conn, client, headers, path):
    make_org(conn, "acme")
    assert_401(client.get(path, headers=headers), MISSING, CHALLENGE_MISSING)


@pytest.mark.parametrize("value", [
    "sv_" + "a" * 39,                 # too short
    "sv_" + "a" * 41,                 # too long
    "sv_" + "a" * 39 + "-",           # not a letter or digit
    "sv_" + "a" * 39 + "é",           # non-ASCII letter
    "SV_" + "a" * 40,                 # wrong prefix case
    "tok_" + "a" * 40,                # wrong prefix
    "sv_" + "a" * 40 + " extra",      # trailing junk
    "sv_" + "A1b2C3d4E5" * 4,         # well formed, never issued
])
def test_wrong_token_is_invalid_token(conn, client, value):
    make_org(conn, "acme")
    assert_401(client.get("/organization", headers={"Authorization": f"Bearer {value}"}),
               INVALID, CHALLENGE_INVALID)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_bearer_scheme_is_case_insensitive(conn, client, scheme):
    token = make_token(conn, make_org(conn, "acme"))
    response = client.get("/organization", headers={"Authorization": f"{scheme} {token}"})
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"


def until_refused(client, path, token):
    """GET `path` with `token` once refused: every process sees a change to a token within 2 seconds."""
    return once_seen(lambda: client.get(path, headers=auth(token)), lambda response: response.status_code == 401)


def test_expired_token_is_invalid(conn, client):
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id, expires="30d")
    assert client.get("/organization", headers=auth(token)).status_code == 200
    with conn.cursor() as cur:
        cur.execute("UPDATE tokens SET expires_at = now() - interval '1 second'")
    assert_401(until_refused(client, "/organization", token), INVALID, CHALLENGE_INVALID)


def test_revoked_token_is_invalid_within_two_seconds(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    assert client.get("/shipments", headers=auth(token)).status_code == 200
    with conn.cursor() as cur:
        cur.execute("UPDATE tokens SET revoked_at = now()")
    assert_401(until_refused(client, "/shipments", token), INVALID, CHALLENGE_INVALID)


def test_removed_member_tokens_stop_within_two_seconds(conn, client):
    org_id = make_org(conn, "acme")
    member_token = make_token(conn, org_id, email="member@acme.example")
    owner_token = make_token(conn, org_id)
    assert client.get("/organization", headers=auth(member_token)).status_code == 200
    member = organizations.get_membership(conn, org_id, "member@acme.example")
    organizations.remove_member(conn, org_id, member["user_id"])
    assert_401(until_refused(client, "/organization", member_token), INVALID, CHALLENGE_INVALID)
    assert client.get("/organization", headers=auth(owner_token)).status_code == 200


def test_token_reads_only_its_own_organization(conn, client):
    acme, globex = make_org(conn, "acme"), make_org(conn, "globex")
    own = make_shipment(conn, acme, reference="OWN-1")
    foreign = make_shipment(conn, globex, reference="FOREIGN-1")
    token = make_token(conn, acme)
    listed = client.get("/shipments", headers=auth(token)).json
    assert [item["id"] for item in listed["data"]] == [f"shp_{own}"]
    assert client.get(f"/shipments/shp_{foreign}", headers=auth(token)).status_code == 404
    assert client.get("/organization", headers=auth(token)).json["slug"] == "acme"


def test_openapi_needs_no_token_and_ignores_a_bad_one(conn, client):
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/openapi.json", headers={"Authorization": "Bearer nonsense"}).status_code == 200


def test_auth_checked_before_parameters_and_version(conn, client):
    make_org(conn, "acme")
    response = client.get("/shipments?limit=0", headers={"Service-Version": "1999-01-01"})
    assert_401(response, MISSING, CHALLENGE_MISSING)


def test_token_value_not_stored(conn):
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id)
    with conn.cursor() as cur:
        cur.execute("SELECT t.*::text AS row FROM tokens t")
        row = cur.fetchone()["row"]
    assert token not in row and token[3:] not in row
