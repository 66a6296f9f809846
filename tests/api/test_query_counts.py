"""One database round trip per kind of data: a page of 100 costs the same statements as a page of 1."""
import pytest

from tests.support.apps import warmed, with_limits
from tests.support.counting import guard_statement_counts, statement_counts
from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token


def full_shipment(conn, labels):
    shipment = make_shipment(conn, 1, draft_produce=["Kiwi"])
    for _ in range(2):
        make_container(conn, shipment, eta="2026-04-01T00:00:00Z")
    for label in labels:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO shipment_labels (shipment_id, label_id) VALUES (%s, %s)", (shipment, label))
    packing_list = insert(conn, "packing_lists", organization_id=1, shipment_id=shipment)
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P")
    insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=1, produce_name="Kiwi")
    insert(conn, "checks", organization_id=1, shipment_id=shipment, key="k", category="c", title="t")
    return shipment


def statements(app, client, token, path):
    recorder = statement_counts(app)
    recorder.clear()
    response = client.get(path, headers=auth(token))
    assert response.status_code == 200
    assert len(recorder) == 1
    return recorder[0], response.json


@pytest.mark.parametrize("query", ["limit=100", "limit=100&q=kiwi", "limit=100&labels=lbl_1,lbl_2&status=draft",
                                   "limit=100&eta_after=2026-01-01&archived=any"])
def test_listing_1_or_100_shipments_costs_the_same(conn, app, client, query):
    token = make_token(conn, make_org(conn, "acme"))
    labels = [make_label(conn, 1, "red"), make_label(conn, 1, "blue")]
    full_shipment(conn, labels)
    client.get("/organization", headers=auth(token))       # the version pin is a one-off statement
    one, body = statements(app, client, token, f"/shipments?{query}")
    assert len(body["data"]) == 1
    for _ in range(99):
        full_shipment(conn, labels)
    hundred, body = statements(app, client, token, f"/shipments?{query}")
    assert len(body["data"]) == 100
    assert all(len(item["containers"]) == 2 and len(item["labels"]) == 2 for item in body["data"])
    assert hundred == one
    # Renderings missing: the page with the MD5s of stored renderings (with q, the alias lookup first), then
    # for the misses the shipments, their containers and labels, and storing them. The token and its count
    # are the guard's, from memory (tests/api/test_one_round_trip.py).
    assert one == (6 if "q=" in query else 5)
    # Read again, every rendering is current and kept by the process: the page, one statement (with q: the
    # alias lookup, the page).
    again, body_again = statements(app, client, token, f"/shipments?{query}")
    assert body_again == body
    assert again == (2 if "q=" in query else 1)


def test_get_shipment_costs_a_constant_handful(conn, app, client):
    token = make_token(conn, make_org(conn, "acme"))
    labels = [make_label(conn, 1, "red"), make_label(conn, 1, "blue")]
    shipment = full_shipment(conn, labels)
    client.get("/organization", headers=auth(token))
    count, body = statements(app, client, token, f"/shipments/shp_{shipment}")
    assert count == 5                       # as a list page of misses (above)
    count, body_again = statements(app, client, token, f"/shipments/shp_{shipment}")
    assert (count, body_again) == (1, body)


def test_requests_leave_pruning_the_rate_limit_table_to_the_delivery_process(conn, app):
    # Old windows are the delivery process's housekeeping (delivery/worker.py, `housekeep`): a request sends
    # nothing but what the guard needs (on a warm process, nothing).
    token = make_token(conn, make_org(conn, "acme"))
    with conn.cursor() as cur:
        cur.execute("INSERT INTO rate_limit_counters (bucket, window_start, hits) "
                    "VALUES ('token:old', now() - interval '1 day', 3)")
    app = with_limits(app, per_token=100_000, per_ip=100_000)
    client = app.test_client()
    warmed(app, client, auth(token))
    guard_counts, counts = guard_statement_counts(app), statement_counts(app)
    guard_counts.clear()
    counts.clear()
    assert [client.get("/organization", headers=auth(token)).status_code for _ in range(3)] == [200] * 3
    assert (guard_counts, counts) == ([0, 0, 0], [])
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM rate_limit_counters WHERE bucket = 'token:old'")
        assert cur.fetchone()["count"] == 1
