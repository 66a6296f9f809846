"""Stored shipment renderings: served bytes always equal a fresh render, whatever changed and how."""
import random

import pytest

from models import packing_lists, shipments
from rendering import shipment_renderings
from rendering.present import dumps, present
from rendering.schemas.shipments import ShipmentSchema
from rendering.versions import LATEST
from tests.support.apps import NO_RATE_LIMITS, make_app
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token

ALL = "/shipments?archived=any&limit=100"


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall() if cur.description else None


def build(conn, org_id, labels):
    shipment = make_shipment(conn, org_id, draft_produce=["Kiwi"], consignor="Fruit Co")
    make_container(conn, shipment, eta="2026-04-01T00:00:00Z")
    for label in labels[:2]:
        sql(conn, "INSERT INTO shipment_labels (shipment_id, label_id) VALUES (%s, %s)", shipment, label)
    packing_list = insert(conn, "packing_lists", organization_id=org_id, shipment_id=shipment)
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P1")
    insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=1, produce_name="Kiwi",
           box_count=10, net_weight_kg=100, gross_weight_kg=110)
    insert(conn, "checks", organization_id=org_id, shipment_id=shipment, key="k0", category="c", title="t")
    return shipment


def fresh(conn, org_id):
    """Every visible shipment rendered now, without stored renderings (the pre-cache path)."""
    return {f"shp_{item['id']}": dumps(present("shipment", ShipmentSchema, item, LATEST))
            for item in shipments.list_shipments(conn, org_id, 1000)}


def fresh_packing_lists(conn, org_id, ids):
    """Each visible shipment's packing lists rendered now, without stored renderings."""
    found = {name: packing_lists.list_shipment_packing_lists(conn, org_id, int(name[4:])) for name in ids}
    return {name: shipment_renderings.render_packing_lists(lists[1], LATEST)
            for name, lists in found.items() if lists is not None}


def served_packing_lists(client, org, ids):
    """The bytes of each shipment's GET /shipments/{id}/packing_lists (404s left out)."""
    answers = {name: client.get(f"/shipments/{name}/packing_lists", headers=auth(org["token"])) for name in ids}
    assert all(answer.status_code in (200, 404) for answer in answers.values())
    return {name: answer.get_data(as_text=True).removesuffix("\n") for name, answer in answers.items()
            if answer.status_code == 200}


def served(client, org, ids):
    """The bytes of each shipment as GET /shipments/{id} serves it, and the list's bytes."""
    one = {}
    for shipment_id in ids:
        response = client.get(f"/shipments/{shipment_id}", headers=auth(org["token"]))
        if response.status_code == 200:
            one[shipment_id] = response.get_data(as_text=True).removesuffix("\n")
        else:
            assert response.status_code == 404
    listed = client.get(ALL, headers=auth(org["token"])).get_data(as_text=True)
    return one, listed


def random_change(conn, rng, org_id, ids, labels):
    """One change through SQL to a random kind of row a shipment shows."""
    shipment = rng.choice(ids)
    kind = rng.randrange(14)
    if kind == 0:
        sql(conn, "UPDATE shipments SET status = %s WHERE id = %s",
            rng.choice(["draft", "validated", "in_transit", "arrived"]), shipment)
    elif kind == 1:
        sql(conn, "UPDATE shipments SET eta = now() + %s * interval '1 hour' WHERE id = %s", rng.randint(1, 99), shipment)
    elif kind == 2:
        sql(conn, "UPDATE shipments SET tracking_state = %s, last_tracked_at = now() WHERE id = %s",
            rng.choice(["available", "pending", "unavailable"]), shipment)
    elif kind == 3:
        make_container(conn, shipment, eta=rng.choice([None, "2026-03-01T00:00:00Z"]), number="MSCU1234565")
    elif kind == 4:
        sql(conn, "UPDATE containers SET eta = eta - interval '1 day', seal_number = %s WHERE id = "
                  "(SELECT min(id) FROM containers WHERE shipment_id = %s)", str(rng.random()), shipment)
    elif kind == 5:
        sql(conn, "DELETE FROM containers WHERE id = (SELECT max(id) FROM containers WHERE shipment_id = %s)",
            shipment)
    elif kind == 6:
        sql(conn, "INSERT INTO shipment_labels (shipment_id, label_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            shipment, rng.choice(labels))
    elif kind == 7:
        sql(conn, "UPDATE labels SET name = %s, color = %s WHERE id = %s", f"label {rng.random():.6f}",
            rng.choice(["red", "blue", None]), rng.choice(labels))
    elif kind == 8:
        sql(conn, "UPDATE packing_lines SET box_count = box_count + 1, organic = NOT organic, produce_name = %s "
                  "WHERE id = (SELECT min(id) FROM packing_lines WHERE shipment_id = %s)",
            rng.choice(["Kiwi", "Mango", "Avocado"]), shipment)
    elif kind == 9:
        sql(conn, "UPDATE packing_lists SET is_current = NOT is_current WHERE shipment_id = %s", shipment)
    elif kind == 10:
        insert(conn, "pallets", shipment_id=shipment, pallet_number=f"L{rng.random()}")
    elif kind == 11:
        sql(conn, "INSERT INTO checks (organization_id, shipment_id, key, category, title, status) "
                  "VALUES (%s, %s, %s, 'c', 't', %s) ON CONFLICT (shipment_id, key) DO UPDATE SET status = "
                  "EXCLUDED.status", org_id, shipment, f"k{rng.randrange(3)}",
            rng.choice(["passed", "failed", "warning", "pending"]))
    elif kind == 12:
        sql(conn, "DELETE FROM checks WHERE id = (SELECT min(id) FROM checks WHERE shipment_id = %s)", shipment)
    else:
        sql(conn, "UPDATE shipments SET awaiting_approval = NOT awaiting_approval WHERE id = %s", shipment)


def test_served_bytes_always_equal_a_fresh_render(conn, org, database_url, tmp_path):
    client = make_app(database_url, RATE_LIMITS=NO_RATE_LIMITS, STORAGE_DIR=str(tmp_path)).test_client()
    rng = random.Random(20261123)
    labels = [make_label(conn, org["id"], name) for name in ("cold", "organic", "priority")]
    ids = [build(conn, org["id"], labels) for _ in range(12)]
    names = [f"shp_{number}" for number in ids]
    for round_number in range(40):
        for _ in range(rng.randint(1, 3)):
            random_change(conn, rng, org["id"], ids, labels)
        truth = fresh(conn, org["id"])
        one, listed = served(client, org, names)
        assert one == {name: body for name, body in truth.items() if name in names}, round_number
        # The list is the same renderings, newest first, in the list envelope.
        ordered = [truth[name] for name in sorted(truth, key=lambda name: -int(name[4:]))]
        assert listed == '{"object":"list","data":[' + ",".join(ordered) + '],"has_more":false}\n'
        # Packing lists (stored per revision too): each shipment's answer equals a fresh render.
        assert served_packing_lists(client, org, names) == fresh_packing_lists(conn, org["id"], names), round_number
    # After the reads, every visible shipment has a current stored rendering (what the next read serves).
    current = sql(conn, """SELECT r.resource, count(*) AS n FROM shipment_renderings r JOIN shipments s
                            ON s.id = r.shipment_id AND s.revision = r.revision
                           WHERE NOT s.awaiting_approval GROUP BY 1 ORDER BY 1""")
    assert current == [{"resource": "packing_lists", "n": len(truth)}, {"resource": "shipment", "n": len(truth)}]


def test_a_rendering_is_served_only_for_its_revision_version_and_renderer(conn, client, org, monkeypatch):
    shipment = make_shipment(conn, org["id"], reference="S-1")
    first = client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json
    # A stored rendering is served as stored while current (shown by changing it behind the API's back)...
    sql(conn, "UPDATE shipment_renderings SET body = replace(body, 'S-1', 'S-STORED')")
    assert client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json["reference"] == "S-STORED"
    # ...and never once the shipment changed,
    sql(conn, "UPDATE shipments SET notes = 'changed' WHERE id = %s", shipment)
    now = client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json
    assert (now["reference"], now["notes"], now["revision"]) == ("S-1", "changed", first["revision"] + 1)
    # ...nor after a deploy of code that shapes shipments differently.
    sql(conn, "UPDATE shipment_renderings SET body = replace(body, 'S-1', 'S-STORED')")
    monkeypatch.setattr(shipment_renderings, "RENDERER", "another-renderer")
    assert client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json["reference"] == "S-1"
    assert sql(conn, "SELECT renderer FROM shipment_renderings")[0]["renderer"] == "another-renderer"


def test_an_older_revision_never_replaces_a_newer_rendering(conn, org):
    shipment = make_shipment(conn, org["id"])
    shipments.store_renderings(conn, LATEST, "r", [(shipment, 5, '{"new":true}')])
    shipments.store_renderings(conn, LATEST, "r", [(shipment, 4, '{"old":true}')])
    assert sql(conn, "SELECT revision, body FROM shipment_renderings") == [{"revision": 5, "body": '{"new":true}'}]


def test_packing_lists_are_served_as_stored_only_while_current(conn, app, client, org):
    shipment = build(conn, org["id"], [])
    path = f"/shipments/shp_{shipment}/packing_lists"
    recorder = statement_counts(app)
    client.get("/organization", headers=auth(org["token"]))                # pins the version
    recorder.clear()
    first = client.get(path, headers=auth(org["token"]))
    # A miss: the stored rendering's check, the lists, pallets, lines, and the store.
    assert (first.json["data"][0]["pallets"][0]["lines"][0]["box_count"], recorder) == (10, [5])
    sql(conn, "UPDATE shipment_renderings SET body = replace(body, '\"box_count\":10', '\"box_count\":77') "
              "WHERE resource = 'packing_lists'")
    recorder.clear()
    again = client.get(path, headers=auth(org["token"]))
    # Current: served as stored (shown by the edit behind the API's back), in one statement.
    assert (again.json["data"][0]["pallets"][0]["lines"][0]["box_count"], recorder) == (77, [1])
    sql(conn, "UPDATE packing_lines SET box_count = 11 WHERE shipment_id = %s", shipment)
    now = client.get(path, headers=auth(org["token"]))
    assert (now.json["data"][0]["pallets"][0]["lines"][0]["box_count"], now.json["data"][0]["totals"]["boxes"]) == (11, 11)
    # Hidden: not found, whatever is stored.
    sql(conn, "UPDATE shipments SET awaiting_approval = true WHERE id = %s", shipment)
    assert client.get(path, headers=auth(org["token"])).status_code == 404
