"""Service-Version: request header validation, pinning, and exactly when the response header is sent."""
import pytest

from rendering import versions
from tests.support.apps import once_seen
from tests.support.factories import auth, make_org, make_shipment, make_token

VERSION = "2026-10-01"


def pinned(conn, slug="acme"):
    with conn.cursor() as cur:
        cur.execute("SELECT api_version FROM organizations WHERE slug = %s", (slug,))
        return cur.fetchone()["api_version"]


@pytest.fixture
def token(conn):
    return make_token(conn, make_org(conn, "acme"))


def test_first_request_without_header_pins_the_latest(conn, client, token):
    assert pinned(conn) is None
    response = client.get("/organization", headers=auth(token))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == VERSION
    assert response.json["api_version"] == VERSION
    assert pinned(conn) == VERSION


def test_request_with_header_does_not_pin(conn, client, token):
    response = client.get("/organization", headers=auth(token, **{"Service-Version": VERSION}))
    assert response.status_code == 200
    assert response.headers["Service-Version"] == VERSION
    assert response.json["api_version"] is None
    assert pinned(conn) is None


@pytest.mark.parametrize("path, status", [("/shipments?limit=0", 400), ("/shipments/shp_404", 404),
                                          ("/shipments", 200)])
def test_any_answered_request_without_header_pins(conn, client, token, path, status):
    response = client.get(path, headers=auth(token))
    assert response.status_code == status
    assert response.headers["Service-Version"] == VERSION
    assert pinned(conn) == VERSION


@pytest.mark.parametrize("path, status", [("/nope", 404), ("/openapi.json", 200)])
def test_requests_that_resolve_no_version_do_not_pin(conn, client, token, path, status):
    response = client.get(path, headers=auth(token))
    assert response.status_code == status
    assert "Service-Version" not in response.headers
    assert pinned(conn) is None


def test_unauthenticated_request_does_not_pin(conn, client, token):
    assert client.get("/organization").status_code == 401
    assert client.get("/organization", headers=auth("sv_" + "x" * 40)).status_code == 401
    assert pinned(conn) is None


@pytest.fixture
def two_versions(monkeypatch):
    """Pretend 2027-01-01 was published, renaming organization.name to display_name."""
    monkeypatch.setattr(versions, "PUBLISHED", ("2026-10-01", "2027-01-01"))
    monkeypatch.setattr(versions, "LATEST", "2027-01-01")

    def rename_back(obj):
        obj = dict(obj)
        obj["name"] = obj.pop("display_name")
        return obj

    def latest_shape(original_shape):
        def shape(kind, obj, version):
            if kind == "organization":
                obj = dict(obj)
                obj["display_name"] = obj.pop("name")
            return original_shape(kind, obj, version)
        return shape

    monkeypatch.setattr(versions, "DOWNGRADES", (("2027-01-01", "organization", rename_back),))
    monkeypatch.setattr(versions, "shape", latest_shape(versions.shape))


def test_pin_keeps_the_shape_until_moved(conn, client, token, two_versions):
    with conn.cursor() as cur:
        cur.execute("UPDATE organizations SET api_version = '2026-10-01'")
    old = client.get("/organization", headers=auth(token))
    assert old.headers["Service-Version"] == "2026-10-01"
    assert old.json["name"] == "Acme" and "display_name" not in old.json
    new = client.get("/organization", headers=auth(token, **{"Service-Version": "2027-01-01"}))
    assert new.headers["Service-Version"] == "2027-01-01"
    assert new.json["display_name"] == "Acme" and "name" not in new.json
    assert pinned(conn) == "2026-10-01"
    # An admin moves the pin forward in settings.
    with conn.cursor() as cur:
        cur.execute("UPDATE organizations SET api_version = '2027-01-01'")
    moved = once_seen(lambda: client.get("/organization", headers=auth(token)),
                      lambda response: response.headers["Service-Version"] != "2026-10-01")
    assert moved.headers["Service-Version"] == "2027-01-01"
    assert "display_name" in moved.json


def test_new_organization_pins_the_latest_published(conn, client, token, two_versions):
    response = client.get("/organization", headers=auth(token))
    assert response.headers["Service-Version"] == "2027-01-01"
    assert pinned(conn) == "2027-01-01"
    older = client.get("/organization", headers=auth(token, **{"Service-Version": "2026-10-01"}))
    assert older.headers["Service-Version"] == "2026-10-01"
    assert older.json["name"] == "Acme"


@pytest.mark.parametrize("value", [
    "", "2026-10-1", "2026-1-01", "20261001", "2026/10/01", "2026.10.01", "01-10-2026", "latest", "v1",
    "2026-10-01T00:00:00Z", "2026-10-01,2026-10-01", "\u0662\u0660\u0662\u0666-10-01", "2026-10-01x",
    "x2026-10-01", "2026-10", "2026",
])
def test_malformed_version_header_is_invalid_parameter(conn, client, token, value):
    response = client.get("/shipments", headers=auth(token, **{"Service-Version": value}))
    assert response.status_code == 400
    assert response.json == {"error": {"type": "invalid_request_error", "code": "invalid_parameter",
                                       "message": "Service-Version must be a date in the form YYYY-MM-DD.",
                                       "param": "Service-Version"}}
    assert "Service-Version" not in response.headers
    assert pinned(conn) is None


@pytest.mark.parametrize("value", ["2026-10-02", "2026-09-30", "2025-01-01", "9999-99-99", "0000-00-00"])
def test_unpublished_version_is_invalid_version(conn, client, token, value):
    response = client.get("/organization", headers=auth(token, **{"Service-Version": value}))
    assert response.status_code == 400
    assert response.json == {"error": {"type": "invalid_request_error", "code": "invalid_version",
                                       "message": f"Service-Version {value} is not a published version; "
                                                  "published: 2026-10-01.",
                                       "param": "Service-Version"}}
    assert "Service-Version" not in response.headers
    assert pinned(conn) is None


def test_header_name_is_case_insensitive(conn, client, token):
    response = client.get("/organization", headers=auth(token, **{"service-version": "2026-10-02"}))
    assert response.json["error"]["code"] == "invalid_version"


def test_version_header_checked_before_parameters(conn, client, token):
    response = client.get("/shipments?limit=0", headers=auth(token, **{"Service-Version": "2026-10-02"}))
    assert response.json["error"]["code"] == "invalid_version"


def test_openapi_ignores_the_version_header(client):
    for value in ("2026-10-02", "junk"):
        response = client.get("/openapi.json", headers={"Service-Version": value})
        assert response.status_code == 200
        assert "Service-Version" not in response.headers
        assert response.json["info"]["version"] == VERSION


@pytest.mark.parametrize("path, headers, status, versioned", [
    ("/organization", {}, 200, True),
    ("/shipments", {}, 200, True),
    ("/shipments/shp_{id}", {}, 200, True),
    ("/shipments/shp_{id}.json", {}, 200, True),
    ("/shipments/shp_0", {}, 404, True),
    ("/shipments/ctr_{id}", {}, 404, True),
    ("/shipments?limit=101", {}, 400, True),
    ("/shipments?status[]=draft", {}, 400, True),
    ("/organization", {"Service-Version": VERSION}, 200, True),
    ("/organization", {"Service-Version": "2026-10-02"}, 400, False),
    ("/organization", {"Service-Version": "bad"}, 400, False),
    ("/organization", {"Authorization": None}, 401, False),
    ("/organization", {"Authorization": "Bearer sv_" + "0" * 40}, 401, False),
    ("/nope", {}, 404, False),
    ("/organization.xml", {}, 404, False),
    ("/openapi.json", {}, 200, False),
])
def test_when_the_response_header_is_sent(conn, client, token, path, headers, status, versioned):
    shipment_id = make_shipment(conn, 1)
    request_headers = {key: value for key, value in auth(token, **headers).items() if value is not None}
    response = client.get(path.format(id=shipment_id), headers=request_headers)
    assert response.status_code == status
    assert (response.headers.get("Service-Version") == VERSION) is versioned
    assert ("Service-Version" in response.headers) is versioned


def test_method_not_allowed_carries_no_version(client, token):
    response = client.post("/organization", headers=auth(token))
    assert response.status_code == 405
    assert "Service-Version" not in response.headers
