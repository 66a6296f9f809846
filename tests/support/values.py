"""Values no reader can show: the columns schema.sql holds to is_api_timestamp and is_api_number, a row of
each table that has them, and a database without those rules, as one whose rows were stored before them."""
from contextlib import contextmanager

from tests.support.factories import insert, make_shipment

# The application's columns held to is_api_timestamp, by table (docs/writing-data.md, "Values every reader
# can show"); their CHECKs are named <table>_<column>_is_api_timestamp.
TIMESTAMPS = {
    "shipments": ["archived_at", "validated_at", "approved_at", "etd", "eta", "original_eta",
                  "predicted_eta", "last_tracked_at", "carrier_updated_at", "forwarder_eta", "created_at",
                  "updated_at"],
    "containers": ["etd", "eta", "created_at"],
    "shipment_legs": ["etd", "eta"],
    "tracking_events": ["occurred_at", "created_at"],
    "eta_revisions": ["observed_at", "previous_eta", "new_eta"],
    "documents": ["created_at", "updated_at"],
    "document_data": ["extracted_at"],
    "arrival_notices": ["received_at"],
    "packing_lists": ["created_at"],
    "alerts": ["since", "first_detected_at", "last_detected_at", "resolved_at"],
    "check_runs": ["started_at", "finished_at"],
    "checks": ["ran_at"],
}
# ... and to is_api_number (<table>_<column>_is_api_number).
NUMBERS = {
    "shipments": ["temperature_celsius"],
    "containers": ["temperature_celsius"],
    "packing_lists": ["declared_net_weight_kg"],
    "packing_lines": ["box_weight_kg", "net_weight_kg", "gross_weight_kg"],
}
# What the API writes for a stored timestamp outside the rule: the nearest end of the rule's range.
LATEST, EARLIEST = "9999-12-30T23:59:59Z", "0001-01-02T00:00:00Z"


def one_of_each(conn, org):
    """A row of every table with such columns, all of one new shipment: {table: the row's key}."""
    shipment = make_shipment(conn, org)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO alert_kinds (key, \"group\") VALUES ('late', 'eta') ON CONFLICT DO NOTHING")
    document = insert(conn, "documents", organization_id=org, shipment_id=shipment, type="packing_list",
                      filename="pl.pdf")
    packing_list = insert(conn, "packing_lists", organization_id=org, shipment_id=shipment, document_id=document)
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P1")
    check_run = insert(conn, "check_runs", organization_id=org, shipment_id=shipment)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO document_data (document_id) VALUES (%s)", (document,))
    return {
        "shipments": shipment,
        "containers": insert(conn, "containers", organization_id=org, shipment_id=shipment),
        "shipment_legs": insert(conn, "shipment_legs", shipment_id=shipment, position=0),
        "tracking_events": insert(conn, "tracking_events", shipment_id=shipment, milestone="departed"),
        "eta_revisions": insert(conn, "eta_revisions", shipment_id=shipment, new_eta="2026-03-01T00:00:00Z",
                                previous_eta="2026-02-28T00:00:00Z", backfilled=True),
        "documents": document,
        "document_data": document,
        "arrival_notices": insert(conn, "arrival_notices", shipment_id=shipment),
        "packing_lists": packing_list,
        "packing_lines": insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=1,
                                produce_name="Kiwi"),
        "alerts": insert(conn, "alerts", organization_id=org, shipment_id=shipment, key="late", title="Late"),
        "check_runs": check_run,
        "checks": insert(conn, "checks", organization_id=org, shipment_id=shipment, check_run_id=check_run,
                         key="k", category="c", title="T"),
    }


def key_column(table):
    """The column naming a row of `table`."""
    return "document_id" if table == "document_data" else "id"


@contextmanager
def without_value_rules(conn):
    """The database without its is_api_timestamp and is_api_number CHECKs inside the block, as one whose rows
    were stored before them; the shipments written meanwhile (and all that hangs off them) are deleted before
    the rules come back. Harmless where the rules do not exist."""
    with conn.cursor() as cur:
        cur.execute("SELECT conrelid::regclass::text AS tab, conname, pg_get_constraintdef(oid) AS rule "
                    "FROM pg_constraint WHERE conname ~ '_is_api_(timestamp|number)$' ORDER BY conname")
        rules = cur.fetchall()
        for rule in rules:
            cur.execute(f"ALTER TABLE {rule['tab']} DROP CONSTRAINT {rule['conname']}")
    try:
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM shipments")
            for rule in rules:
                cur.execute(f"ALTER TABLE {rule['tab']} ADD CONSTRAINT {rule['conname']} {rule['rule']}")
