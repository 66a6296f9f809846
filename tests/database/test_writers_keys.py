"""Writers' rows that cannot disagree: a line's shipment is its pallet's, a pallet's is its packing list's."""
import psycopg2
import pytest

from models import migrations
from tests.support.aggregates import exact, from_scratch, stored
from tests.support.apps import make_app
from tests.support.factories import insert, make_org, make_shipment
from tests.support.migrations import apply_first_migration, apply_migrations_through, run_in_transaction


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


@pytest.fixture
def two_shipments(conn):
    org = make_org(conn, "acme")
    first, second = make_shipment(conn, org), make_shipment(conn, org)
    packing_list = insert(conn, "packing_lists", organization_id=org, shipment_id=first)
    pallet = insert(conn, "pallets", shipment_id=first, packing_list_id=packing_list, pallet_number="P1")
    line = insert(conn, "packing_lines", pallet_id=pallet, shipment_id=first, line_index=1, produce_name="Kiwi",
                  box_count=7)
    return {"org": org, "first": first, "second": second, "packing_list": packing_list, "pallet": pallet,
            "line": line}


@pytest.mark.parametrize("statement, key", [
    ("INSERT INTO packing_lines (pallet_id, shipment_id, line_index, produce_name) "
     "VALUES (%(pallet)s, %(second)s, 2, 'Mango')", "packing_lines_pallet_fkey"),
    ("UPDATE packing_lines SET shipment_id = %(second)s WHERE id = %(line)s", "packing_lines_pallet_fkey"),
    ("INSERT INTO pallets (shipment_id, packing_list_id, pallet_number) VALUES (%(second)s, %(packing_list)s, 'P2')",
     "pallets_packing_list_fkey"),
    ("UPDATE pallets SET shipment_id = %(second)s WHERE id = %(pallet)s", "pallets_packing_list_fkey"),
], ids=["line on another shipment's pallet", "line moved alone", "pallet on another shipment's list",
        "pallet moved alone"])
def test_a_row_that_would_count_for_another_shipment_is_refused(conn, two_shipments, statement, key):
    with pytest.raises(psycopg2.errors.ForeignKeyViolation, match=key):
        sql(conn, statement % two_shipments)


def test_a_packing_list_is_read_from_a_document_of_its_own_shipment(conn, two_shipments):
    org, first, second = two_shipments["org"], two_shipments["first"], two_shipments["second"]
    elsewhere = insert(conn, "documents", organization_id=org, shipment_id=second, type="packing_list",
                       filename="other.pdf")
    with pytest.raises(psycopg2.errors.ForeignKeyViolation, match="packing_lists_document_fkey"):
        insert(conn, "packing_lists", organization_id=org, shipment_id=first, document_id=elsewhere)
    own = insert(conn, "documents", organization_id=org, shipment_id=first, type="packing_list", filename="pl.pdf")
    sql(conn, "UPDATE packing_lists SET document_id = %s WHERE id = %s", own, two_shipments["packing_list"])
    with pytest.raises(psycopg2.errors.ForeignKeyViolation, match="packing_lists_document_fkey"):
        sql(conn, "UPDATE documents SET shipment_id = %s WHERE id = %s", second, own)
    # The document deleted: the packing list stays, on its shipment, read from no document.
    sql(conn, "DELETE FROM documents WHERE id = %s", own)
    with conn.cursor() as cur:
        cur.execute("SELECT shipment_id, document_id FROM packing_lists WHERE id = %s",
                    (two_shipments["packing_list"],))
        assert cur.fetchone() == {"shipment_id": first, "document_id": None}


def test_a_packing_list_moved_to_another_shipment_takes_its_pallets_and_lines(conn, two_shipments):
    loose = insert(conn, "pallets", shipment_id=two_shipments["first"], pallet_number="P9")
    sql(conn, "UPDATE packing_lists SET shipment_id = %s WHERE id = %s", two_shipments["second"],
        two_shipments["packing_list"])
    with conn.cursor() as cur:
        cur.execute("SELECT (SELECT shipment_id FROM pallets WHERE id = %s) AS pallet, "
                    "(SELECT shipment_id FROM packing_lines WHERE id = %s) AS line, "
                    "(SELECT shipment_id FROM pallets WHERE id = %s) AS loose",
                    (two_shipments["pallet"], two_shipments["line"], loose))
        assert cur.fetchone() == {"pallet": two_shipments["second"], "line": two_shipments["second"],
                                  "loose": two_shipments["first"]}
    kept = stored(conn)
    assert (kept[two_shipments["first"]]["cargo_boxes"], kept[two_shipments["second"]]["cargo_boxes"]) == (0, 7)
    assert exact(kept) == exact(from_scratch(conn))


def test_the_migration_names_the_rows_that_disagree(blank, tmp_path):
    url = blank("disagreeing")
    run_in_transaction(url, apply_first_migration)
    run_in_transaction(url, apply_migrations_through(11))

    def disagreeing_rows(conn):
        acme, other = make_org(conn, "acme"), make_org(conn, "other")
        first, second = make_shipment(conn, acme), make_shipment(conn, acme)
        packing_list = insert(conn, "packing_lists", organization_id=acme, shipment_id=first)
        pallet = insert(conn, "pallets", shipment_id=second, packing_list_id=packing_list, pallet_number="P1")
        line = insert(conn, "packing_lines", pallet_id=pallet, shipment_id=first, line_index=1, produce_name="Kiwi")
        document = insert(conn, "documents", organization_id=other, shipment_id=first, type="invoice",
                          filename="i.pdf")
        elsewhere = insert(conn, "documents", organization_id=acme, shipment_id=second, type="packing_list",
                           filename="pl.pdf")
        sql(conn, "UPDATE packing_lists SET document_id = %s WHERE id = %s", elsewhere, packing_list)
        return first, second, packing_list, pallet, line, document, elsewhere
    first, second, packing_list, pallet, line, document, elsewhere = run_in_transaction(url, disagreeing_rows)

    runner = make_app(url, STORAGE_DIR=str(tmp_path / "storage")).test_cli_runner()
    result = runner.invoke(args=["db", "upgrade"])
    assert (result.exit_code, result.output) == (1, (
        f"Error: 0012_writers_rows_agree was not applied: migration 12 stopped: 4 row(s) disagree with their "
        f"shipment: documents {document} (organization 2) belongs to shipment {first} of organization 1; "
        f"packing_lines {line} (shipment {first}) is on pallet {pallet} of shipment {second}; "
        f"packing_lists {packing_list} (shipment {first}) was read from document {elsewhere} of shipment {second}; "
        f"pallets {pallet} (shipment {second}) is on packing list {packing_list} of shipment {first}. "
        f"Give each row its pallet's, packing list's or shipment's shipment and organization (or delete it), "
        f"then run `flask --app app db upgrade` again.\n"))
    assert run_in_transaction(url, migrations.applied_versions) == list(range(1, 12))

    def fix(conn):
        sql(conn, "UPDATE pallets SET shipment_id = %s WHERE id = %s", first, pallet)
        sql(conn, "UPDATE documents SET organization_id = 1 WHERE id = %s", document)
        sql(conn, "UPDATE documents SET shipment_id = %s WHERE id = %s", first, elsewhere)
    run_in_transaction(url, fix)
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0 and result.output.startswith("applied 0012_writers_rows_agree")
