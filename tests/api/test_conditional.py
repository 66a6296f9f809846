"""Conditional requests: ETag on every 200, If-None-Match answered 304, and a 304 not counted."""
import os
import re

import pytest

from rendering import versions
from tests.support.apps import make_app
from tests.support.factories import auth, insert, make_org, make_shipment, make_token
from tests.support.windows import within_one_window

STRONG = re.compile(r'"[0-9a-f]{32}"')


@pytest.fixture
def org(conn, app):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id)}


def get(client, path, org, **headers):
    """The whole response, with a streamed file closed (as a WSGI server does)."""
    response = client.get(path, headers=auth(org["token"], **headers))
    response.get_data()
    response.close()
    return response


def remaining(response):
    """`r` of the RateLimit header."""
    return int(re.fullmatch(r'"[a-z_]+";r=([0-9]+);t=[0-9]+', response.headers["RateLimit"])[1])


@pytest.mark.parametrize("path", ["/organization", "/shipments", "/shipments/shp_1", "/shipments/shp_1/timeline"])
def test_etag_present_and_stable(client, org, path):
    first, second = get(client, path, org), get(client, path, org)
    assert first.status_code == second.status_code == 200
    assert STRONG.fullmatch(first.headers["ETag"])
    assert first.headers["ETag"] == second.headers["ETag"]


def test_public_documents_have_an_etag(client):
    response = client.get("/openapi.json")
    assert STRONG.fullmatch(response.headers["ETag"])
    again = client.get("/openapi.json", headers={"If-None-Match": response.headers["ETag"]})
    assert (again.status_code, again.data, again.headers["Cache-Control"]) == (304, b"", "public, max-age=3600")


def test_errors_have_no_etag(client, org):
    assert "ETag" not in get(client, "/shipments/shp_999", org).headers
    assert "ETag" not in client.get("/organization").headers


def test_etag_changes_with_the_data(conn, client, org):
    before = get(client, "/shipments/shp_1", org).headers["ETag"]
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET reference = 'changed' WHERE id = 1")
    after = get(client, "/shipments/shp_1", org)
    assert after.headers["ETag"] != before
    # The old ETag no longer matches: the new body is sent.
    assert get(client, "/shipments/shp_1", org, **{"If-None-Match": before}).status_code == 200


def test_etag_changes_with_the_version(monkeypatch, client, org):
    monkeypatch.setattr(versions, "PUBLISHED", ("2026-10-01", "2027-01-01"))
    old = get(client, "/shipments/shp_1", org, **{"Service-Version": "2026-10-01"})
    new = get(client, "/shipments/shp_1", org, **{"Service-Version": "2027-01-01"})
    # Same bytes (no downgrade step), different version: a cache must not take one for the other.
    assert old.data == new.data
    assert old.headers["ETag"] != new.headers["ETag"]
    stale = get(client, "/shipments/shp_1", org,
                **{"Service-Version": "2027-01-01", "If-None-Match": old.headers["ETag"]})
    assert stale.status_code == 200


def test_304_headers_and_empty_body(client, org):
    full = get(client, "/shipments/shp_1", org)
    response = get(client, "/shipments/shp_1", org, **{"If-None-Match": full.headers["ETag"]})
    assert response.status_code == 304
    assert response.data == b""
    assert sorted(response.headers.keys()) == ["ETag", "RateLimit", "RateLimit-Policy", "Service-Version",
                                               "X-Request-Id"]
    assert response.headers["ETag"] == full.headers["ETag"]
    assert response.headers["Service-Version"] == full.headers["Service-Version"]
    assert response.headers["RateLimit-Policy"] == full.headers["RateLimit-Policy"]
    # HEAD is answered alike.
    head = client.head("/shipments/shp_1", headers=auth(org["token"], **{"If-None-Match": full.headers["ETag"]}))
    assert (head.status_code, head.data) == (304, b"")


@pytest.mark.parametrize("header, matches", [
    ("{etag}", True),
    ("W/{etag}", True),
    ('"nope", W/"other", {etag}', True),
    ('"nope",W/{etag}', True),
    ("*", True),
    ('"nope"', False),
    ('W/"nope", "other"', False),
    ("", False),
])
def test_if_none_match(client, org, header, matches):
    etag = get(client, "/organization", org).headers["ETag"]
    response = get(client, "/organization", org, **{"If-None-Match": header.format(etag=etag)})
    assert response.status_code == (304 if matches else 200)


def test_304_is_not_counted(database_url, tmp_path, conn):
    org_id = make_org(conn, "acme")
    token = make_token(conn, org_id)
    limits = {"window_seconds": 300, "per_token": 5, "per_ip": 1000, "anonymous_per_ip": 1000}
    client = make_app(database_url, RATE_LIMITS=limits, STORAGE_DIR=str(tmp_path / "storage")).test_client()
    full = client.get("/organization", headers=auth(token))
    assert remaining(full) == 4
    for _ in range(12):
        response = client.get("/organization", headers=auth(token, **{"If-None-Match": full.headers["ETag"]}))
        assert response.status_code == 304
        # The RateLimit header shows the state without this request.
        assert remaining(response) == 4
    with conn.cursor() as cur:
        # Reserved: one request for the 200, one more the first 304 took and gave back (models/rate_limits.py).
        cur.execute("SELECT hits FROM rate_limit_counters WHERE bucket LIKE 'token:%%'")
        assert cur.fetchone()["hits"] == 2
    # Twelve 304s later the limit is far from reached: four more 200s, then 429.
    for left in (3, 2, 1, 0):
        assert remaining(client.get("/organization", headers=auth(token))) == left
    assert client.get("/organization", headers=auth(token)).status_code == 429


def test_public_304_is_not_counted(database_url, tmp_path):
    limits = {"window_seconds": 300, "per_token": 1000, "per_ip": 1000, "anonymous_per_ip": 2}
    client = make_app(database_url, RATE_LIMITS=limits, STORAGE_DIR=str(tmp_path / "storage")).test_client()
    etag = client.get("/openapi.json").headers["ETag"]
    for _ in range(5):
        response = client.get("/openapi.json", headers={"If-None-Match": etag})
        assert (response.status_code, remaining(response)) == (304, 1)
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/openapi.json").status_code == 429


@pytest.fixture
def document(conn, app, org):
    storage = app.config["STORAGE_DIR"]
    os.makedirs(os.path.join(storage, "docs"))
    with open(os.path.join(storage, "docs", "pl.pdf"), "wb") as f:
        f.write(b"%PDF-1.7 hello")
    return insert(conn, "documents", organization_id=org["id"], shipment_id=org["shipment"], type="packing_list",
                  filename="PL 4711.pdf", content_type="application/pdf", byte_size=14,
                  storage_key="docs/pl.pdf", scan_state="clean")


def test_file_etag_and_304(conn, client, org, document):
    path = f"/documents/doc_{document}/file"
    full = get(client, path, org)
    assert full.status_code == 200 and full.data == b"%PDF-1.7 hello"
    assert STRONG.fullmatch(full.headers["ETag"])
    assert get(client, path, org).headers["ETag"] == full.headers["ETag"]
    response = get(client, path, org, **{"If-None-Match": f'W/{full.headers["ETag"]}'})
    assert response.status_code == 304
    assert response.data == b""
    assert sorted(response.headers.keys()) == ["Cache-Control", "ETag", "RateLimit", "RateLimit-Policy",
                                               "Service-Version", "X-Request-Id"]
    assert response.headers["Cache-Control"] == "private, no-store"
    # A new file for the document (the writer moves updated_at) is a new ETag.
    with conn.cursor() as cur:
        cur.execute("UPDATE documents SET updated_at = now() + interval '1 second' WHERE id = %s", (document,))
    changed = get(client, path, org, **{"If-None-Match": full.headers["ETag"]})
    assert changed.status_code == 200 and changed.headers["ETag"] != full.headers["ETag"]


def test_file_etag_is_not_the_document_etag(client, org, document):
    file_etag = get(client, f"/documents/doc_{document}/file", org).headers["ETag"]
    assert get(client, f"/documents/doc_{document}", org).headers["ETag"] != file_etag


def test_description_declares_etag_and_304(client):
    document = client.get("/openapi.json").json
    assert document["components"]["parameters"]["IfNoneMatch"]["name"] == "If-None-Match"
    for path, item in document["paths"].items():
        operation = item["get"]
        assert {"$ref": "#/components/parameters/IfNoneMatch"} in operation["parameters"], path
        assert operation["responses"]["200"]["headers"]["ETag"] == {"$ref": "#/components/headers/ETag"}, path
        not_modified = operation["responses"]["304"]
        assert "content" not in not_modified, path
        expected = ({"ETag", "RateLimit-Policy", "RateLimit", "X-Request-Id"}
                    | ({"Service-Version"} if operation["security"] else set()))
        assert set(not_modified["headers"]) == expected, path


def limited_client(database_url, tmp_path, **limits):
    """A test client under small limits (RATE_LIMITS replaced whole, as its variable does)."""
    limits = {"window_seconds": 300, "per_token": 1000, "per_ip": 1000, "anonymous_per_ip": 1000, **limits}
    return make_app(database_url, RATE_LIMITS=limits, STORAGE_DIR=str(tmp_path / "storage")).test_client()


def test_if_none_match_star_is_counted_like_any_request(database_url, tmp_path, conn):
    org = {"token": make_token(conn, make_org(conn, "acme"))}
    client = limited_client(database_url, tmp_path, per_token=3)
    within_one_window(30)
    # `*` matches whatever is current, so it is a 304, but it proves no earlier answer was kept.
    for left in (2, 1, 0):
        response = get(client, "/organization", org, **{"If-None-Match": "*"})
        assert (response.status_code, remaining(response)) == (304, left)
    assert get(client, "/organization", org, **{"If-None-Match": "*"}).status_code == 429


def not_modified_limited(response, owner, limit, budget, policy):
    """The 429 past a 304 budget: its message, and RateLimit naming that budget."""
    resets_in = int(response.headers["Retry-After"])
    assert response.json == {"error": {"type": "rate_limit_error", "code": "rate_limited", "param": None, "message": (
        f"Too many 304 Not Modified answers for {owner}: they are not counted against its limit of {limit} "
        f"requests, but are limited to {budget} per 5 minutes ({policy}). The count resets in {resets_in} "
        f"second{'' if resets_in == 1 else 's'} (Retry-After).")}}
    assert response.headers["RateLimit-Policy"] == f'"{policy}";q={budget};w=300'
    assert response.headers["RateLimit"] == f'"{policy}";r=0;t={resets_in}'


def test_304s_have_a_budget_of_their_own(database_url, tmp_path, conn):
    org = {"token": make_token(conn, make_org(conn, "acme"))}
    client = limited_client(database_url, tmp_path, per_token=2, not_modified_per_token=3)
    within_one_window(30)
    etag = get(client, "/organization", org).headers["ETag"]
    for left in (2, 1, 0):
        response = get(client, "/organization", org, **{"If-None-Match": etag})
        assert response.status_code == 304
        # The limit closest to running out: the token's (1 left) until the 304 budget has fewer.
        assert response.headers["RateLimit"].startswith(
            '"per_token";r=1;' if left >= 1 else '"not_modified_per_token";r=0;')
    refused = get(client, "/organization", org, **{"If-None-Match": etag})
    assert refused.status_code == 429 and "Service-Version" not in refused.headers
    not_modified_limited(refused, "this token", 2, 3, "not_modified_per_token")
    # The refused request stays counted against the token's limit, as refused requests do.
    assert get(client, "/organization", org).status_code == 429


def test_the_304_budget_is_ten_times_the_limit_unless_set(database_url, tmp_path, conn):
    org = {"token": make_token(conn, make_org(conn, "acme"))}
    # A 304 is counted before the view and given back after, so each needs one request of the limit left.
    client = limited_client(database_url, tmp_path, per_token=2, anonymous_per_ip=2)
    within_one_window(30)
    etag = get(client, "/organization", org).headers["ETag"]
    assert [get(client, "/organization", org, **{"If-None-Match": etag}).status_code
            for _ in range(20)] == [304] * 20
    not_modified_limited(get(client, "/organization", org, **{"If-None-Match": etag}), "this token", 2, 20,
                         "not_modified_per_token")
    # Without a token: the address's budget, ten times its limit.
    etag = client.get("/openapi.json").headers["ETag"]
    assert [client.get("/openapi.json", headers={"If-None-Match": etag}).status_code
            for _ in range(20)] == [304] * 20
    not_modified_limited(client.get("/openapi.json", headers={"If-None-Match": etag}),
                         "this address without a valid token", 2, 20, "not_modified_anonymous_per_ip")


def test_conditional_headers_do_not_apply_to_post_mcp(app, client, conn):
    token = make_token(conn, make_org(conn, "acme"))
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "get_organization", "arguments": {"full": True}}}
    headers = auth(token, Accept="application/json, text/event-stream", **{"MCP-Protocol-Version": "2025-11-25"})
    for condition in ("*", client.post("/mcp", json=message, headers=headers).headers.get("ETag", '"x"')):
        response = client.post("/mcp", json=message, headers={**headers, "If-None-Match": condition})
        # The tool's answer, never a 304: RFC 9110 turns only GET and HEAD into one.
        assert response.status_code == 200 and "ETag" not in response.headers
        assert response.json["result"]["isError"] is False
    # Each POST counted once, as a request answered 200.
    assert response.headers["RateLimit"].startswith('"per_token";r=597;')
