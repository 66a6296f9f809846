"""A row holding a value no reader can show (stored before schema.sql's is_api_timestamp and is_api_number
rules) never takes a page away: every GET answers 200 with JSON a strict parser reads."""
import json
from datetime import datetime, timezone

import pytest

from delivery.outbox import render_pending
from tests.support.factories import auth, make_org, make_token
from tests.support.values import EARLIEST, LATEST, NUMBERS, TIMESTAMPS, key_column, one_of_each, without_value_rules

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
# The stored timestamp, and what the API writes for it.
TIMESTAMP_CASES = [("infinity", LATEST), ("-infinity", EARLIEST), ("9999-12-31 23:00-05", LATEST),
                   ("10000-01-01 00:00Z", LATEST), ("0044-03-15 00:00Z BC", EARLIEST)]


def strict(text):
    """JSON as a strict parser reads it: NaN and Infinity are not JSON."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


# Left as they are: archived_at and resolved_at would take the shipment and the alert out of their lists, and
# an infinite eta was always refused (an ETA revision's slip cannot be computed from it).
KEPT = {"archived_at", "resolved_at"}
KEPT_FROM_INFINITY = {"eta", "previous_eta", "new_eta"}


def set_every(conn, rows, timestamp):
    """Every held column of every row set to `timestamp` (or NaN), but KEPT."""
    kept = KEPT | (KEPT_FROM_INFINITY if timestamp.endswith("infinity") else set())
    with conn.cursor() as cur:
        for table, key in rows.items():
            values = {column: timestamp for column in TIMESTAMPS.get(table, []) if column not in kept}
            values.update((column, "NaN") for column in NUMBERS.get(table, []))
            assignments = ", ".join(f"{column} = %s" for column in values)
            cur.execute(f"UPDATE {table} SET {assignments} WHERE {key_column(table)} = %s", [*values.values(), key])
        cur.execute("UPDATE shipments SET status = 'in_transit', transport_type = 'ocean'")


@pytest.fixture
def world(conn):
    org = make_org(conn, "acme")
    token = make_token(conn, org)
    with without_value_rules(conn):
        yield org, token, one_of_each(conn, org)


def gets(rows):
    shipment, document = f"shp_{rows['shipments']}", f"doc_{rows['documents']}"
    return ["/shipments", "/shipments?archived=any", f"/shipments/{shipment}", "/changes", "/alerts",
            "/checks?status=pending", "/events", f"/shipments/{shipment}/timeline", f"/shipments/{shipment}/packing_lists",
            f"/shipments/{shipment}/documents", f"/documents/{document}", f"/documents/{document}/data",
            f"/shipments/{shipment}/free_time", "/free_time/at_risk", "/organization"]


@pytest.mark.parametrize("stored, shown", TIMESTAMP_CASES)
def test_every_get_answers_json_over_rows_no_reader_could_show(conn, client, world, stored, shown):
    _org, token, rows = world
    set_every(conn, rows, stored)
    conn.autocommit = False
    render_pending(conn, datetime.now(timezone.utc))      # the events' bodies, as the delivery script makes them
    conn.commit()
    conn.autocommit = True
    answers = {}
    for path in gets(rows):
        response = client.get(path, headers=auth(token))
        answers[path] = (response.status_code, response.headers["Content-Type"])
        strict(response.get_data(as_text=True))
    assert answers == {path: (200, "application/json") for path in gets(rows)}

    shipment = strict(client.get(f"/shipments/shp_{rows['shipments']}", headers=auth(token)).get_data(as_text=True))
    eta = None if stored.endswith("infinity") else shown
    assert {field: shipment[field] for field in ("forwarder_eta", "eta", "temperature_celsius")} \
        == {"forwarder_eta": shown, "eta": eta, "temperature_celsius": None}
    assert (shipment["containers"][0]["etd"], shipment["containers"][0]["temperature_celsius"]) == (shown, None)
    assert shipment["cargo"]["net_weight_kg"] is None
    for path in ("/shipments?archived=any", "/changes"):
        listed = strict(client.get(path, headers=auth(token)).get_data(as_text=True))["data"]
        assert [item["forwarder_eta"] for item in listed] == [shown]
    alerts = strict(client.get("/alerts", headers=auth(token)).get_data(as_text=True))["data"]
    assert [alert["since"] for alert in alerts] == [shown]
    events = strict(client.get("/events", headers=auth(token)).get_data(as_text=True))["data"]
    assert [event["data"]["object"]["forwarder_eta"] for event in events
            if event["type"] == "shipment.status_changed"] == [shown]

    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "get_shipment", "arguments": {"shipment_id": f"shp_{rows['shipments']}", "full": True}}}
    response = client.post("/mcp", json=message, headers=auth(token, **MCP_HEADERS))
    assert response.status_code == 200
    result = strict(response.get_data(as_text=True))["result"]
    assert result["isError"] is False
    assert strict(result["content"][0]["text"])["forwarder_eta"] == shown
