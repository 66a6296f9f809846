"""GET /shipments?q=: what the free-text search matches and what it does not."""
import pytest

from tests.support.factories import auth, insert, make_container, make_org, make_shipment, make_token


def add_lines(conn, shipment_id, *names, current=True, on_packing_list=True):
    """Packing lines with these produce names on one pallet (of a packing list unless told otherwise)."""
    packing_list = insert(conn, "packing_lists", organization_id=1, shipment_id=shipment_id,
                          is_current=current) if on_packing_list else None
    pallet = insert(conn, "pallets", shipment_id=shipment_id, packing_list_id=packing_list, pallet_number="P1")
    for index, name in enumerate(names, start=1):
        insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment_id, line_index=index,
               produce_name=name)


@pytest.fixture(scope="module")
def world(module_database):
    """Named shipments of organization 1, plus hidden and foreign ones that must never match."""
    with module_database() as (conn, app):
        org = make_org(conn, "acme")
        globex = make_org(conn, "globex")
        s = {}
        s["ref"] = make_shipment(conn, org, reference="SHIP-20260301-AB7K")
        s["erp"] = make_shipment(conn, org, erp_reference="PO-7781/b")
        s["container_ref"] = make_shipment(conn, org, transport_reference="msku 123-4565")
        s["awb"] = make_shipment(conn, org, transport_reference="176 1234 5675")
        s["bl"] = make_shipment(conn, org, transport_reference="MAEU-987 654 321")
        s["container"] = make_shipment(conn, org)
        make_container(conn, s["container"], number="TGHU 765432-1")
        s["consignor"] = make_shipment(conn, org, consignor="Frutas del Sol SA")
        s["consignee"] = make_shipment(conn, org, consignee="Fresh Foods Europe BV")
        s["lines"] = make_shipment(conn, org)
        add_lines(conn, s["lines"], "Avocado", "Mango")
        s["draft"] = make_shipment(conn, org, draft_produce=["Blueberries"])
        s["notes"] = make_shipment(conn, org, notes="Frutas del Sol avocado", notify_party="Kiwi Partners",
                                   carrier_name="Hapag-Lloyd")
        s["archived"] = make_shipment(conn, org, consignee="Archived Growers", archived=True)
        s["percent"] = make_shipment(conn, org, erp_reference="100% citrus_A")
        for alias, name in (("palta", "Avocado"), ("aguacate", "Avocado"), ("blueberry", "Blueberries")):
            with conn.cursor() as cur:
                cur.execute("INSERT INTO produce_aliases (alias, produce_name) VALUES (%s, %s)", (alias, name))
        # Never visible: awaiting approval, owned elsewhere, another organization's.
        make_shipment(conn, org, reference="HIDDEN-1", consignor="Frutas del Sol SA", awaiting_approval=True)
        make_shipment(conn, org, reference="HIDDEN-2", consignor="Frutas del Sol SA", owned_elsewhere=True)
        make_shipment(conn, globex, reference="SHIP-20260301-AB7X", consignor="Frutas del Sol SA",
                      transport_reference="MSKU1234565")
        yield {"client": app.test_client(), "token": make_token(conn, org), "s": s, "conn": conn}


def search(world, q, extra=""):
    response = world["client"].get(f"/shipments?q={q}{extra}", headers=auth(world["token"]))
    assert response.status_code == 200, response.json
    numbers = {value: key for key, value in world["s"].items()}
    return [numbers.get(int(item["id"].removeprefix("shp_")), item["id"]) for item in response.json["data"]]


@pytest.mark.parametrize("q, expected", [
    # shipment reference: partial, case-insensitive
    ("SHIP-20260301-AB7K", ["ref"]), ("ship-20260301", ["ref"]), ("ab7k", ["ref"]),
    # ERP reference
    ("PO-7781", ["erp"]), ("po-7781/B", ["erp"]), ("7781", ["erp"]),
    # transport references: spaces and dashes ignored on both sides
    ("MSKU1234565", ["container_ref"]), ("msku 123-4565", ["container_ref"]), ("KU-12 34", ["container_ref"]),
    ("17612345675", ["awb"]), ("176-12345675", ["awb"]), ("176 1234 5675", ["awb"]), ("1234-5675", ["awb"]),
    ("MAEU987654321", ["bl"]), ("maeu 987-654", ["bl"]), ("654 321", ["container", "bl"]),
    # container numbers
    ("TGHU7654321", ["container"]), ("tghu 765432-1", ["container"]), ("HU-7654", ["container"]),
    # consignor and consignee: partial, case-insensitive, and tolerant of small misspellings
    ("frutas del sol", ["consignor"]), ("DEL SOL", ["consignor"]), ("Frutas del Sool", ["consignor"]),
    ("Frutaz", ["consignor"]), ("frutas dl sol", ["consignor"]),
    ("fresh foods", ["consignee"]), ("Fresh Fods", ["consignee"]), ("Europe", ["consignee"]),
    ("Frsh Foods Europ", ["consignee"]),
    # produce names from packing lines and from the draft entry, with common aliases
    ("avocado", ["lines"]), ("AVOCA", ["lines"]), ("mango", ["lines"]),
    ("palta", ["lines"]), ("Aguacate", ["lines"]), ("blueberries", ["draft"]), ("Blueberry", ["draft"]),
    # fields that are not searched
    ("Kiwi Partners", []), ("Hapag", []),
    # LIKE wildcards are literal
    ("100%", ["percent"]), ("%", ["percent"]), ("citrus_a", ["percent"]), ("_", ["percent"]),
    # nothing
    ("zzzzzz", []), ("SHIP-20260301-AB7X", []),
])
def test_search_matches(world, q, expected):
    encoded = q.replace("%", "%25").replace(" ", "%20").replace("+", "%2B").replace("/", "%2F")
    assert search(world, encoded) == expected


def test_misspellings_need_five_characters(world):
    # "Sool" is close to "Sol", but a 4-character query only matches partially.
    assert search(world, "Sool") == []


def test_search_reaches_archived_only_when_asked(world):
    assert search(world, "Archived%20Growers") == []
    assert search(world, "Archived%20Growers", "&archived=true") == ["archived"]
    assert search(world, "Archived%20Growers", "&archived=any") == ["archived"]


def test_hidden_and_foreign_shipments_never_match(world):
    assert search(world, "HIDDEN") == []
    assert search(world, "Frutas%20del%20Sol", "&archived=any") == ["consignor"]


def test_search_pages_with_starting_after(world):
    s = world["s"]
    assert search(world, "20260301", "&limit=1") == ["ref"]
    assert search(world, "20260301", f"&limit=1&starting_after=shp_{s['ref']}") == []
    assert search(world, "avocado", "&limit=1") == ["lines"]
    assert search(world, "avocado", f"&limit=1&starting_after=shp_{s['lines']}") == []


@pytest.mark.parametrize("q", ["", "%20", "%20%20%20", "%09"])
def test_blank_query_means_no_search(world, q):
    everything = world["client"].get("/shipments?limit=100", headers=auth(world["token"])).json["data"]
    assert len(search(world, q, "&limit=100")) == len(everything) == len(world["s"]) - 1


def test_produce_of_a_replaced_packing_list_does_not_match(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    shipment = make_shipment(conn, 1)
    add_lines(conn, shipment, "Pomegranate", current=False)
    add_lines(conn, shipment, "Lychee")
    response = client.get(f"/shipments/shp_{shipment}", headers=auth(token))
    assert response.json["produce"] == ["Lychee"]
    assert client.get("/shipments?q=lychee", headers=auth(token)).json["data"][0]["id"] == f"shp_{shipment}"
    assert client.get("/shipments?q=pomegranate", headers=auth(token)).json["data"] == []


def test_search_follows_new_containers_and_lines(conn, client):
    token = make_token(conn, make_org(conn, "acme"))
    shipment = make_shipment(conn, 1)
    assert client.get("/shipments?q=CAIU", headers=auth(token)).json["data"] == []
    make_container(conn, shipment, number="CAIU1234566")
    add_lines(conn, shipment, "Passion fruit")
    assert len(client.get("/shipments?q=caiu-123", headers=auth(token)).json["data"]) == 1
    assert len(client.get("/shipments?q=passion", headers=auth(token)).json["data"]) == 1
