"""GET /shipments/{shipment_id}/packing_lists: current packing lists, pallets and lines, totals."""
import pytest

from tests.support.apps import with_limits
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_container, make_org, make_shipment, make_token


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id)}


def make_list(conn, org, **values):
    values = {"organization_id": org["id"], "shipment_id": org["shipment"], "reference": "PL-1",
              "declared_box_count": 100, "declared_net_weight_kg": "400.5", **values}
    return insert(conn, "packing_lists", **values)


def make_pallet(conn, org, packing_list_id, number="P1", container_id=None):
    return insert(conn, "pallets", shipment_id=org["shipment"], packing_list_id=packing_list_id,
                  pallet_number=number, container_id=container_id)


def make_line(conn, org, pallet_id, line_index=1, box_count=10, net="40.25", **values):
    values = {"pallet_id": pallet_id, "shipment_id": org["shipment"], "line_index": line_index,
              "produce_name": "Avocado", "produce_type": "fruit", "variety": "Hass", "calibre": "18",
              "quality_category": "I", "pack_format": "4kg", "label": "Sol", "ggn": "4052852000000",
              "box_count": box_count, "box_weight_kg": "4.025", "net_weight_kg": net, "gross_weight_kg": "44.5",
              **values}
    return insert(conn, "packing_lines", **values)


def line_body(line_id, line_index=1, box_count=10, net=40.25):
    return {"object": "packing_line", "id": f"pln_{line_id}", "line_index": line_index, "produce_name": "Avocado",
            "produce_type": "fruit", "variety": "Hass", "calibre": "18", "quality_category": "I",
            "pack_format": "4kg", "label": "Sol", "ggn": "4052852000000", "box_count": box_count,
            "box_weight_kg": 4.025, "net_weight_kg": net, "gross_weight_kg": 44.5}


def test_current_packing_lists_with_pallets_lines_and_totals(conn, client, org):
    shipment = org["shipment"]
    container = make_container(conn, shipment, number="MSCU1234567")
    document = insert(conn, "documents", organization_id=org["id"], shipment_id=shipment, type="packing_list",
                      filename="pl.pdf")
    first = make_list(conn, org, document_id=document, container_id=container)
    replaced = make_list(conn, org, reference="PL-old", is_current=False)
    second = make_list(conn, org, reference="PL-2", declared_box_count=0, declared_net_weight_kg=0)
    p1 = make_pallet(conn, org, first, "P1", container)
    p2 = make_pallet(conn, org, first, "P2")
    # Written out of order: lines come back by line_index.
    l2 = make_line(conn, org, p1, line_index=2, box_count=5, net="20")
    l1 = make_line(conn, org, p1, line_index=1)
    l3 = make_line(conn, org, p2, line_index=1, box_count=7, net="0.5")
    make_line(conn, org, make_pallet(conn, org, replaced, "OLD"))
    unlisted = make_pallet(conn, org, None, "LOOSE")
    make_line(conn, org, unlisted)

    response = client.get(f"/shipments/shp_{shipment}/packing_lists", headers=auth(org["token"]))

    assert response.status_code == 200
    assert response.headers["Service-Version"] == "2026-10-01"
    assert response.json == {"object": "list", "has_more": False, "data": [
        {"object": "packing_list", "id": f"pkl_{first}", "shipment_id": f"shp_{shipment}",
         "document_id": f"doc_{document}", "container_id": f"ctr_{container}", "reference": "PL-1",
         "declared_box_count": 100, "declared_net_weight_kg": 400.5,
         "totals": {"pallets": 2, "boxes": 22, "net_weight_kg": 60.75},
         "pallets": [
             {"object": "pallet", "id": f"plt_{p1}", "pallet_number": "P1", "container_id": f"ctr_{container}",
              "lines": [line_body(l1), line_body(l2, 2, 5, 20.0)]},
             {"object": "pallet", "id": f"plt_{p2}", "pallet_number": "P2", "container_id": None,
              "lines": [line_body(l3, 1, 7, 0.5)]}]},
        {"object": "packing_list", "id": f"pkl_{second}", "shipment_id": f"shp_{shipment}",
         "document_id": None, "container_id": None, "reference": "PL-2",
         "declared_box_count": 0, "declared_net_weight_kg": 0.0,
         "totals": {"pallets": 0, "boxes": 0, "net_weight_kg": 0.0}, "pallets": []},
    ]}
    # The pallet on no packing list is reachable nowhere here, but the shipment counts it.
    assert "LOOSE" not in response.text
    cargo = client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json["cargo"]
    assert cargo["pallets"] == 3


def test_oldest_first_by_creation_time_then_id(conn, client, org):
    late = make_list(conn, org, created_at="2026-03-05T00:00:00Z")
    early = make_list(conn, org, created_at="2026-03-01T00:00:00Z")
    same_second_b = make_list(conn, org, created_at="2026-03-03T10:00:00.900Z")
    same_second_a = make_list(conn, org, created_at="2026-03-03T10:00:00.100Z")
    body = client.get(f"/shipments/shp_{org['shipment']}/packing_lists", headers=auth(org["token"])).json
    assert [item["id"] for item in body["data"]] == [
        f"pkl_{early}", f"pkl_{same_second_b}", f"pkl_{same_second_a}", f"pkl_{late}"]


def test_empty_and_json_suffix(client, org):
    response = client.get(f"/shipments/shp_{org['shipment']}/packing_lists.json", headers=auth(org["token"]))
    assert (response.status_code, response.json) == (200, {"object": "list", "data": [], "has_more": False})


def test_only_replaced_lists_is_empty(conn, client, org):
    make_list(conn, org, is_current=False)
    response = client.get(f"/shipments/shp_{org['shipment']}/packing_lists", headers=auth(org["token"]))
    assert response.json == {"object": "list", "data": [], "has_more": False}


def test_missing_shipments_are_404(conn, client, org):
    other = make_org(conn, "other")
    ids = [f"shp_{n}" for n in (make_shipment(conn, other), make_shipment(conn, org["id"], awaiting_approval=True),
                                make_shipment(conn, org["id"], owned_elsewhere=True), 999999)]
    for shipment_id in ids + ["shp_0", "shp_01", "pkl_1", "1", "shp_1234567890123456789"]:
        response = client.get(f"/shipments/{shipment_id}/packing_lists", headers=auth(org["token"]))
        assert response.status_code == 404, shipment_id
        assert response.headers["Service-Version"] == "2026-10-01"
        assert response.json == {"error": {"type": "not_found_error", "code": "resource_missing", "param": None,
                                           "message": f"No such shipment: {shipment_id!r}."}}


def test_archived_shipment_is_served(conn, client, org):
    archived = make_shipment(conn, org["id"], archived=True)
    make_list(conn, org, shipment_id=archived)
    response = client.get(f"/shipments/shp_{archived}/packing_lists", headers=auth(org["token"]))
    assert len(response.json["data"]) == 1


def test_common_rules(app, client, org):
    path = f"/shipments/shp_{org['shipment']}/packing_lists"
    missing = client.get(path)
    assert (missing.status_code, missing.json["error"]["code"]) == (401, "missing_token")
    assert "Service-Version" not in missing.headers
    version = client.get(path, headers=auth(org["token"], **{"Service-Version": "2025-01-01"}))
    assert (version.status_code, version.json["error"]["code"]) == (400, "invalid_version")
    assert client.get(path + ".xml", headers=auth(org["token"])).status_code == 404
    assert client.get(path + "?limit=abc", headers=auth(org["token"])).status_code == 200
    client = with_limits(app, per_token=0).test_client()
    assert client.get(path, headers=auth(org["token"])).status_code == 429


def test_statement_count_does_not_grow(app, conn, client, org):
    client.get("/organization", headers=auth(org["token"]))  # pins the version: one statement, once
    make_line(conn, org, make_pallet(conn, org, make_list(conn, org)))
    statement_counts(app).clear()
    path = f"/shipments/shp_{org['shipment']}/packing_lists"
    assert len(client.get(path, headers=auth(org["token"])).json["data"]) == 1
    for _ in range(10):
        packing_list = make_list(conn, org)
        for number in range(5):
            pallet = make_pallet(conn, org, packing_list, f"P{number}")
            for index in range(1, 4):
                make_line(conn, org, pallet, line_index=index)
    assert len(client.get(path, headers=auth(org["token"])).json["data"]) == 11
    one, many = statement_counts(app)
    assert one == many
