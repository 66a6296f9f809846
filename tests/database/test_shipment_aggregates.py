"""The checks summary, cargo, organic and produce are kept by the database on write, equal to a recount."""
import random
from decimal import Decimal

from tests.support.aggregates import exact, from_scratch, stored
from tests.support.factories import auth, insert, make_org, make_shipment, make_token


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)
        return cur.fetchall() if cur.description else None


def kept(conn, shipment):
    return stored(conn)[shipment]


def line(conn, pallet, shipment, index, produce, box_count=0, net="0", gross="0", organic=False):
    return insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=index,
                  produce_name=produce, box_count=box_count, net_weight_kg=net, gross_weight_kg=gross,
                  organic=organic)


def test_the_rules_of_the_spec_on_one_shipment(conn, client):
    org = make_org(conn, "acme")
    token = make_token(conn, org)
    shipment = make_shipment(conn, org, draft_produce=["mango", "Banana", "Äpfel", "Banana", "apple"])
    # Nothing read: produce from the draft entry (distinct, in code-point order), cargo all zero.
    assert kept(conn, shipment) == {
        "checks_total": 0, "checks_passed": 0, "checks_failed": 0, "checks_warnings": 0, "checks_skipped": 0,
        "checks_pending": 0, "cargo_pallets": 0, "cargo_boxes": 0, "cargo_net_weight_kg": Decimal("0"),
        "cargo_gross_weight_kg": Decimal("0"), "organic": False, "produce": ["Banana", "apple", "mango", "Äpfel"]}
    for key, status in enumerate(["passed", "failed", "warning", "skipped", "pending", "pending"]):
        insert(conn, "checks", organization_id=org, shipment_id=shipment, key=f"k{key}", category="c", title="t",
               status=status)
    current = insert(conn, "packing_lists", organization_id=org, shipment_id=shipment)
    replaced = insert(conn, "packing_lists", organization_id=org, shipment_id=shipment, is_current=False)
    on_current = insert(conn, "pallets", shipment_id=shipment, packing_list_id=current, pallet_number="P1")
    on_none = insert(conn, "pallets", shipment_id=shipment, pallet_number="P2")
    on_replaced = insert(conn, "pallets", shipment_id=shipment, packing_list_id=replaced, pallet_number="P3")
    line(conn, on_current, shipment, 1, "Kiwi", 10, "100.5", "110")
    line(conn, on_current, shipment, 2, "Apple", 5, "50", "55")
    line(conn, on_none, shipment, 1, "Zucchini", 1, "1", "2", organic=True)
    line(conn, on_replaced, shipment, 1, "Mango", 100, "1000", "1100", organic=True)
    # Cargo counts pallets and lines on the current list and on none; produce and organic only the current
    # list's lines; the replaced list counts nowhere.
    assert kept(conn, shipment) == {
        "checks_total": 6, "checks_passed": 1, "checks_failed": 1, "checks_warnings": 1, "checks_skipped": 1,
        "checks_pending": 2, "cargo_pallets": 2, "cargo_boxes": 16, "cargo_net_weight_kg": Decimal("151.500"),
        "cargo_gross_weight_kg": Decimal("167.000"), "organic": False, "produce": ["Apple", "Kiwi"]}
    # The search document takes the names of every line the cargo counts, from the same pass.
    assert sql(conn, "SELECT search_text FROM shipments WHERE id = %s", shipment)[0]["search_text"].endswith(
        " | APPLE KIWI ZUCCHINI")
    sql(conn, "UPDATE packing_lines SET organic = true WHERE produce_name = 'Kiwi'")
    body = client.get(f"/shipments/shp_{shipment}", headers=auth(token)).json
    assert (body["produce"], body["organic"], body["cargo"], body["checks"]) == (
        ["Apple", "Kiwi"], True, {"pallets": 2, "boxes": 16, "net_weight_kg": 151.5, "gross_weight_kg": 167.0},
        {"total": 6, "passed": 1, "failed": 1, "warnings": 1, "skipped": 1, "pending": 2})
    # The current list replaced too: back to the draft entry for produce; pallets on no list still count.
    sql(conn, "UPDATE packing_lists SET is_current = false WHERE id = %s", current)
    assert {key: value for key, value in kept(conn, shipment).items() if key.startswith("cargo") or
            key in ("organic", "produce")} == {
        "cargo_pallets": 1, "cargo_boxes": 1, "cargo_net_weight_kg": Decimal("1.000"),
        "cargo_gross_weight_kg": Decimal("2.000"), "organic": False, "produce": ["Banana", "apple", "mango", "Äpfel"]}


def test_a_draft_entry_with_a_null_name_shows_the_others(conn):
    shipment = make_shipment(conn, make_org(conn, "acme"), draft_produce=["Mango", None, "Kiwi"])
    assert kept(conn, shipment)["produce"] == ["Kiwi", "Mango"]


def test_what_a_writer_puts_in_them_is_overwritten_and_is_no_change(conn):
    org = make_org(conn, "acme")
    written = {"checks_total": 9, "checks_passed": 9, "checks_failed": 9, "checks_warnings": 9, "checks_skipped": 9,
               "checks_pending": 9, "cargo_pallets": 9, "cargo_boxes": 9, "cargo_net_weight_kg": 9,
               "cargo_gross_weight_kg": 9, "organic": True, "produce": ["Forged"]}
    shipment = make_shipment(conn, org, draft_produce=["Kiwi"], **written)
    insert(conn, "checks", organization_id=org, shipment_id=shipment, key="k", category="c", title="t")
    truth = kept(conn, shipment)
    assert (truth["checks_total"], truth["checks_pending"], truth["cargo_boxes"], truth["organic"],
            truth["produce"]) == (1, 1, 0, False, ["Kiwi"])
    feed = "SELECT revision, change_xid::text, updated_at FROM shipments WHERE id = %s"
    before = sql(conn, feed, shipment)
    # Writing them alone changes nothing: not the values, not the revision, not updated_at.
    sql(conn, "UPDATE shipments SET " + ", ".join(f"{name} = %s" for name in written) + " WHERE id = %s",
        *written.values(), shipment)
    assert (kept(conn, shipment), sql(conn, feed, shipment)) == (truth, before)
    # Beside a real change, that change is kept and they are still the database's.
    sql(conn, "UPDATE shipments SET notes = 'x', cargo_pallets = 5, produce = '{Forged}' WHERE id = %s", shipment)
    assert kept(conn, shipment) == truth
    assert sql(conn, feed, shipment)[0]["revision"] == before[0]["revision"] + 1


def random_change(conn, rng, org, shipments):
    """One statement changing a random kind of row the aggregates come from."""
    shipment = rng.choice(shipments)
    produce = rng.choice(["Kiwi", "kiwi", "Mango", "Avocado", "Äpfel"])
    weight = rng.choice(["0", "0.5", "12.345", "100"])
    kind = rng.randrange(16)
    if kind == 0:
        sql(conn, "INSERT INTO checks (organization_id, shipment_id, key, category, title, status) "
                  "VALUES (%s, %s, %s, 'c', 't', %s) ON CONFLICT (shipment_id, key) DO UPDATE SET status = "
                  "EXCLUDED.status", org, shipment, f"k{rng.randrange(4)}",
            rng.choice(["pending", "passed", "failed", "skipped", "warning"]))
    elif kind == 1:
        sql(conn, "DELETE FROM checks WHERE id = (SELECT min(id) FROM checks WHERE shipment_id = %s)", shipment)
    elif kind == 2:
        # One statement across shipments: a run finishing everywhere.
        sql(conn, "UPDATE checks SET status = %s WHERE status = %s", rng.choice(["passed", "failed"]),
            rng.choice(["pending", "warning"]))
    elif kind == 3:
        insert(conn, "packing_lists", organization_id=org, shipment_id=shipment, is_current=rng.random() < 0.8)
    elif kind == 4:
        sql(conn, "UPDATE packing_lists SET is_current = NOT is_current WHERE id = (SELECT min(id) FROM packing_lists "
                  "WHERE shipment_id = %s)", shipment)
    elif kind == 5:
        sql(conn, "DELETE FROM packing_lists WHERE id = (SELECT max(id) FROM packing_lists WHERE shipment_id = %s)",
            shipment)
    elif kind == 6:
        sql(conn, "INSERT INTO pallets (shipment_id, packing_list_id, pallet_number) VALUES (%s, (SELECT id FROM "
                  "packing_lists WHERE shipment_id = %s AND %s ORDER BY random() LIMIT 1), 'P')",
            shipment, shipment, rng.random() < 0.7)
    elif kind == 7:
        # A pallet moved to another of its shipment's packing lists, or to none.
        sql(conn, "UPDATE pallets SET packing_list_id = (SELECT id FROM packing_lists WHERE shipment_id = %s AND "
                  "%s ORDER BY random() LIMIT 1) WHERE id = (SELECT id FROM pallets WHERE shipment_id = %s "
                  "ORDER BY random() LIMIT 1)", shipment, rng.random() < 0.8, shipment)
    elif kind == 8:
        sql(conn, "DELETE FROM pallets WHERE id = (SELECT min(id) FROM pallets WHERE shipment_id = %s)", shipment)
    elif kind in (9, 10):
        sql(conn, "INSERT INTO packing_lines (pallet_id, shipment_id, line_index, produce_name, organic, box_count, "
                  "net_weight_kg, gross_weight_kg) SELECT p.id, p.shipment_id, coalesce((SELECT max(line_index) "
                  "FROM packing_lines WHERE pallet_id = p.id), 0) + 1, %s, %s, %s, %s, %s FROM pallets p "
                  "WHERE p.shipment_id = %s ORDER BY random() LIMIT 1",
            produce, rng.random() < 0.3, rng.randrange(50), weight, weight, shipment)
    elif kind == 11:
        sql(conn, "UPDATE packing_lines SET produce_name = %s, organic = NOT organic, box_count = %s, "
                  "net_weight_kg = %s WHERE id = (SELECT id FROM packing_lines WHERE shipment_id = %s "
                  "ORDER BY random() LIMIT 1)", produce, rng.randrange(50), weight, shipment)
    elif kind == 12:
        sql(conn, "DELETE FROM packing_lines WHERE id = (SELECT id FROM packing_lines WHERE shipment_id = %s "
                  "ORDER BY random() LIMIT 1)", shipment)
    elif kind == 13:
        sql(conn, "UPDATE shipments SET draft_produce = %s WHERE id = %s",
            rng.sample(["Kiwi", "Mango", "mango", "Banana", "Kiwi"], rng.randrange(4)), shipment)
    elif kind == 14:
        # A bulk loader deferring the touches (demo seed), then touching what it wrote once.
        sql(conn, "SET LOCAL shiptrack.defer_touch = 'on'")
        sql(conn, "INSERT INTO packing_lines (pallet_id, shipment_id, line_index, produce_name, box_count, "
                  "net_weight_kg) SELECT p.id, p.shipment_id, 1000 + p.id, %s, 3, %s FROM pallets p "
                  "WHERE p.shipment_id = %s ON CONFLICT DO NOTHING", produce, weight, shipment)
        sql(conn, "UPDATE checks SET status = 'skipped' WHERE shipment_id = %s", shipment)
        sql(conn, "UPDATE shipments SET change_xid = NULL WHERE id = %s", shipment)
        sql(conn, "SET LOCAL shiptrack.defer_touch = 'off'")
    else:
        sql(conn, "UPDATE shipments SET status = 'validated', notes = %s WHERE id = %s", str(rng.random()), shipment)


def build(conn, org):
    """A shipment with a draft entry, checks, a packing list with a pallet of two lines, a pallet on no list."""
    shipment = make_shipment(conn, org, draft_produce=["Mango", "Kiwi", "Mango"])
    for key, status in enumerate(["passed", "failed", "pending"]):
        insert(conn, "checks", organization_id=org, shipment_id=shipment, key=f"k{key}", category="c", title="t",
               status=status)
    packing_list = insert(conn, "packing_lists", organization_id=org, shipment_id=shipment)
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P1")
    line(conn, pallet, shipment, 1, "Kiwi", 10, "100.5", "110")
    line(conn, pallet, shipment, 2, "Avocado", 4, "40", "44.125")
    loose = insert(conn, "pallets", shipment_id=shipment, pallet_number="P2")
    line(conn, loose, shipment, 1, "Zucchini", 1, "2.5", "3", organic=True)
    return shipment


SHAPES_SQL = """
SELECT (SELECT count(*) > 0 FROM pallets WHERE packing_list_id IS NULL) AS pallet_on_no_list,
       (SELECT count(*) > 0 FROM packing_lists WHERE NOT is_current) AS replaced_list,
       (SELECT count(*) > 0 FROM shipments WHERE organic) AS organic,
       (SELECT count(*) > 0 FROM shipments WHERE checks_failed > 0 AND checks_passed > 0) AS mixed_checks,
       (SELECT count(*) > 0 FROM shipments s WHERE produce <> '{}' AND NOT EXISTS (
          SELECT 1 FROM packing_lists k WHERE k.shipment_id = s.id AND k.is_current)) AS draft_fallback,
       (SELECT count(*) > 0 FROM shipments WHERE cardinality(produce) > 1 AND cargo_net_weight_kg > 0) AS packed
"""


def test_random_writes_of_every_kind_keep_them_equal_to_a_recount(conn):
    org = make_org(conn, "acme")
    rng = random.Random(20261124)
    # The statements pick rows with PostgreSQL's random() too: seeded, so every run reaches the same rules.
    sql(conn, "SELECT setseed(0.20261124)")
    shipments = [build(conn, org) for _ in range(5)]
    seen = set()
    conn.autocommit = False
    for round_number in range(80):
        # Several statements in one transaction as often as one.
        for _ in range(rng.randint(1, 4)):
            random_change(conn, rng, org, shipments)
        conn.commit()
        assert exact(stored(conn)) == exact(from_scratch(conn)), round_number
        seen.update(name for name, present in sql(conn, SHAPES_SQL)[0].items() if present)
        conn.commit()
    # The rounds reached every rule at some point.
    assert seen == {"pallet_on_no_list", "replaced_list", "organic", "mixed_checks", "draft_fallback", "packed"}


def test_a_shipment_inserted_has_the_values_a_recount_gives(conn):
    # What the insert stores is what a touch (a recount from every table) gives, to the representation.
    org = make_org(conn, "acme")
    shipment = make_shipment(conn, org, draft_produce=["mango", "Banana", "mango"], consignor="Frutas del Sur",
                             erp_reference="PO-7", transport_reference="msku 123-4565", eta="2026-12-01T00:00:00Z")
    columns = "effective_eta, search_text, checks_total, checks_passed, checks_failed, checks_warnings, " \
              "checks_skipped, checks_pending, cargo_pallets, cargo_boxes, cargo_net_weight_kg, " \
              "cargo_gross_weight_kg, organic, produce, revision"
    (inserted,) = sql(conn, f"SELECT {columns} FROM shipments WHERE id = %s", shipment)
    sql(conn, "UPDATE shipments SET change_xid = NULL WHERE id = %s", shipment)
    (touched,) = sql(conn, f"SELECT {columns} FROM shipments WHERE id = %s", shipment)
    # (A numeric 0 and 0.000 would compare equal as Decimals.)
    assert exact({1: {**inserted, "revision": None}}) == exact({1: {**touched, "revision": None}})
    assert (inserted["revision"], touched["revision"]) == (1, 2)
    assert inserted["produce"] == ["Banana", "mango"] and inserted["search_text"].startswith("SHIP-")
    assert "FRUTAS DEL SUR" in inserted["search_text"] and "MSKU1234565" in inserted["search_text"]
    assert exact({1: kept(conn, shipment)}) == exact({1: from_scratch(conn)[shipment]})
