"""One delivery pass end to end: real PostgreSQL, a real HTTPS receiver, signatures checked by standardwebhooks."""
import json

import pytest
import standardwebhooks

from models import webhooks
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.values import EARLIEST, LATEST, without_value_rules
from tests.support.webhooks import add_endpoint, event_bodies, run_pass


def test_status_change_delivered_signed_with_api_body(conn, client, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org, status="draft")
    endpoint = add_endpoint(conn, org, receiver.url("/ok"))
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
    run_pass(settings)

    (request,) = receiver.requests
    headers = request["headers"]
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"] == "Service-Webhooks/1.0"
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-signature"].startswith("v1,")
    assert headers["Host"] == f"receiver.test:{receiver.server_address[1]}"
    verified = standardwebhooks.Webhook(endpoint["secret"]).verify(request["body"], headers)
    assert verified["id"] == "msg_1"
    body = json.loads(request["body"])
    assert list(body) == ["id", "type", "created_at", "api_version", "data"]
    assert body["type"] == "shipment.status_changed"
    assert body["api_version"] == "2026-10-01"
    assert body["data"]["previous_attributes"] == {"status": "draft"}
    token = make_token(conn, org)
    api = client.get(f"/shipments/shp_{sid}", headers=auth(token))
    assert body["data"]["object"] == api.json
    assert body["data"]["object"]["status"] == "validated"

    with conn.cursor() as cur:
        cur.execute("SELECT status, attempts, next_attempt, last_error FROM webhook_delivery_status")
        assert cur.fetchall() == [{"status": "succeeded", "attempts": 1, "next_attempt": None, "last_error": None}]
        cur.execute("SELECT attempt, status, status_code, address, error FROM webhook_attempt_log")
        assert cur.fetchall() == [{"attempt": 1, "status": "succeeded", "status_code": 200,
                                   "address": "127.0.0.1", "error": None}]


def test_same_event_id_and_bytes_for_every_endpoint(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"))
    add_endpoint(conn, org, receiver.url("/ok?second=1"))
    add_endpoint(conn, org, receiver.url("/ok?eta-only=1"), ["shipment.eta_changed"])
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    run_pass(settings)
    assert len(receiver.requests) == 2
    first, second = receiver.requests
    assert first["body"] == second["body"]
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"]
    with conn.cursor() as cur:
        cur.execute("SELECT body FROM events")
        assert cur.fetchone()["body"].encode() == first["body"]


def test_pinned_version_and_unpinned_organization(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"))
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    run_pass(settings)
    assert event_bodies(receiver)[0]["api_version"] == "2026-10-01"
    with conn.cursor() as cur:
        cur.execute("SELECT api_version FROM organizations WHERE id = %s", (org,))
        assert cur.fetchone()["api_version"] is None  # a webhook is not a request: no pin is made


def test_events_of_other_types_and_disabled_endpoints_are_not_sent(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    alerts_only = add_endpoint(conn, org, receiver.url("/ok"), ["alert.created"])
    disabled = add_endpoint(conn, org, receiver.url("/ok"))
    webhooks.disable_endpoint(conn, disabled["id"], alerts_only["created_at"], "by an admin")
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    run_pass(settings)
    assert receiver.requests == []


def test_shipment_hidden_before_rendering_is_skipped(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"))
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
        cur.execute("UPDATE shipments SET owned_elsewhere = true WHERE id = %s", (sid,))
    run_pass(settings)
    assert receiver.requests == []
    with conn.cursor() as cur:
        cur.execute("SELECT state FROM events")
        assert cur.fetchone()["state"] == "skipped"


def test_alert_created_as_get_alerts_lists_it(conn, client, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"), ["alert.created"])
    with conn.cursor() as cur:
        cur.execute("INSERT INTO alert_kinds (key, \"group\", customer_visible) "
                    "VALUES ('eta_drift', 'schedule', true), ('ops_note', 'internal', false)")
        cur.execute("INSERT INTO alerts (organization_id, shipment_id, key, title, summary) VALUES "
                    "(%(o)s, %(s)s, 'eta_drift', 'ETA drift', 'Moved 2 days'), (%(o)s, %(s)s, 'ops_note', 'x', '')",
                    {"o": org, "s": sid})
    run_pass(settings)
    (body,) = event_bodies(receiver)
    assert body["type"] == "alert.created" and body["data"]["previous_attributes"] is None
    listed = client.get("/alerts", headers=auth(make_token(conn, org))).json["data"]
    assert body["data"]["object"] == listed[0]
    assert body["data"]["object"]["object"] == "monitoring_alert"


def test_checks_completed_carries_the_run(conn, client, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    add_endpoint(conn, org, receiver.url("/ok"), ["shipment.checks_completed"])
    with conn.cursor() as cur:
        cur.execute("INSERT INTO check_runs (organization_id, shipment_id) VALUES (%s, %s) RETURNING id", (org, sid))
        run = cur.fetchone()["id"]
        cur.execute("INSERT INTO checks (organization_id, shipment_id, check_run_id, key, category, status, title) "
                    "VALUES (%(o)s, %(s)s, %(r)s, 'has_commercial_invoice', 'documents', 'passed', 't'), "
                    "(%(o)s, %(s)s, %(r)s, 'net_weight_matches', 'cargo', 'failed', 't')",
                    {"o": org, "s": sid, "r": run})
        cur.execute("UPDATE check_runs SET finished_at = now() WHERE id = %s", (run,))
    run_pass(settings)
    (body,) = event_bodies(receiver)
    assert body["type"] == "shipment.checks_completed"
    assert list(body["data"]) == ["object", "previous_attributes", "checks"]
    assert body["data"]["checks"] == {
        "summary": {"total": 2, "passed": 1, "failed": 1, "warnings": 0, "skipped": 0, "pending": 0},
        "results": [{"check_type": "documents", "key": "has_commercial_invoice", "status": "passed"},
                    {"check_type": "cargo", "key": "net_weight_matches", "status": "failed"}]}
    api = client.get(f"/shipments/shp_{sid}", headers=auth(make_token(conn, org))).json
    assert body["data"]["object"] == api and api["checks"]["failed"] == 1


def test_eta_changed_previous_attributes(conn, receiver, settings):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org, eta="2026-11-01T10:00:00Z")
    add_endpoint(conn, org, receiver.url("/ok"), ["shipment.eta_changed"])
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET eta = '2026-11-04T06:00:00Z', status = 'in_transit' WHERE id = %s", (sid,))
    run_pass(settings)
    (body,) = event_bodies(receiver)
    assert body["type"] == "shipment.eta_changed"
    assert body["data"]["previous_attributes"] == {"eta": "2026-11-01T10:00:00Z"}
    assert body["data"]["object"]["eta"] == "2026-11-04T06:00:00Z"


@pytest.mark.parametrize("forwarder_eta, shown", [("9999-12-31 23:00-05", LATEST), ("0044-03-15 BC", EARLIEST),
                                                  ("infinity", LATEST)])
def test_a_shipment_stored_before_the_value_rules_is_delivered_as_json(conn, receiver, settings, forwarder_eta,
                                                                       shown):
    org = make_org(conn, "acme")
    endpoint = add_endpoint(conn, org, receiver.url("/ok"))
    with without_value_rules(conn):
        sid = make_shipment(conn, org, forwarder_eta=forwarder_eta, temperature_celsius="NaN")
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
        run_pass(settings)
    (request,) = receiver.requests
    standardwebhooks.Webhook(endpoint["secret"]).verify(request["body"], request["headers"])
    body = json.loads(request["body"], parse_constant=_refuse)
    assert (body["data"]["object"]["forwarder_eta"], body["data"]["object"]["temperature_celsius"]) == (shown, None)


def _refuse(constant):
    raise ValueError(f"{constant} is not JSON")
