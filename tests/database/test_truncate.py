"""TRUNCATE of any table a shipment's stored rendering or kept aggregates are made of leaves nothing stale."""
import pytest

from tests.support.aggregates import exact, from_scratch, stored
from tests.support.changes import feed, ids_and_revisions
from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token

# Each table, and what its TRUNCATE must take away from the served shipment.
SHOWN = {
    "containers": lambda body: body["containers"] == [] and body["effective_eta"] is None,
    "shipment_labels": lambda body: body["labels"] == [],
    "labels": lambda body: body["labels"] == [],
    "checks": lambda body: body["checks"]["total"] == 0,
    "pallets": lambda body: body["cargo"]["pallets"] == 0,
    "packing_lists": lambda body: body["produce"] == [] and body["cargo"]["boxes"] == 0,
    "packing_lines": lambda body: body["cargo"]["boxes"] == 0 and body["produce"] == [],
}


@pytest.fixture
def shipment(conn):
    """A shipment showing a row of every table, read once so that its renderings are stored."""
    org = make_org(conn, "acme")
    shipment_id = make_shipment(conn, org)
    make_container(conn, shipment_id, number="MSCU1234565", eta="2026-05-01T00:00:00Z")
    make_label(conn, org, "urgent", shipment_ids=[shipment_id])
    insert(conn, "checks", organization_id=org, shipment_id=shipment_id, key="k", category="c", title="t")
    packing_list = insert(conn, "packing_lists", organization_id=org, shipment_id=shipment_id)
    pallet = insert(conn, "pallets", shipment_id=shipment_id, packing_list_id=packing_list, pallet_number="P1")
    insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment_id, line_index=1, produce_name="Kiwi",
           box_count=10)
    return {"id": org, "token": make_token(conn, org), "shipment": shipment_id}


def served(client, org, path):
    response = client.get(path, headers=auth(org["token"]))
    return response.status_code, response.get_data(as_text=True)


@pytest.mark.parametrize("table", sorted(SHOWN))
def test_truncate_refreshes_what_is_served(conn, client, shipment, table):
    one, lists = f"/shipments/shp_{shipment['shipment']}", f"/shipments/shp_{shipment['shipment']}/packing_lists"
    before = client.get(one, headers=auth(shipment["token"])).json
    served(client, shipment, lists)
    assert not SHOWN[table](before)
    cursor = feed(client, shipment)["next_since"]

    with conn.cursor() as cur:
        cur.execute(f"TRUNCATE {table} CASCADE")

    after = client.get(one, headers=auth(shipment["token"])).json
    assert SHOWN[table](after) and after["revision"] > before["revision"]
    assert ids_and_revisions(feed(client, shipment, cursor)) == [(f"shp_{shipment['shipment']}",
                                                                  after["revision"], False)]
    assert exact(stored(conn)) == exact(from_scratch(conn))
    # What is served is what a fresh render gives, for the shipment and its packing lists.
    answers = served(client, shipment, one), served(client, shipment, lists)
    with conn.cursor() as cur:
        cur.execute("DELETE FROM shipment_renderings")
    assert (served(client, shipment, one), served(client, shipment, lists)) == answers


def test_truncate_shipments_shows_each_one_deleted_in_the_feed(conn, client, shipment):
    other = make_shipment(conn, shipment["id"])
    never_shown = make_shipment(conn, shipment["id"], awaiting_approval=True)
    served(client, shipment, f"/shipments/shp_{shipment['shipment']}")
    cursor = feed(client, shipment)["next_since"]

    with conn.cursor() as cur:
        cur.execute("TRUNCATE shipments CASCADE")

    # Each at a revision above the one its mirror holds (7 and 1).
    gone = {item["id"]: item for item in feed(client, shipment, cursor)["data"]}
    assert sorted(gone) == [f"shp_{shipment['shipment']}", f"shp_{other}"]
    assert all(item["deleted"] for item in gone.values())
    assert (gone[f"shp_{shipment['shipment']}"]["revision"] > 7, gone[f"shp_{other}"]["revision"] > 1) == (True, True)
    assert f"shp_{never_shown}" not in str(feed(client, shipment)["data"])
    assert served(client, shipment, f"/shipments/shp_{shipment['shipment']}")[0] == 404
