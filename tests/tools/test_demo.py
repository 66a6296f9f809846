"""`flask demo seed`: the demo data holds every state, enum value and edge the spec names."""
from datetime import datetime, timezone
from pathlib import Path

import pytest

from models import db, free_time_queries
from tests.support import factories
from tests.support.databases import DEMO_TOKEN_NAME


@pytest.fixture
def seeded(demo_database):
    """The app over the demo database (300 shipments, seeded once per session)."""
    return demo_database.app


@pytest.fixture
def conn(demo_database):
    """A connection to the demo database."""
    connection = db.connect(demo_database.url)
    connection.autocommit = True
    yield connection
    connection.close()


def scalar(conn, statement, **params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return list(cur.fetchone().values())[0]


def values(conn, statement):
    with conn.cursor() as cur:
        cur.execute(statement)
        return {list(row.values())[0] for row in cur.fetchall()}


ACME = "(SELECT id FROM organizations WHERE slug = 'acme')"
ACME_SHIPMENTS = f"(SELECT id FROM shipments WHERE organization_id = {ACME})"

# (column query over acme's rows, values that must all appear)
ENUMS = [
    (f"SELECT status FROM shipments WHERE organization_id = {ACME}",
     {"draft", "validated", "in_transit", "arrived", "error", "in_warehouse"}),
    (f"SELECT tracking_state FROM shipments WHERE organization_id = {ACME}",
     {"available", "unavailable", "pending", "not_started", "awaiting_reference", "none"}),
    (f"SELECT unavailable_reason FROM shipments WHERE organization_id = {ACME}",
     {"unsupported_carrier", "invalid_reference", "not_found", "provider_error", "past_voyage", None}),
    (f"SELECT halted_reason FROM shipments WHERE organization_id = {ACME}", {"errored", "dropped", None}),
    (f"SELECT transport_reference_type FROM shipments WHERE organization_id = {ACME}",
     {"container", "awb", "bill_of_lading", None}),
    (f"SELECT transport_type FROM shipments WHERE organization_id = {ACME}", {"ocean", "air", "road"}),
    (f"SELECT cargo_type FROM shipments WHERE organization_id = {ACME}", {"ambient", "reefer", "frozen", None}),
    (f"SELECT color FROM labels WHERE organization_id = {ACME}",
     {"gray", "red", "orange", "amber", "green", "teal", "blue", "indigo", "purple", "pink", None}),
    (f"SELECT status FROM checks WHERE organization_id = {ACME}",
     {"pending", "passed", "failed", "skipped", "warning"}),
    (f"SELECT record_kind FROM documents WHERE organization_id = {ACME}",
     {"current", "replaced", "reference_only", "page_split"}),
    (f"SELECT scan_state FROM documents WHERE organization_id = {ACME}", {"scanning", "clean", "blocked", None}),
    (f"SELECT parse_status FROM documents WHERE organization_id = {ACME}", {"parsed", "pending", "failed"}),
    (f"SELECT milestone FROM tracking_events WHERE shipment_id IN {ACME_SHIPMENTS}",
     {"booked", "empty_pickup", "gate_in", "loaded", "departed", "transshipment_arrival",
      "transshipment_discharge", "transshipment_load", "transshipment_departure", "arrived", "discharged",
      "customs_cleared", "available_for_pickup", "gate_out", "delivered", "empty_return",
      "received_from_shipper", "manifested", "transferred", "notified", "eta_revised", "untracked"}),
    (f"SELECT k.customer_visible FROM alerts a JOIN alert_kinds k ON k.key = a.key WHERE a.organization_id = {ACME}",
     {True, False}),
    (f"SELECT k.\"group\" FROM alerts a JOIN alert_kinds k ON k.key = a.key WHERE a.organization_id = {ACME}",
     {"schedule", "documents", "free_time", "internal"}),
    (f"SELECT free_days_basis FROM carrier_terms WHERE organization_id = {ACME}", {"calendar", "working"}),
]


@pytest.mark.parametrize("statement, expected", ENUMS, ids=[e[0].split()[1] for e in ENUMS])
def test_every_value_appears(seeded, conn, statement, expected):
    assert expected <= values(conn, statement)


# Edges: a count query over acme that must be positive.
EDGES = {
    "archived": "SELECT count(*) FROM shipments WHERE organization_id = {acme} "
                "AND archived AND archived_at IS NOT NULL",
    "awaiting approval": "SELECT count(*) FROM shipments WHERE organization_id = {acme} AND awaiting_approval",
    "someone else's": "SELECT count(*) FROM shipments WHERE organization_id = {acme} AND owned_elsewhere",
    "no eta at all": "SELECT count(*) FROM shipments WHERE organization_id = {acme} AND effective_eta IS NULL",
    "container-only eta": "SELECT count(*) FROM shipments WHERE organization_id = {acme} "
                          "AND eta IS NULL AND effective_eta IS NOT NULL",
    "predicted eta": "SELECT count(*) FROM shipments WHERE organization_id = {acme} AND predicted_eta IS NOT NULL",
    "generated reference": "SELECT count(*) FROM shipments WHERE organization_id = {acme} "
                           "AND reference ~ '^SHIP-[0-9]{{8}}-[A-Z0-9]{{4}}$'",
    "person-set reference": "SELECT count(*) FROM shipments WHERE organization_id = {acme} AND reference !~ '^SHIP-'",
    "multi-leg route": "SELECT count(*) FROM (SELECT shipment_id FROM shipment_legs WHERE shipment_id IN {ships} "
                       "GROUP BY 1 HAVING count(*) >= 3) m",
    "second vessel leg": "SELECT count(*) FROM tracking_events WHERE shipment_id IN {ships} AND leg_index = 2",
    "estimate without time": "SELECT count(*) FROM tracking_events WHERE shipment_id IN {ships} "
                             "AND NOT actual AND occurred_at IS NULL",
    "estimate with time": "SELECT count(*) FROM tracking_events WHERE shipment_id IN {ships} "
                          "AND NOT actual AND occurred_at IS NOT NULL",
    "local offsets": "SELECT count(*) FROM tracking_events WHERE shipment_id IN {ships} "
                     "AND occurred_at_offset_minutes IS NOT NULL",
    "flight numbers": "SELECT count(*) FROM tracking_events WHERE shipment_id IN {ships} AND flight_number IS NOT NULL",
    "eta history": "SELECT count(*) FROM (SELECT shipment_id FROM eta_revisions WHERE shipment_id IN {ships} "
                   "GROUP BY 1 HAVING count(*) >= 4) m",
    "backfilled revisions": "SELECT count(*) FROM eta_revisions WHERE shipment_id IN {ships} AND backfilled",
    "revision by the trigger": "SELECT count(*) FROM eta_revisions WHERE shipment_id IN {ships} "
                               "AND NOT first_estimate AND slip_seconds = 21780",
    "shipment free days": "SELECT count(*) FROM shipments WHERE organization_id = {acme} "
                          "AND demurrage_free_days IS NOT NULL",
    "two arrival notices": "SELECT count(*) FROM (SELECT shipment_id FROM arrival_notices "
                           "WHERE shipment_id IN {ships} GROUP BY 1 HAVING count(*) > 1) m",
    "replaced packing list": "SELECT count(*) FROM packing_lists WHERE organization_id = {acme} AND NOT is_current",
    "pallet on no packing list": "SELECT count(*) FROM pallets WHERE shipment_id IN {ships} "
                                 "AND packing_list_id IS NULL",
    "organic lines": "SELECT count(*) FROM packing_lines WHERE shipment_id IN {ships} AND organic",
    "document without file": "SELECT count(*) FROM documents WHERE organization_id = {acme} AND storage_key IS NULL",
    "empty extracted data": "SELECT count(*) FROM document_data d JOIN documents o ON o.id = d.document_id "
                            "WHERE o.organization_id = {acme} AND d.fields = '{{}}'",
    "packing list data": "SELECT count(*) FROM document_data d JOIN documents o ON o.id = d.document_id "
                         "WHERE o.organization_id = {acme} AND d.schema = 'packing_list' "
                         "AND d.fields ? 'line_items' AND d.fields ? 'diagram_pallet_numbers'",
    "open alerts": "SELECT count(*) FROM alerts WHERE organization_id = {acme} AND resolved_at IS NULL",
    "resolved alerts": "SELECT count(*) FROM alerts WHERE organization_id = {acme} AND resolved_at IS NOT NULL",
    "unfinished check run": "SELECT count(*) FROM check_runs WHERE organization_id = {acme} AND finished_at IS NULL",
    "finished check run": "SELECT count(*) FROM check_runs WHERE organization_id = {acme} "
                          "AND finished_at IS NOT NULL",
    "40 pallets and 400 lines": "SELECT count(*) FROM (SELECT l.shipment_id FROM packing_lines l "
                                "WHERE l.shipment_id IN {ships} GROUP BY 1 HAVING count(*) = 400 "
                                "AND count(DISTINCT l.pallet_id) = 40) m",
    "produce aliases": "SELECT count(*) FROM produce_aliases WHERE (alias, produce_name) IN "
                       "(('aguacate', 'Avocado'), ('clementine', 'Mandarin'), ('kiwi', 'Kiwifruit'), "
                       "('palta', 'Avocado'))",
}


@pytest.mark.parametrize("name", EDGES)
def test_every_edge_appears(seeded, conn, name):
    assert scalar(conn, EDGES[name].format(acme=ACME, ships=ACME_SHIPMENTS)) > 0


def test_organizations_members_and_sizes(seeded, conn):
    members = values(conn, """
        SELECT o.slug || ' ' || u.email || ' ' || m.role FROM memberships m
          JOIN organizations o ON o.id = m.organization_id JOIN users u ON u.id = m.user_id""")
    assert members == {f"{slug} {role}@{slug}.example {role}"
                       for slug in ("acme", "globex") for role in ("owner", "admin", "member")}
    assert scalar(conn, f"SELECT count(*) FROM shipments WHERE organization_id = {ACME}") == 300
    assert scalar(conn, "SELECT count(*) FROM shipments s JOIN organizations o ON o.id = s.organization_id "
                        "WHERE o.slug = 'globex'") == 40
    # The seed makes no token; the test suite adds one (conftest.DEMO_TOKEN_NAME).
    assert scalar(conn, "SELECT count(*) FROM tokens WHERE name <> %(ours)s", ours=DEMO_TOKEN_NAME) == 0
    assert scalar(conn, "SELECT count(*) FROM containers WHERE number !~ '^[A-Z]{3}U[0-9]{7}$'") == 0


def test_files_are_written_under_storage_dir(seeded, conn):
    storage = Path(seeded.config["STORAGE_DIR"])
    with conn.cursor() as cur:
        cur.execute("SELECT storage_key, byte_size, content_type FROM documents WHERE storage_key IS NOT NULL")
        rows = cur.fetchall()
    assert rows
    for row in rows:
        content = (storage / row["storage_key"]).read_bytes()
        assert len(content) == row["byte_size"]
        if row["content_type"] == "application/pdf":
            assert content.startswith(b"%PDF-1.4") and content.rstrip().endswith(b"%%EOF")


def test_free_time_situations(seeded, conn):
    """Through the API: clocks in every situation, each source of free days, at-risk shipments due and overdue."""
    token = factories.make_token(conn, scalar(conn, ACME))
    client = seeded.test_client()
    summaries = []
    ocean = values(conn, f"SELECT id FROM shipments WHERE organization_id = {ACME} AND transport_type = 'ocean' "
                         "AND NOT awaiting_approval AND NOT owned_elsewhere")
    for shipment_id in ocean:
        response = client.get(f"/shipments/shp_{shipment_id}/free_time", headers=factories.auth(token))
        assert response.status_code == 200
        summaries.append(response.get_json())
    clocks = [c for s in summaries for c in s["demurrage"] + s["detention"]]
    assert {("demurrage", "not_started"), ("demurrage", "running"), ("demurrage", "stopped"),
            ("detention", "running")} <= {(c["kind"], c["state"]) for c in clocks}
    assert {"shipment", "arrival_notice", "carrier"} <= {c["free_days_source"] for c in clocks}
    assert any(s["terms_unknown"] for s in summaries)
    running = {c["days_left"] for c in clocks
               if c["kind"] == "demurrage" and c["ended_on"] is None and c["days_left"] is not None}
    assert {5, 2, 1, 0} <= running and min(running) < 0
    at_risk = client.get("/free_time/at_risk", headers=factories.auth(token)).get_json()["data"]
    left = [s["active_clock"]["days_left"] for s in at_risk]
    assert {2, 1, 0} <= set(left) and min(left) < 0


def test_seed_twice_and_reset(app, database_url):
    """A second seed leaves the demo alone; --reset recreates it (here smaller)."""
    runner = app.test_cli_runner()
    for args in (["--shipments", "30"], ["--shipments", "30"], ["--shipments", "20", "--reset"]):
        result = runner.invoke(args=["demo", "seed", "--globex-shipments", "5", *args])
        assert result.exit_code == 0, result.output
    connection = db.connect(database_url)
    try:
        assert scalar(connection, f"SELECT count(*) FROM shipments WHERE organization_id = {ACME}") == 20
        assert scalar(connection, "SELECT count(*) FROM organizations") == 2
        # History loaded by the seed is not news; only the live ETA change after loading is an event.
        assert scalar(connection, "SELECT count(*) FROM events WHERE type <> 'shipment.eta_changed'") == 0
        assert scalar(connection, "SELECT count(*) FROM events") == 1
    finally:
        connection.close()


def test_second_seed_says_it_left_the_data(app):
    runner = app.test_cli_runner()
    runner.invoke(args=["demo", "seed", "--shipments", "5", "--globex-shipments", "0"])
    again = runner.invoke(args=["demo", "seed", "--shipments", "5", "--globex-shipments", "0"])
    assert again.exit_code == 0, again.output
    assert "acme: already exists, left unchanged" in again.output


def test_same_data_whatever_the_number_of_workers(app, database_url):
    """Two batches loaded by one process or by two worker processes give the same shipments."""
    runner = app.test_cli_runner()
    digests = []
    for workers in ("1", "2"):
        result = runner.invoke(args=["demo", "seed", "--shipments", "150", "--globex-shipments", "0", "--batch-size",
                                     "50", "--workers", workers, "--reset", "--now", "2026-03-01T12:00"])
        assert result.exit_code == 0, result.output
        connection = db.connect(database_url)
        try:
            digests.append(scalar(connection, """
                SELECT md5(string_agg(line, ',' ORDER BY line)) FROM (
                  SELECT concat_ws('|', s.erp_reference, s.transport_reference, s.status, s.eta, s.created_at,
                                   (SELECT count(*) FROM packing_lines l WHERE l.shipment_id = s.id)) AS line
                    FROM shipments s) lines"""))
        finally:
            connection.close()
    assert digests[0] == digests[1]


@pytest.mark.parametrize("now", ["2026-03-01T23:30", "2026-03-02T00:30"])
def test_free_time_showcase_holds_when_the_port_s_day_is_not_utc_s(app, database_url, now):
    """The showcase pins its clocks to today at the port of discharge (UTC+1 for the demo's ports), where
    the engine counts days: at 23:30 UTC that is already tomorrow, and the days left are still the ones
    the showcase names (they were one off for an hour every night)."""
    result = app.test_cli_runner().invoke(args=[
        "demo", "seed", "--shipments", "60", "--globex-shipments", "10", "--workers", "1", "--now", now])
    assert result.exit_code == 0, result.output
    at = datetime.fromisoformat(now).replace(tzinfo=timezone.utc)
    connection = db.connect(database_url)
    try:
        org = scalar(connection, ACME)
        ocean = values(connection, f"SELECT id FROM shipments WHERE organization_id = {org} "
                                   "AND transport_type = 'ocean' AND NOT awaiting_approval AND NOT owned_elsewhere")
        summaries = [free_time_queries.get_free_time(connection, org, shipment_id, now=at) for shipment_id in ocean]
    finally:
        connection.close()
    running = {c["days_left"] for s in summaries for c in s["demurrage"]
               if c["ended_on"] is None and c["days_left"] is not None}
    assert {5, 4, 2, 1, 0, -1, -3} <= running
    detention = {c["days_left"] for s in summaries for c in s["detention"]
                 if c["ended_on"] is None and c["days_left"] is not None}
    assert {3, -2} <= detention
