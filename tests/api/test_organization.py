"""GET /organization: the organization and the token that asks."""
from datetime import datetime, timedelta, timezone

import pytest

from tests.support.factories import auth, make_org, make_token


def test_whole_body(conn, client):
    token = make_token(conn, make_org(conn, "acme", name="Acme Produce BV"), name="BI export")
    response = client.get("/organization", headers=auth(token))
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {
        "object": "organization", "id": "org_1", "name": "Acme Produce BV", "slug": "acme",
        "api_version": "2026-10-01",
        "token": {"id": "tok_1", "name": "BI export", "scopes": ["read"], "expires_at": None,
                  "user_email": "owner@acme.example"},
    }


@pytest.mark.parametrize("expires, days", [("30d", 30), ("90d", 90), ("1y", 365)])
def test_expiring_token(conn, client, expires, days):
    token = make_token(conn, make_org(conn, "acme"), email="member@acme.example", expires=expires)
    body = client.get("/organization", headers=auth(token)).json["token"]
    assert body["user_email"] == "member@acme.example"
    expires_at = datetime.strptime(body["expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs(expires_at - (datetime.now(timezone.utc) + timedelta(days=days))) < timedelta(days=1, minutes=1)
    with conn.cursor() as cur:
        cur.execute("SELECT expires_at FROM tokens")
        assert cur.fetchone()["expires_at"].replace(microsecond=0) == expires_at


def test_api_version_null_until_a_request_without_the_header(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    with_header = client.get("/organization", headers=auth(token, **{"Service-Version": "2026-10-01"}))
    assert with_header.json["api_version"] is None
    assert client.get("/organization", headers=auth(token)).json["api_version"] == "2026-10-01"
    assert client.get("/organization", headers=auth(token, **{"Service-Version": "2026-10-01"})).json[
        "api_version"] == "2026-10-01"


def test_each_token_sees_its_own_organization(conn, client):
    acme = make_token(conn, make_org(conn, "acme"))
    globex = make_token(conn, make_org(conn, "globex"), email="admin@globex.example", name="ops")
    assert client.get("/organization", headers=auth(globex)).json == {
        "object": "organization", "id": "org_2", "name": "Globex", "slug": "globex", "api_version": "2026-10-01",
        "token": {"id": "tok_2", "name": "ops", "scopes": ["read"], "expires_at": None,
                  "user_email": "admin@globex.example"},
    }
    assert client.get("/organization", headers=auth(acme)).json["id"] == "org_1"


def test_json_suffix(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    assert client.get("/organization.json", headers=auth(token)).json["slug"] == "acme"
