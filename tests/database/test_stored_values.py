"""Values every reader can show: the database refuses, for every writer, a timestamp or number the API could
not write (schema.sql, is_api_timestamp and is_api_number), and migration 21 names those already stored."""
import psycopg2
import pytest

from models import migrations
from tests.support.apps import make_app
from tests.support.factories import insert, make_org
from tests.support.migrations import apply_first_migration, apply_migrations_through, run_in_transaction
from tests.support.values import NUMBERS, TIMESTAMPS, key_column, one_of_each

# Timestamps no reader can show: Python's datetime holds none of them, JSON's ISO 8601 needs a four-digit year,
# and a local offset of up to 18 hours must keep it.
REFUSED_TIMESTAMPS = ["infinity", "-infinity", "9999-12-31 23:00-05", "10000-01-01 00:00Z", "0044-03-15 BC",
                      "0001-01-01 23:59:59.999999Z", "9999-12-31 00:00Z"]
SHOWN_TIMESTAMPS = ["0001-01-02 00:00Z", "9999-12-30 23:59:59.999999Z", "2026-03-01 10:00+02"]
COLUMNS = [(table, column) for table, columns in TIMESTAMPS.items() for column in columns]
NUMBER_COLUMNS = [(table, column) for table, columns in NUMBERS.items() for column in columns]


@pytest.fixture
def rows(conn):
    return one_of_each(conn, make_org(conn, "acme"))


def write(conn, table, key, column, value):
    # A shipment keeps the archived_at its writer gives only while it is archived.
    also = ", archived = true" if column == "archived_at" else ""
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {table} SET {column} = %s{also} WHERE {key_column(table)} = %s", (value, key))


@pytest.mark.parametrize("value", REFUSED_TIMESTAMPS)
@pytest.mark.parametrize("table, column", COLUMNS)
def test_a_timestamp_no_reader_can_show_is_refused_with_its_columns_name(conn, rows, table, column, value):
    if column in ("previous_eta", "new_eta") and value.endswith("infinity"):
        # Its generated slip_seconds (new_eta - previous_eta) refuses an infinity before any CHECK runs: in the
        # subtraction up to PostgreSQL 16, in the cast of an infinite interval to bigint from 17 (the embedded one).
        with pytest.raises((psycopg2.errors.DatetimeFieldOverflow, psycopg2.errors.FeatureNotSupported),
                           match="cannot subtract infinite timestamps|cannot convert infinity to bigint"):
            write(conn, table, rows[table], column, value)
        return
    with pytest.raises(psycopg2.errors.CheckViolation, match=f'"{table}_{column}_is_api_timestamp"'):
        write(conn, table, rows[table], column, value)


@pytest.mark.parametrize("value", SHOWN_TIMESTAMPS)
@pytest.mark.parametrize("table, column", COLUMNS)
def test_the_ends_of_the_range_are_kept(conn, rows, table, column, value):
    write(conn, table, rows[table], column, value)


@pytest.mark.parametrize("table, column", NUMBER_COLUMNS)
def test_nan_is_refused_with_its_columns_name(conn, rows, table, column):
    with pytest.raises(psycopg2.errors.CheckViolation, match=f'"{table}_{column}_is_api_number"'):
        write(conn, table, rows[table], column, "NaN")
    # An infinity does not fit any of these columns' precision.
    with pytest.raises(psycopg2.errors.NumericValueOutOfRange):
        write(conn, table, rows[table], column, "Infinity")


def test_every_timestamp_and_number_of_the_applications_tables_has_a_rule(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT table_name AS tab, column_name AS col, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND data_type IN ('timestamp with time zone', "
                    "'timestamp without time zone', 'date', 'numeric', 'double precision', 'real') "
                    "AND table_name = ANY(%s) ORDER BY 1, 2", (APPLICATION_TABLES,))
        found = [(row["tab"], row["col"]) for row in cur.fetchall()]
    # The database's own sums of the lines and earliest eta hold only values of held columns; latitude and
    # longitude have had their range from the start.
    assert sorted(set(found) - set(COLUMNS) - set(NUMBER_COLUMNS)) == [
        ("shipments", "cargo_gross_weight_kg"), ("shipments", "cargo_net_weight_kg"), ("shipments", "effective_eta"),
        ("tracking_events", "latitude"), ("tracking_events", "longitude")]
    assert set(COLUMNS) | set(NUMBER_COLUMNS) <= set(found)


# docs/writing-data.md, "Who writes what".
APPLICATION_TABLES = ["shipments", "containers", "shipment_legs", "tracking_events", "labels", "shipment_labels",
                      "documents", "document_data", "arrival_notices", "carrier_terms", "packing_lists", "pallets",
                      "packing_lines", "alerts", "alert_kinds", "check_runs", "checks", "produce_aliases",
                      "eta_revisions"]


@pytest.mark.parametrize("secret, kept", [
    ("whsec_A", False), ("whsec_", False), ("whsec_AAAA", False), ("whsec_" + "A" * 31 + "=", False),
    ("whsec_" + "A" * 32 + "$", False), ("whsec_" + "A" * 32, True), ("whsec_" + "A" * 86 + "==", True),
    ("whsec_" + "A" * 88, False), ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", True),
    ("fernet:gAAAAABk", True), ("fernet:", False)])
def test_an_endpoint_secret_is_whsec_and_the_base64_of_24_to_64_bytes(conn, secret, kept):
    row = {"organization_id": make_org(conn, "acme"), "url": "https://example.com/",
           "event_types": ["alert.created"], "secret": secret}
    if kept:
        insert(conn, "webhook_endpoints", **row)
    else:
        with pytest.raises(psycopg2.errors.CheckViolation, match="webhook_endpoints_secret_check"):
            insert(conn, "webhook_endpoints", **row)


def test_the_migration_names_the_values_no_reader_can_show(blank, tmp_path):
    url = blank("unshowable")
    run_in_transaction(url, apply_first_migration)
    run_in_transaction(url, apply_migrations_through(20))

    def unshowable(conn):
        org = make_org(conn, "acme")
        rows = one_of_each(conn, org)
        write(conn, "shipments", rows["shipments"], "forwarder_eta", "9999-12-31 23:00-05")
        write(conn, "shipments", rows["shipments"], "temperature_celsius", "NaN")
        write(conn, "alerts", rows["alerts"], "since", "0044-03-15 00:00Z BC")
        endpoint = insert(conn, "webhook_endpoints", organization_id=org, url="https://example.com/",
                          event_types=["alert.created"], secret="whsec_A")
        return rows, endpoint
    rows, endpoint = run_in_transaction(url, unshowable)

    runner = make_app(url, STORAGE_DIR=str(tmp_path / "storage")).test_cli_runner()
    result = runner.invoke(args=["db", "upgrade"])
    assert (result.exit_code, result.output) == (1, (
        f"Error: 0021_values_every_reader_can_show was not applied: migration 21 stopped: 4 stored value(s) that no "
        f"reader can show: alerts {rows['alerts']} since = 0044-03-15 00:00:00+00 BC; "
        f"shipments {rows['shipments']} forwarder_eta = 10000-01-01 04:00:00+00; "
        f"shipments {rows['shipments']} temperature_celsius = NaN; "
        f"webhook_endpoints {endpoint} secret is not whsec_ and the base64 of 24 to 64 bytes. "
        f"Give each a value the API can write (a timestamp of years 1 to 9999 in UTC, a number, or null where the "
        f"column allows it) and each endpoint named a new secret (`flask --app app webhooks roll-secret`), then run "
        f"`flask --app app db upgrade` again (docs/writing-data.md).\n"))
    assert run_in_transaction(url, migrations.applied_versions) == list(range(1, 21))

    def fix(conn):
        write(conn, "shipments", rows["shipments"], "forwarder_eta", None)
        write(conn, "shipments", rows["shipments"], "temperature_celsius", None)
        write(conn, "alerts", rows["alerts"], "since", "2026-03-01 00:00Z")
        write(conn, "webhook_endpoints", endpoint, "secret", "whsec_" + "A" * 32)
    run_in_transaction(url, fix)
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("applied 0021_values_every_reader_can_show"), result.output  # and any later
    with pytest.raises(psycopg2.errors.CheckViolation, match="shipments_forwarder_eta_is_api_timestamp"):
        run_in_transaction(url, lambda conn: write(conn, "shipments", rows["shipments"], "forwarder_eta", "infinity"))
