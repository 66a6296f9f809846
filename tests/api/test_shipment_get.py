"""GET /shipments/{id}: every field, every nested object, and the derived fields."""
import pytest

from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token

T = "2026-03-01T10:00:00Z"


@pytest.fixture
def token(conn):
    return make_token(conn, make_org(conn, "acme"))


def get(client, token, shipment_id):
    response = client.get(f"/shipments/shp_{shipment_id}", headers=auth(token))
    assert response.status_code == 200, response.json
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Service-Version"] == "2026-10-01"
    return response.json


def pin_updated_at(conn, shipment_id, value=T):
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET updated_at = %s WHERE id = %s", (value, shipment_id))


EMPTY_PLACE = {"location": None, "country": None, "timezone": None}


def test_a_bare_shipment_shows_every_field_as_null_or_empty(conn, client, token):
    shipment = make_shipment(conn, 1, reference="BARE-1", created_at=T)
    pin_updated_at(conn, shipment)
    assert get(client, token, shipment) == {
        "object": "shipment", "id": f"shp_{shipment}", "reference": "BARE-1", "erp_reference": None,
        "transport_reference": None, "transport_reference_type": None, "transport_type": None,
        "cargo_type": None, "temperature_celsius": None, "status": "draft", "archived": False,
        "archived_at": None, "validated_at": None, "approved_at": None,
        "origin": EMPTY_PLACE, "destination": EMPTY_PLACE,
        "etd": None, "eta": None, "effective_eta": None, "original_eta": None, "predicted_eta": None,
        "carrier": {"name": None, "scac": None},
        "tracking": {"state": "none", "status": None, "unavailable_reason": None, "halted_reason": None,
                     "last_tracked_at": None, "carrier_updated_at": None},
        "parties": {"consignor": None, "consignee": None, "notify_party": None},
        "produce": [], "organic": False,
        "cargo": {"pallets": 0, "boxes": 0, "net_weight_kg": 0.0, "gross_weight_kg": 0.0},
        "containers": [], "labels": [],
        "checks": {"total": 0, "passed": 0, "failed": 0, "warnings": 0, "skipped": 0, "pending": 0},
        "notes": None, "load_type": None, "house_bl": None, "forwarder_reference": None,
        "forwarder_eta": None, "created_at": T, "updated_at": T,
        "revision": 2,                       # the insert, then pin_updated_at's update
    }


def add_packing(conn, shipment_id, lines, current=True, on_packing_list=True):
    """One pallet with these lines (name, boxes, net, gross, organic)."""
    packing_list = insert(conn, "packing_lists", organization_id=1, shipment_id=shipment_id,
                          is_current=current) if on_packing_list else None
    pallet = insert(conn, "pallets", shipment_id=shipment_id, packing_list_id=packing_list,
                    pallet_number=f"P{packing_list}")
    for index, (name, boxes, net, gross, organic) in enumerate(lines, start=1):
        insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment_id, line_index=index,
               produce_name=name, box_count=boxes, net_weight_kg=net, gross_weight_kg=gross, organic=organic)
    return packing_list, pallet


def test_a_full_shipment(conn, client, token):
    shipment = make_shipment(
        conn, 1, reference="SHIP-FULL-1", erp_reference="PO-1", transport_reference="msku 123-4565",
        transport_type="ocean", cargo_type="reefer", temperature_celsius=-1.5, status="in_transit",
        archived=True, archived_at="2026-03-09T08:00:00Z", validated_at="2026-03-02T09:30:00Z",
        approved_at="2026-03-01T11:00:00+01:00",
        origin_location="Callao", origin_country="Peru", origin_timezone="-05:00",
        destination_location="Rotterdam", destination_country="Netherlands", destination_timezone="+01:00",
        etd="2026-03-03T00:00:00Z", eta="2026-03-28T06:00:00Z", predicted_eta="2026-03-27T18:00:00Z",
        carrier_name="Maersk", carrier_scac="MAEU",
        tracking_state="available", tracking_status="in_transit", halted_reason="errored",
        last_tracked_at="2026-03-10T10:00:00.987654Z", carrier_updated_at="2026-03-10T09:00:00Z",
        consignor="Frutas del Sol SA", consignee="Fresh Foods BV", notify_party="Agent NV",
        draft_produce=["Kiwi"], notes="Handle with care", load_type="FCL", house_bl="HBL-1",
        forwarder_reference="FWD-9", forwarder_eta="2026-03-29T00:00:00Z", created_at=T)
    first = make_container(conn, shipment, number="tghu 765432-1", seal_number="S1", vessel="Maersk Lima",
                           voyage="612N", port_of_loading="Callao", port_of_discharge="Rotterdam",
                           etd="2026-03-03T00:00:00Z", eta="2026-03-20T00:00:00Z", cargo_type="reefer",
                           temperature_celsius=-0.5)
    second = make_container(conn, shipment)
    zeta = make_label(conn, 1, "zeta", "blue", shipment_ids=[shipment])
    alpha = make_label(conn, 1, "alpha", shipment_ids=[shipment])
    make_label(conn, 1, "beta", "red")                           # not on this shipment
    for key, status in enumerate(["passed", "passed", "failed", "warning", "skipped", "pending"]):
        insert(conn, "checks", organization_id=1, shipment_id=shipment, key=f"k{key}", category="documents",
               status=status, title="t")
    add_packing(conn, shipment, [("Avocado", 100, 400.5, 420, False), ("Mango", 50, 200, 210.25, True),
                                 ("Avocado", 10, 40, 42, False)])
    add_packing(conn, shipment, [("Pomegranate", 999, 999, 999, True)], current=False)   # replaced
    add_packing(conn, shipment, [("Lime", 5, 10, 11, False)], on_packing_list=False)      # on no list
    insert(conn, "pallets", shipment_id=shipment, pallet_number="LOOSE")                   # no list, no lines
    pin_updated_at(conn, shipment, "2026-03-10T12:00:00Z")
    assert get(client, token, shipment) == {
        "object": "shipment", "id": f"shp_{shipment}", "reference": "SHIP-FULL-1", "erp_reference": "PO-1",
        "transport_reference": "MSKU1234565", "transport_reference_type": "container",
        "transport_type": "ocean", "cargo_type": "reefer", "temperature_celsius": -1.5,
        "status": "in_transit", "archived": True, "archived_at": "2026-03-09T08:00:00Z",
        "validated_at": "2026-03-02T09:30:00Z", "approved_at": "2026-03-01T10:00:00Z",
        "origin": {"location": "Callao", "country": "Peru", "timezone": "-05:00"},
        "destination": {"location": "Rotterdam", "country": "Netherlands", "timezone": "+01:00"},
        "etd": "2026-03-03T00:00:00Z", "eta": "2026-03-28T06:00:00Z",
        # eta is set, so it wins over the earlier container eta
        "effective_eta": "2026-03-28T06:00:00Z", "original_eta": "2026-03-28T06:00:00Z",
        "predicted_eta": "2026-03-27T18:00:00Z",
        "carrier": {"name": "Maersk", "scac": "MAEU"},
        "tracking": {"state": "available", "status": "in_transit", "unavailable_reason": None,
                     "halted_reason": "errored", "last_tracked_at": "2026-03-10T10:00:00Z",
                     "carrier_updated_at": "2026-03-10T09:00:00Z"},
        "parties": {"consignor": "Frutas del Sol SA", "consignee": "Fresh Foods BV", "notify_party": "Agent NV"},
        # from the current packing list's lines; the draft entry and replaced lists do not count
        "produce": ["Avocado", "Mango"],
        "organic": True,
        # 1 pallet on the current list + 2 on no list; lines of the replaced list count nowhere
        "cargo": {"pallets": 3, "boxes": 165, "net_weight_kg": 650.5, "gross_weight_kg": 683.25},
        "containers": [
            {"object": "container", "id": f"ctr_{first}", "number": "TGHU7654321", "seal_number": "S1",
             "vessel": "Maersk Lima", "voyage": "612N", "port_of_loading": "Callao",
             "port_of_discharge": "Rotterdam", "etd": "2026-03-03T00:00:00Z", "eta": "2026-03-20T00:00:00Z",
             "cargo_type": "reefer", "temperature_celsius": -0.5},
            {"object": "container", "id": f"ctr_{second}", "number": None, "seal_number": None, "vessel": None,
             "voyage": None, "port_of_loading": None, "port_of_discharge": None, "etd": None, "eta": None,
             "cargo_type": None, "temperature_celsius": None},
        ],
        "labels": [
            {"object": "label", "id": f"lbl_{alpha}", "name": "alpha", "color": None, "color_hex": "#6b7280"},
            {"object": "label", "id": f"lbl_{zeta}", "name": "zeta", "color": "blue", "color_hex": "#3b82f6"},
        ],
        "checks": {"total": 6, "passed": 2, "failed": 1, "warnings": 1, "skipped": 1, "pending": 1},
        "notes": "Handle with care", "load_type": "FCL", "house_bl": "HBL-1", "forwarder_reference": "FWD-9",
        "forwarder_eta": "2026-03-29T00:00:00Z", "created_at": T, "updated_at": "2026-03-10T12:00:00Z",
        # One per autocommit statement above that changed what it shows: the insert, 2 containers, 2 labels
        # attached, 6 checks, the packing (list, pallet and each line: 5 + 3 + 2 statements), the loose
        # pallet and pin_updated_at.
        "revision": 23,
    }


def test_produce_from_the_draft_entry_until_a_packing_list_is_read(conn, client, token):
    shipment = make_shipment(conn, 1, draft_produce=["Mango", "Avocado", "Mango"])
    assert get(client, token, shipment)["produce"] == ["Avocado", "Mango"]
    add_packing(conn, shipment, [("Grapes", 1, 1, 1, False)], current=False)
    assert get(client, token, shipment)["produce"] == ["Avocado", "Mango"]
    add_packing(conn, shipment, [("Lime", 1, 1, 1, False)])
    assert get(client, token, shipment)["produce"] == ["Lime"]


def test_organic_only_from_visible_lines(conn, client, token):
    shipment = make_shipment(conn, 1)
    add_packing(conn, shipment, [("Kiwi", 1, 1, 1, True)], current=False)
    add_packing(conn, shipment, [("Kiwi", 1, 1, 1, False)])
    assert get(client, token, shipment)["organic"] is False


def test_pallets_on_no_packing_list_count_without_a_packing_list(conn, client, token):
    shipment = make_shipment(conn, 1)
    insert(conn, "pallets", shipment_id=shipment, pallet_number="LOOSE-1")
    insert(conn, "pallets", shipment_id=shipment, pallet_number="LOOSE-2")
    body = get(client, token, shipment)
    assert body["cargo"] == {"pallets": 2, "boxes": 0, "net_weight_kg": 0.0, "gross_weight_kg": 0.0}
    assert body["produce"] == []


def test_effective_eta_from_the_earliest_container(conn, client, token):
    shipment = make_shipment(conn, 1)
    make_container(conn, shipment, eta="2026-04-20T00:00:00Z")
    make_container(conn, shipment, eta="2026-04-15T00:00:00Z")
    make_container(conn, shipment)
    body = get(client, token, shipment)
    assert (body["eta"], body["effective_eta"]) == (None, "2026-04-15T00:00:00Z")
    assert [c["eta"] for c in body["containers"]] == ["2026-04-20T00:00:00Z", "2026-04-15T00:00:00Z", None]
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET eta = '2026-05-01T00:00:00Z' WHERE id = %s", (shipment,))
    assert get(client, token, shipment)["effective_eta"] == "2026-05-01T00:00:00Z"
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET eta = NULL WHERE id = %s", (shipment,))
    assert get(client, token, shipment)["effective_eta"] == "2026-04-15T00:00:00Z"


def test_original_eta_is_never_overwritten(conn, client, token):
    shipment = make_shipment(conn, 1)
    assert get(client, token, shipment)["original_eta"] is None
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET eta = '2026-04-01T00:00:00Z' WHERE id = %s", (shipment,))
    assert get(client, token, shipment)["original_eta"] == "2026-04-01T00:00:00Z"
    # Later estimates, a cleared eta, and even a writer setting original_eta leave it alone.
    for eta in ("2026-04-05T00:00:00Z", None, "2026-03-30T00:00:00Z"):
        with conn.cursor() as cur:
            cur.execute("UPDATE shipments SET eta = %s, original_eta = %s WHERE id = %s",
                        (eta, "2020-01-01T00:00:00Z", shipment))
        body = get(client, token, shipment)
        assert body["eta"] == eta
        assert body["original_eta"] == "2026-04-01T00:00:00Z"


def test_validated_at_stays_set_after_later_statuses(conn, client, token):
    shipment = make_shipment(conn, 1)
    assert get(client, token, shipment)["validated_at"] is None
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (shipment,))
    validated_at = get(client, token, shipment)["validated_at"]
    assert validated_at is not None
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'arrived', validated_at = NULL WHERE id = %s", (shipment,))
    assert get(client, token, shipment)["validated_at"] == validated_at


def test_generated_reference_shape(conn, client, token):
    import re

    shipment = make_shipment(conn, 1, created_at="2026-03-01T23:30:00-05:00")
    assert re.fullmatch(r"SHIP-20260302-[A-Z0-9]{4}", get(client, token, shipment)["reference"])


@pytest.mark.parametrize("stored, canonical, kind", [
    ("MSKU1234565", "MSKU1234565", "container"),
    ("msku 123-4565", "MSKU1234565", "container"),
    (" tghu-765432-1 ", "TGHU7654321", "container"),
    ("176-12345675", "176-12345675", "awb"),
    ("176 1234 5675", "176-12345675", "awb"),
    ("17612345675", "176-12345675", "awb"),
    ("17612345676", "17612345676", "bill_of_lading"),       # wrong check digit: not an air waybill
    ("maeu-987 654 321", "MAEU987654321", "bill_of_lading"),
    ("HLCUrtm250312345", "HLCURTM250312345", "bill_of_lading"),
    ("AB-12-CD", "AB12CD", "bill_of_lading"),
    ("ab1", "AB1", None),
    ("ABC/123/456", "ABC/123/456", None),
    ("", None, None),
    ("  - ", None, None),
    (None, None, None),
])
def test_transport_reference_canonical_form_and_type(conn, client, token, stored, canonical, kind):
    shipment = make_shipment(conn, 1, transport_reference=stored)
    body = get(client, token, shipment)
    assert (body["transport_reference"], body["transport_reference_type"]) == (canonical, kind)


def test_archived_shipment_found_by_id(conn, client, token):
    shipment = make_shipment(conn, 1, archived=True)
    body = get(client, token, shipment)
    assert body["archived"] is True
    assert body["archived_at"] is not None


def test_labels_and_containers_of_other_shipments_not_mixed_in(conn, client, token):
    a, b = make_shipment(conn, 1), make_shipment(conn, 1)
    make_container(conn, b, number="TGHU7654321")
    make_label(conn, 1, "only-b", shipment_ids=[b])
    body = get(client, token, a)
    assert (body["containers"], body["labels"]) == ([], [])
