"""The shortest path through the service: a token reads its organization."""
from tests.support.factories import auth, make_org, make_token


def test_organization_with_token(conn, client):
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id)
    response = client.get("/organization", headers=auth(token))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json["object"] == "organization"
    assert response.json["slug"] == "acme"
