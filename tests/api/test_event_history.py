"""GET /events and GET /events/{webhook_event_id}: rendered webhook events of the last 30 days, served verbatim."""
from datetime import datetime, timedelta, timezone

import jsonschema
import pytest

from delivery.outbox import render_pending
from models import events as events_model
from models import webhook_deliveries
from tests.support.factories import auth, insert, make_org, make_shipment, make_token
from tests.support.webhooks import add_endpoint

STATUS, ETA, CHECKS, ALERT = ("shipment.status_changed", "shipment.eta_changed", "shipment.checks_completed",
                              "alert.created")
EMPTY = b'{"object":"list","data":[],"has_more":false}\n'


@pytest.fixture
def org(conn):
    """An organization with a token and a visible shipment."""
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id, status="draft")}


def execute(conn, statement, *params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else None


def render(conn):
    """Render every waiting event with the delivery code, in one committed transaction."""
    conn.autocommit = False
    try:
        while render_pending(conn, datetime.now(timezone.utc)):
            pass
        conn.commit()
    finally:
        conn.autocommit = True


def alert_kind(conn, key):
    execute(conn, 'INSERT INTO alert_kinds (key, "group", customer_visible) VALUES (%s, %s, true)', key, "schedule")


def change_status(conn, shipment_id, status):
    """One shipment.status_changed event (pending until rendered); returns its id."""
    execute(conn, "UPDATE shipments SET status = %s WHERE id = %s", status, shipment_id)
    return last_event(conn)


def last_event(conn):
    return execute(conn, "SELECT max(id) AS id FROM events")[0]["id"]


def body(conn, event_id):
    return execute(conn, "SELECT body FROM events WHERE id = %s", event_id)[0]["body"].encode()


def listing(bodies, has_more=False):
    """The exact bytes of a list of stored bodies."""
    return (b'{"object":"list","data":[' + b",".join(bodies) + b'],"has_more":'
            + (b"true" if has_more else b"false") + b"}\n")


def ids(response):
    assert response.status_code == 200, response.data
    return [int(item["id"].removeprefix("msg_")) for item in response.json["data"]]


def test_lists_rendered_events_newest_first_as_stored_bytes(conn, client, org):
    sid = org["shipment"]
    alert_kind(conn, "eta_drift")
    status = change_status(conn, sid, "validated")
    execute(conn, "UPDATE shipments SET eta = '2026-12-01T00:00:00Z' WHERE id = %s", sid)
    eta = last_event(conn)
    execute(conn, "INSERT INTO check_runs (organization_id, shipment_id, finished_at) VALUES (%s, %s, now())",
            org["id"], sid)
    checks = last_event(conn)
    insert(conn, "alerts", organization_id=org["id"], shipment_id=sid, key="eta_drift", severity="warning",
           title="ETA moved", summary="Moved.", since="2026-01-02T03:04:05Z", first_detected_at="2026-01-02T03:04:06Z",
           last_detected_at="2026-01-03T00:00:00Z")
    alert = last_event(conn)
    render(conn)

    response = client.get("/events", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.data == listing([body(conn, n) for n in (alert, checks, eta, status)])
    assert [item["type"] for item in response.json["data"]] == [ALERT, CHECKS, ETA, STATUS]
    assert response.json["data"][3]["data"]["previous_attributes"] == {"status": "draft"}


def test_envelope_is_written_like_every_other_list(client, org):
    events = client.get("/events", headers=auth(org["token"]))
    alerts = client.get("/alerts", headers=auth(org["token"]))
    assert events.data == alerts.data == EMPTY
    assert events.headers["Content-Type"] == alerts.headers["Content-Type"]


def test_bytes_are_served_as_stored_whatever_the_version_asked(conn, client, org):
    event = change_status(conn, org["shipment"], "validated")
    render(conn)
    # Spacing and key order no serialiser of ours writes: proof that nothing is parsed and dumped again.
    stored = '{"type": "shipment.status_changed",  "id": "msg_%d", "api_version": "2026-10-01"}' % event
    execute(conn, "UPDATE events SET body = %s WHERE id = %s", stored, event)
    headers = auth(org["token"], **{"Service-Version": "2026-10-01"})
    assert client.get("/events", headers=headers).data == listing([stored.encode()])
    single = client.get(f"/events/msg_{event}", headers=headers)
    assert single.status_code == 200
    assert single.data == stored.encode() + b"\n"
    assert single.headers["Content-Type"] == "application/json"


def test_what_is_never_listed(conn, client, org):
    sid = org["shipment"]
    listed = change_status(conn, sid, "validated")
    # hidden after rendering: rendered, but its shipment is not shown any more
    hidden_shipment = make_shipment(conn, org["id"], status="draft")
    hidden = change_status(conn, hidden_shipment, "validated")
    elsewhere_shipment = make_shipment(conn, org["id"], status="draft")
    elsewhere = change_status(conn, elsewhere_shipment, "validated")
    # skipped: its alert kind became internal before rendering (the shipment stays visible)
    alert_kind(conn, "probe")
    insert(conn, "alerts", organization_id=org["id"], shipment_id=sid, key="probe", severity="warning",
           title="t", summary="s", since="2026-01-02T03:04:05Z", first_detected_at="2026-01-02T03:04:06Z",
           last_detected_at="2026-01-03T00:00:00Z")
    skipped = last_event(conn)
    execute(conn, "UPDATE alert_kinds SET customer_visible = false WHERE key = 'probe'")
    # webhook.test: rendered, sent to one endpoint only
    endpoint = add_endpoint(conn, org["id"], "https://hooks.example/in")
    test_event = events_model.create_test_event(conn, org["id"], endpoint["id"])["id"]
    # another organization's
    other = make_org(conn, "other")
    foreign = change_status(conn, make_shipment(conn, other, status="draft"), "validated")
    # older than 30 days, and one just inside
    old = change_status(conn, sid, "in_transit")
    recent = change_status(conn, sid, "arrived")
    render(conn)
    execute(conn, "UPDATE shipments SET awaiting_approval = true WHERE id = %s", hidden_shipment)
    execute(conn, "UPDATE shipments SET owned_elsewhere = true WHERE id = %s", elsewhere_shipment)
    execute(conn, "UPDATE events SET created_at = now() - interval '30 days 1 minute' WHERE id = %s", old)
    execute(conn, "UPDATE events SET created_at = now() - interval '29 days 23 hours' WHERE id = %s", recent)
    pending = change_status(conn, sid, "in_warehouse")
    states = {row["id"]: row["state"] for row in execute(conn, "SELECT id, state FROM events")}
    assert (states[skipped], states[test_event], states[pending], states[hidden]) == (
        "skipped", "rendered", "pending", "rendered")

    assert ids(client.get("/events", headers=auth(org["token"]))) == [recent, listed]
    for absent in (hidden, elsewhere, skipped, test_event, foreign, old, pending, 10 ** 17):
        response = client.get(f"/events/msg_{absent}", headers=auth(org["token"]))
        assert response.status_code == 404, absent
        assert response.headers["Service-Version"] == "2026-10-01"
        assert response.json == {"error": {"type": "not_found_error", "code": "resource_missing",
                                           "message": f"No such event: 'msg_{absent}'.", "param": None}}
    assert client.get(f"/events/msg_{recent}", headers=auth(org["token"])).data == body(conn, recent) + b"\n"


@pytest.mark.parametrize("path_id", ["msg_0", "msg_01", "evt_1", "shp_1", "1", "msg_x", "msg_1234567890123456789"])
def test_malformed_ids_are_404(conn, client, org, path_id):
    change_status(conn, org["shipment"], "validated")
    render(conn)
    response = client.get(f"/events/{path_id}", headers=auth(org["token"]))
    assert response.status_code == 404
    assert response.json == {"error": {"type": "not_found_error", "code": "resource_missing",
                                       "message": f"No such event: {path_id!r}.", "param": None}}


def test_needs_a_token(client):
    for path in ("/events", "/events/msg_1"):
        response = client.get(path)
        assert response.status_code == 401
        assert response.json["error"]["code"] == "missing_token"
        assert "Service-Version" not in response.headers


def test_keyset_paging_while_events_arrive(conn, client, org):
    sid = org["shipment"]
    made = [change_status(conn, sid, status) for status in ("validated", "in_transit", "arrived", "in_warehouse",
                                                             "arrived")]
    render(conn)
    seen, cursor = [], None
    for expected_more, status in ((True, "in_transit"), (True, "arrived"), (False, "in_transit")):
        query = "/events?limit=2" + (f"&starting_after=msg_{cursor}" if cursor else "")
        page = client.get(query, headers=auth(org["token"]))
        assert page.json["has_more"] is expected_more
        seen += ids(page)
        cursor = seen[-1]
        # A new event lands before the cursor: no gap, no repeat.
        change_status(conn, sid, status)
        render(conn)
    assert seen == list(reversed(made))
    assert ids(client.get("/events?limit=100", headers=auth(org["token"])))[:3] == [made[-1] + 3, made[-1] + 2,
                                                                                     made[-1] + 1]


def test_filters(conn, client, org):
    one, two = org["shipment"], make_shipment(conn, org["id"], status="draft")
    s1 = change_status(conn, one, "validated")
    e1 = (execute(conn, "UPDATE shipments SET eta = '2026-12-01T00:00:00Z' WHERE id = %s", one), last_event(conn))[1]
    s2 = change_status(conn, two, "validated")
    e2 = (execute(conn, "UPDATE shipments SET eta = '2026-12-01T00:00:00Z' WHERE id = %s", two), last_event(conn))[1]
    render(conn)
    # created_at: one event per second, on a half second (responses show the whole second)
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=1)
    for offset, event in enumerate((s1, e1, s2, e2)):
        execute(conn, "UPDATE events SET created_at = %s WHERE id = %s",
                base + timedelta(seconds=offset, milliseconds=500), event)

    def listed(query):
        return ids(client.get(f"/events?{query}", headers=auth(org["token"])))

    stamp = [(base + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ") for n in range(4)]
    assert listed("type=shipment.status_changed") == [s2, s1]
    assert listed("type=shipment.eta_changed,shipment.status_changed") == [e2, s2, e1, s1]
    assert listed("type=alert.created,shipment.checks_completed") == []
    assert listed("type=") == [e2, s2, e1, s1]
    assert listed(f"shipment=shp_{two}") == [e2, s2]
    assert listed(f"shipment=shp_{two}&type=shipment.eta_changed") == [e2]
    assert listed("shipment=shp_999999") == []
    # Bounds are inclusive at the second a response shows: 12:00:01.5 is shown as 12:00:01.
    assert listed(f"created_after={stamp[1]}") == [e2, s2, e1]
    assert listed(f"created_after={stamp[1][:-1]}.5Z") == [e2, s2]
    assert listed(f"created_before={stamp[2]}") == [s2, e1, s1]
    assert listed(f"created_after={stamp[1]}&created_before={stamp[2]}") == [s2, e1]
    assert listed(f"created_after={stamp[1]}&created_before={stamp[2]}&type=shipment.status_changed"
                  f"&shipment=shp_{two}") == [s2]
    assert listed(f"created_after={stamp[3]}&created_before={stamp[0]}") == []
    assert listed(f"created_after={base.date().isoformat()}&limit=3") == [e2, s2, e1]


def test_delivery_success(conn, client, org):
    sid = org["shipment"]
    everything = add_endpoint(conn, org["id"], "https://a.example/in")
    eta_only = add_endpoint(conn, org["id"], "https://b.example/in", types=[ETA])
    disabled = add_endpoint(conn, org["id"], "https://c.example/in")
    execute(conn, "UPDATE webhook_endpoints SET enabled = false WHERE id = %s", disabled["id"])
    statuses = ("validated", "in_transit", "arrived", "in_warehouse", "arrived")
    succeeded, failed, dropped, pending, never = [change_status(conn, sid, status) for status in statuses]
    execute(conn, "UPDATE shipments SET eta = '2026-12-01T00:00:00Z' WHERE id = %s", sid)
    eta_missed = last_event(conn)
    execute(conn, "UPDATE shipments SET eta = '2026-12-02T00:00:00Z' WHERE id = %s", sid)
    eta_received = last_event(conn)
    render(conn)
    # An endpoint created after every event is owed none of them.
    add_endpoint(conn, org["id"], "https://d.example/in")

    def finish(event, endpoint, state):
        execute(conn, "UPDATE webhook_deliveries SET state = %s, next_attempt_at = NULL, finished_at = now() "
                      "WHERE event_id = %s AND endpoint_id = %s", state, event, endpoint["id"])

    for event in (succeeded, eta_missed, eta_received):
        finish(event, everything, "succeeded")
    finish(failed, everything, "failed")
    finish(dropped, everything, "dropped")
    execute(conn, "DELETE FROM webhook_deliveries WHERE event_id = %s", never)
    finish(eta_missed, eta_only, "failed")
    finish(eta_received, eta_only, "succeeded")

    def listed(value):
        return ids(client.get(f"/events?delivery_success={value}", headers=auth(org["token"])))

    assert listed("false") == [eta_missed, never, pending, dropped, failed]
    assert listed("true") == [eta_received, succeeded]
    assert listed("false&type=shipment.eta_changed") == [eta_missed]
    # The same rule as `webhooks recover`: it queues the missed ones, leaving the pending delivery alone.
    assert webhook_deliveries.queue_missed(conn, everything["id"], datetime.now(timezone.utc) - timedelta(days=1),
                                           datetime.now(timezone.utc)) == 3
    assert {row["event_id"] for row in execute(
        conn, "SELECT event_id FROM webhook_deliveries WHERE endpoint_id = %s AND reason = 'resend'",
        everything["id"])} == {failed, dropped, never}


def test_not_modified(conn, client, org):
    change_status(conn, org["shipment"], "validated")
    render(conn)
    first = client.get("/events", headers=auth(org["token"]))
    again = client.get("/events", headers=auth(org["token"], **{"If-None-Match": first.headers["ETag"]}))
    assert again.status_code == 304
    assert again.data == b""
    assert again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Service-Version"] == "2026-10-01"
    assert "RateLimit" in again.headers
    # A new event changes the list, so the old ETag no longer matches.
    change_status(conn, org["shipment"], "in_transit")
    render(conn)
    changed = client.get("/events", headers=auth(org["token"], **{"If-None-Match": first.headers["ETag"]}))
    assert changed.status_code == 200 and changed.headers["ETag"] != first.headers["ETag"]


@pytest.mark.parametrize("query, param, message", [
    ("type=foo", "type", "type has an unknown value 'foo'; allowed: shipment.status_changed, shipment.eta_changed, "
                         "shipment.checks_completed, alert.created."),
    ("type=webhook.test", "type", None),
    ("type=shipment.status_changed,", "type", None),
    ("type=Shipment.status_changed", "type", None),
    ("type[]=alert.created", "type", "type takes a single value; array and hash forms such as type[] are not "
                                     "accepted."),
    ("shipment=ctr_1", "shipment", "shipment must be an id of the form shp_<positive integer>."),
    ("shipment=shp_0", "shipment", None),
    ("created_after=yesterday", "created_after", "created_after must be an ISO 8601 date-time or a date "
                                                 "(YYYY-MM-DD)."),
    ("created_after=2026-02-30", "created_after", None),
    ("created_before=2026-13-01T00:00:00Z", "created_before", None),
    ("delivery_success=yes", "delivery_success", "delivery_success must be one of: true, false."),
    ("delivery_success=TRUE", "delivery_success", None),
    ("delivery_success=1", "delivery_success", None),
    ("limit=0", "limit", "limit must be an integer from 1 to 100, written in decimal digits."),
    ("limit=101", "limit", None),
    ("limit=", "limit", None),
    ("starting_after=shp_1", "starting_after", "starting_after must be an id of the form msg_<positive integer>."),
    ("starting_after=msg_0", "starting_after", None),
    ("starting_after=evt_1", "starting_after", None),
])
def test_invalid_parameters(client, org, query, param, message):
    response = client.get(f"/events?{query}", headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.headers["Service-Version"] == "2026-10-01"
    error = response.json["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_parameter", param)
    if message is not None:
        assert error["message"] == message


def test_described_in_openapi(client):
    document = client.get("/openapi.json").json
    listed = document["paths"]["/events"]["get"]
    single = document["paths"]["/events/{webhook_event_id}"]["get"]
    assert listed["tags"] == single["tags"] == ["Events"]
    assert listed["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/EventList"}
    assert single["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Event"}
    assert [p["name"] for p in listed["parameters"] if p.get("in") == "query"] == [
        "type", "shipment", "created_after", "created_before", "delivery_success", "limit", "starting_after", "wait"]
    schemas = document["components"]["schemas"]
    names = ["ShipmentStatusChangedEvent", "ShipmentEtaChangedEvent", "ShipmentChecksCompletedEvent",
             "AlertCreatedEvent"]
    assert schemas["Event"]["oneOf"] == [{"$ref": f"#/components/schemas/{name}"} for name in names]
    # The webhooks and the list describe a body with one schema.
    for event_type, name in zip((STATUS, ETA, CHECKS, ALERT), names):
        request = document["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"]
        assert request["schema"] == {"$ref": f"#/components/schemas/{name}"}
        assert schemas[name]["properties"]["type"]["default"] == event_type
        assert schemas["Event"]["discriminator"]["mapping"][event_type] == f"#/components/schemas/{name}"


def test_every_type_matches_exactly_one_schema_of_event(conn, client, org):
    """`Event` is oneOf without const (value lists stay open): each body's shape picks one schema."""
    sid = org["shipment"]
    alert_kind(conn, "eta_drift")
    change_status(conn, sid, "validated")
    execute(conn, "UPDATE shipments SET eta = '2026-12-01T00:00:00Z' WHERE id = %s", sid)
    execute(conn, "INSERT INTO check_runs (organization_id, shipment_id, finished_at) VALUES (%s, %s, now())",
            org["id"], sid)
    insert(conn, "alerts", organization_id=org["id"], shipment_id=sid, key="eta_drift", severity="warning",
           title="t", summary="s", since="2026-01-02T03:04:05Z", first_detected_at="2026-01-02T03:04:06Z",
           last_detected_at="2026-01-03T00:00:00Z")
    render(conn)
    document = client.get("/openapi.json").json
    page = client.get("/events", headers=auth(org["token"])).json
    assert len(page["data"]) == 4
    validator = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/EventList",
                                                 "components": document["components"]})
    assert list(validator.iter_errors(page)) == []
    for item in page["data"]:
        matching = [name for name in ("ShipmentStatusChangedEvent", "ShipmentEtaChangedEvent",
                                      "ShipmentChecksCompletedEvent", "AlertCreatedEvent")
                    if jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                                        "components": document["components"]}).is_valid(item)]
        assert len(matching) == 1, (item["type"], matching)
