"""/healthz, /readyz, /metrics and X-Request-Id on the application in process (gunicorn: tests/tools/test_ops_topology.py)."""
import re

import psycopg2
import pytest
from prometheus_client.parser import text_string_to_metric_families

import serving
from api import observe, probes
from models import migrations
from tests.support.apps import make_app
from tests.support.factories import auth, insert, make_org, make_token
from tests.support.processes import free_port

ONE_PER_WINDOW = {"window_seconds": 300, "per_token": 1, "per_ip": 100, "anonymous_per_ip": 1}
MADE_ID = re.compile(r"[0-9a-f]{32}")


def samples(client, name, **environ):
    """{labels as a sorted tuple: value} of the metric family `name` in a scrape of /metrics."""
    response = client.get("/metrics", environ_base=environ)
    assert response.status_code == 200, response.data
    found = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_healthz_needs_no_token_no_database_and_is_never_counted(database_url, tmp_path):
    app = make_app(database_url, RATE_LIMITS=ONE_PER_WINDOW)
    client = app.test_client()
    for _ in range(3):
        response = client.get("/healthz")
        assert (response.status_code, response.json) == (200, {"status": "ok"})
        assert "RateLimit" not in response.headers and response.headers["Cache-Control"] == "no-store"
    # The anonymous budget of one is still whole: the first API request is answered, the second refused.
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/openapi.json").status_code == 429
    down = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2")
    assert down.test_client().get("/healthz").status_code == 200


def test_readyz_is_200_with_the_schema_version_and_never_counted(database_url):
    client = make_app(database_url, RATE_LIMITS=ONE_PER_WINDOW).test_client()
    for _ in range(3):
        response = client.get("/readyz")
        assert (response.status_code, response.json) == (200, {"status": "ready",
                                                                "schema_version": len(migrations.available())})
        assert "RateLimit" not in response.headers
    assert client.get("/openapi.json").status_code == 200


def test_readyz_is_a_json_503_when_the_database_cannot_be_reached():
    client = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2").test_client()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5" and response.headers["Content-Type"] == "application/json"
    assert response.json == {"error": {
        "type": "api_error", "code": "service_unavailable", "param": None,
        "message": "Not ready: the service cannot reach its database. Retry after the number of seconds in "
                   "Retry-After (5)."}}


def test_readyz_is_503_when_the_schema_is_not_the_codes(database_url, conn):
    known = len(migrations.available())
    with conn.cursor() as cur:
        cur.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'from_the_future')", (known + 1,))
    try:
        response = make_app(database_url).test_client().get("/readyz")
    finally:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM schema_migrations WHERE version = %s", (known + 1,))
    assert response.status_code == 503
    assert response.json["error"]["message"] == (
        f"Not ready: the database is at schema version {known + 1}, newer than this code knows ({known}). "
        f"Retry after the number of seconds in Retry-After (5).")


def test_readyz_asks_the_database_at_most_once_a_second(database_url, monkeypatch):
    asked = []
    real = probes.monitoring.schema_state
    monkeypatch.setattr(probes.monitoring, "schema_state", lambda *args: asked.append(1) or real(*args))
    clock = [1000.0]
    monkeypatch.setattr(probes.time, "monotonic", lambda: clock[0])
    client = make_app(database_url).test_client()
    for _ in range(5):
        assert client.get("/readyz").status_code == 200
    assert len(asked) == 1
    clock[0] += probes.READY_CACHE_SECONDS
    assert client.get("/readyz").status_code == 200
    assert len(asked) == 2


def test_probes_answer_get_and_head_only(client):
    assert client.head("/healthz").status_code == 200 and client.head("/healthz").data == b""
    response = client.post("/readyz")
    assert (response.status_code, response.headers["Allow"]) == (405, "GET, HEAD")
    assert response.json["error"]["code"] == "method_not_allowed"


def test_probes_are_not_in_the_description(client):
    paths = client.get("/openapi.json").json["paths"]
    assert not {"/healthz", "/readyz", "/metrics"} & set(paths)


def test_metrics_count_requests_by_url_rule_never_by_raw_path(client, conn):
    token = make_token(conn, make_org(conn))
    before = samples(client, "shiptrack_http_requests_total")
    assert client.get("/shipments/shp_1", headers=auth(token)).status_code == 404
    assert client.get("/shipments/shp_2.json", headers=auth(token)).status_code == 404
    assert client.get("/organization", headers=auth(token)).status_code == 200
    assert client.get("/no/such/path/123").status_code == 404
    assert client.open("/organization", method="BREW", headers=auth(token)).status_code == 405
    after = samples(client, "shiptrack_http_requests_total")

    def grew(route, method, status):
        key = (("method", method), ("route", route), ("status", status))
        return after.get(key, 0) - before.get(key, 0)

    assert grew("/shipments/<shipment_id>", "GET", "404") == 2
    assert grew("/organization", "GET", "200") == 1
    assert grew("unmatched", "GET", "404") == 1
    assert grew("unmatched", "other", "405") == 1
    assert not [labels for labels in after if "shp_" in str(labels) or "/no/such" in str(labels)]
    durations = samples(client, "shiptrack_http_request_duration_seconds_count")
    assert durations[(("route", "/organization"),)] >= 1


def test_metrics_count_429s_by_the_limit_passed(database_url, conn):
    client = make_app(database_url, RATE_LIMITS=ONE_PER_WINDOW).test_client()
    token = make_token(conn, make_org(conn))
    before = samples(client, "shiptrack_rate_limit_refusals_total")
    assert client.get("/organization", headers=auth(token)).status_code == 200
    assert client.get("/organization", headers=auth(token)).status_code == 429
    assert client.get("/organization").status_code == 401
    assert client.get("/organization").status_code == 429
    after = samples(client, "shiptrack_rate_limit_refusals_total")
    for limit in ("per_token", "anonymous_per_ip"):
        key = (("limit", limit),)
        assert after[key] - before.get(key, 0) == 1


def test_metrics_count_database_errors_and_503s():
    client = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2").test_client()
    before = samples(client, "shiptrack_database_errors_total")
    requests_before = samples(client, "shiptrack_http_requests_total")
    assert client.get("/organization").status_code == 503
    after = samples(client, "shiptrack_database_errors_total")
    key = (("kind", "unavailable"),)
    assert after[key] - before.get(key, 0) == 1
    served = (("method", "GET"), ("route", "/organization"), ("status", "503"))
    assert samples(client, "shiptrack_http_requests_total")[served] - requests_before.get(served, 0) == 1
    assert samples(client, "shiptrack_database_up") == {(): 0.0}


def test_metrics_read_the_delivery_backlog_render_failures_and_the_feeds_lag(client, conn, database_url):
    organization = make_org(conn)
    endpoint = insert(conn, "webhook_endpoints", organization_id=organization, url="https://receiver.test/",
                      event_types=["alert.created"], secret="whsec_" + "c2VjcmV0" * 4)
    for _ in range(2):
        event = insert(conn, "events", organization_id=organization, type="webhook.test", endpoint_id=endpoint,
                       state="render_failed", render_error="ValueError: no")
    insert(conn, "webhook_deliveries", event_id=event, endpoint_id=endpoint,
           next_attempt_at=psycopg2.extensions.AsIs("now() - interval '90 seconds'"))
    assert samples(client, "shiptrack_webhook_deliveries_due") == {(): 1.0}
    assert samples(client, "shiptrack_webhook_oldest_due_seconds")[()] >= 90
    assert samples(client, "shiptrack_webhook_render_failures") == {(): 2.0}
    assert samples(client, "shiptrack_change_feed_lag_seconds") == {(): 0.0}
    assert samples(client, "shiptrack_database_up") == {(): 1.0}
    writer = psycopg2.connect(database_url)
    try:
        with writer.cursor() as cur:
            cur.execute("SELECT now() - interval '1 second'")
            cur.execute("SELECT pg_current_xact_id()")  # an id, as a first write gets one
            assert samples(client, "shiptrack_change_feed_lag_seconds")[()] > 0
    finally:
        writer.rollback()
        writer.close()
    assert samples(client, "shiptrack_change_feed_lag_seconds") == {(): 0.0}


@pytest.mark.parametrize("address, trusted, forwarded, status", [
    ("127.0.0.1", 0, None, 200), ("::1", 0, None, 200), ("10.0.0.7", 0, None, 404),
    ("127.0.0.1", 1, "203.0.113.9", 404), ("127.0.0.1", 1, "127.0.0.1", 200),
])
def test_metrics_only_from_allowed_networks(database_url, address, trusted, forwarded, status):
    client = make_app(database_url, TRUSTED_PROXIES=trusted).test_client()
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    response = client.get("/metrics", environ_base={"REMOTE_ADDR": address}, headers=headers)
    assert response.status_code == status
    if status == 404:
        assert response.json["error"] == {"type": "not_found_error", "code": "resource_missing", "param": None,
                                          "message": "Unrecognized request URL. See the API reference for the "
                                                     "available paths."}


def test_metrics_can_be_turned_off(database_url):
    assert make_app(database_url, METRICS_ENABLED=False).test_client().get("/metrics").status_code == 404


@pytest.mark.parametrize("given, kept", [
    ("abc-123", True), ("A.b_c-9", True), ("x" * 200, True), ("x" * 201, False), ("", False),
    ("a b", False), ("a\u00e9", False), ("a;b", False), ("a/b", False),
])
def test_a_request_id_is_kept_when_safe_else_made(client, given, kept):
    returned = client.get("/healthz", headers={"X-Request-Id": given}).headers["X-Request-Id"]
    assert returned == given if kept else MADE_ID.fullmatch(returned)


def test_every_response_carries_a_request_id(database_url, conn):
    client = make_app(database_url, RATE_LIMITS={**ONE_PER_WINDOW, "per_token": 3}).test_client()
    token = make_token(conn, make_org(conn))
    first = client.get("/organization", headers=auth(token, **{"X-Request-Id": "r-200"}))
    answers = [first,
               client.get("/organization", headers=auth(token, **{"If-None-Match": first.headers["ETag"],
                                                                 "X-Request-Id": "r-304"})),
               client.get("/shipments/shp_9", headers=auth(token, **{"X-Request-Id": "r-404"})),
               client.get("/organization", headers={"X-Request-Id": "r-401"}),
               client.get("/organization", headers={"X-Request-Id": "r-429"}),
               client.post("/mcp", headers=auth(token, **{"X-Request-Id": "r-mcp", "Accept": "application/json"}),
                           json={"jsonrpc": "2.0", "id": 1, "method": "ping"})]
    assert [(answer.status_code, answer.headers["X-Request-Id"]) for answer in answers] == [
        (200, "r-200"), (304, "r-304"), (404, "r-404"), (401, "r-401"), (429, "r-429"),
        (answers[-1].status_code, "r-mcp")]
    down = make_app(f"postgresql://127.0.0.1:{free_port()}/none?connect_timeout=2").test_client()
    answer = down.get("/organization", headers={"X-Request-Id": "r-503"})
    assert (answer.status_code, answer.headers["X-Request-Id"]) == (503, "r-503")
    assert MADE_ID.fullmatch(down.get("/organization").headers["X-Request-Id"])


def test_an_mcp_tool_calls_gets_carry_the_posts_request_id(client, conn, monkeypatch):
    token = make_token(conn, make_org(conn))
    seen = []
    real = observe.request_id
    monkeypatch.setattr(observe, "request_id", lambda given: seen.append(real(given)) or seen[-1])
    message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "get_organization", "arguments": {}}}
    response = client.post("/mcp", json=message, headers=auth(
        token, Accept="application/json, text/event-stream",
        **{"MCP-Protocol-Version": "2025-11-25", "X-Request-Id": "r-tool"}))
    assert response.status_code == 200 and response.json["result"]["isError"] is False
    assert response.headers["X-Request-Id"] == "r-tool"
    assert seen == ["r-tool", "r-tool"]  # the POST, then the GET /organization it made


def test_what_gunicorn_refuses_itself_carries_a_request_id_too():
    from gunicorn.http import errors as http_errors

    error = serving.client_error(http_errors.InvalidRequestLine("x"), None)
    head = serving.error_bytes(error).partition(b"\r\n\r\n")[0].decode().split("\r\n")
    [value] = [line.removeprefix("X-Request-Id: ") for line in head if line.startswith("X-Request-Id: ")]
    assert MADE_ID.fullmatch(value)
