"""The outbox triggers: which changes make which events, coalesced per transaction."""
import psycopg2
import pytest

from delivery import signing
from models import db
from tests.support.databases import apply_schema
from tests.support.factories import insert, make_org, make_shipment


def _events(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT type, shipment_id, alert_id, previous_attributes, data_extra FROM events ORDER BY id")
        return cur.fetchall()


def _in_one_transaction(database_url, *statements):
    conn = db.connect(database_url)
    try:
        with conn, conn.cursor() as cur:
            for statement, params in statements:
                cur.execute(statement, params)
    finally:
        conn.close()


@pytest.fixture
def shipment(conn):
    org = make_org(conn, "acme")
    return org, make_shipment(conn, org, status="draft", eta="2026-11-01T10:00:00Z")


def test_status_change_makes_one_event(conn, shipment):
    _org, sid = shipment
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
    assert _events(conn) == [{"type": "shipment.status_changed", "shipment_id": sid, "alert_id": None,
                              "previous_attributes": {"status": "draft"}, "data_extra": {}}]


def test_several_changes_in_one_transaction_coalesce(database_url, conn, shipment):
    _org, sid = shipment
    update = "UPDATE shipments SET status = %s WHERE id = %s"
    _in_one_transaction(database_url, (update, ("validated", sid)), (update, ("in_transit", sid)),
                        (update, ("arrived", sid)))
    found = _events(conn)
    assert [(e["type"], e["previous_attributes"]) for e in found] == [
        ("shipment.status_changed", {"status": "draft"})]


def test_transaction_ending_where_it_began_makes_none(database_url, conn, shipment):
    _org, sid = shipment
    update = "UPDATE shipments SET status = %s WHERE id = %s"
    _in_one_transaction(database_url, (update, ("validated", sid)), (update, ("draft", sid)))
    eta = "UPDATE shipments SET eta = %s WHERE id = %s"
    _in_one_transaction(database_url, (eta, ("2026-12-01T00:00:00Z", sid)), (eta, ("2026-11-01T10:00:00Z", sid)))
    assert _events(conn) == []


def test_back_and_forth_then_away_again(database_url, conn, shipment):
    _org, sid = shipment
    update = "UPDATE shipments SET status = %s WHERE id = %s"
    _in_one_transaction(database_url, (update, ("validated", sid)), (update, ("draft", sid)),
                        (update, ("in_transit", sid)))
    assert [e["previous_attributes"] for e in _events(conn)] == [{"status": "draft"}]


def test_separate_transactions_make_separate_events(conn, shipment):
    _org, sid = shipment
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
        cur.execute("UPDATE shipments SET status = 'in_transit' WHERE id = %s", (sid,))
    assert [e["previous_attributes"] for e in _events(conn)] == [{"status": "draft"}, {"status": "validated"}]


def test_eta_change_only_for_eta(conn, shipment):
    _org, sid = shipment
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET predicted_eta = now(), notes = 'x' WHERE id = %s", (sid,))
        cur.execute("UPDATE shipments SET eta = NULL WHERE id = %s", (sid,))
        cur.execute("UPDATE shipments SET eta = '2026-11-03T08:30:00Z' WHERE id = %s", (sid,))
    assert [(e["type"], e["previous_attributes"]) for e in _events(conn)] == [
        ("shipment.eta_changed", {"eta": "2026-11-01T10:00:00Z"}),
        ("shipment.eta_changed", {"eta": None}),
    ]


def test_effective_eta_from_containers_sends_nothing(conn):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org)
    insert(conn, "containers", organization_id=org, shipment_id=sid, eta="2026-11-01T00:00:00Z")
    with conn.cursor() as cur:
        cur.execute("UPDATE containers SET eta = '2026-11-05T00:00:00Z'")
        cur.execute("SELECT effective_eta FROM shipments")
        assert cur.fetchone()["effective_eta"] is not None
    assert _events(conn) == []


@pytest.mark.parametrize("hidden", ["awaiting_approval", "owned_elsewhere"])
def test_hidden_shipments_send_nothing(conn, hidden):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org, **{hidden: True})
    with conn.cursor() as cur:
        cur.execute("INSERT INTO alert_kinds (key, \"group\") VALUES ('eta_drift', 'schedule')")
        cur.execute("UPDATE shipments SET status = 'validated', eta = now() WHERE id = %s", (sid,))
        cur.execute("INSERT INTO alerts (organization_id, shipment_id, key, title) VALUES (%s, %s, 'eta_drift', 't')",
                    (org, sid))
        cur.execute("INSERT INTO check_runs (organization_id, shipment_id, finished_at) VALUES (%s, %s, now())",
                    (org, sid))
    assert _events(conn) == []


def test_approval_and_status_change_together_send_the_event(conn):
    org = make_org(conn, "acme")
    sid = make_shipment(conn, org, awaiting_approval=True)
    with conn.cursor() as cur:
        cur.execute("UPDATE shipments SET awaiting_approval = false, status = 'validated' WHERE id = %s", (sid,))
    assert [e["type"] for e in _events(conn)] == ["shipment.status_changed"]


def test_checks_completed_when_run_finishes(conn, shipment):
    org, sid = shipment
    run = insert(conn, "check_runs", organization_id=org, shipment_id=sid)
    for key, category, status in [("has_invoice", "documents", "passed"), ("weights", "cargo", "failed"),
                                  ("temp", "cargo", "warning")]:
        insert(conn, "checks", organization_id=org, shipment_id=sid, check_run_id=run, key=key,
               category=category, status=status, title=key)
    assert _events(conn) == []
    with conn.cursor() as cur:
        cur.execute("UPDATE check_runs SET finished_at = now() WHERE id = %s", (run,))
        cur.execute("UPDATE check_runs SET finished_at = now() + interval '1 minute' WHERE id = %s", (run,))
    (event,) = _events(conn)
    assert event["type"] == "shipment.checks_completed"
    assert event["previous_attributes"] is None
    assert event["data_extra"]["checks"]["summary"] == {"total": 3, "passed": 1, "failed": 1, "warnings": 1,
                                                         "skipped": 0, "pending": 0}
    assert event["data_extra"]["checks"]["results"] == [
        {"check_type": "documents", "key": "has_invoice", "status": "passed"},
        {"check_type": "cargo", "key": "weights", "status": "failed"},
        {"check_type": "cargo", "key": "temp", "status": "warning"},
    ]


def test_alert_created_only_for_customer_visible_kinds(conn, shipment):
    org, sid = shipment
    with conn.cursor() as cur:
        cur.execute("INSERT INTO alert_kinds (key, \"group\", customer_visible) "
                    "VALUES ('eta_drift', 'schedule', true), ('ops_note', 'internal', false)")
    visible = insert(conn, "alerts", organization_id=org, shipment_id=sid, key="eta_drift", title="ETA drift")
    insert(conn, "alerts", organization_id=org, shipment_id=sid, key="ops_note", title="internal")
    assert [(e["type"], e["alert_id"]) for e in _events(conn)] == [("alert.created", visible)]


def test_rollback_leaves_no_event(database_url, conn, shipment):
    _org, sid = shipment
    other = db.connect(database_url)
    with other.cursor() as cur:
        cur.execute("UPDATE shipments SET status = 'validated' WHERE id = %s", (sid,))
    other.rollback()
    other.close()
    assert _events(conn) == []


def test_schema_applies_twice(conn):
    apply_schema(conn)
    apply_schema(conn)


def test_at_most_five_endpoints_in_the_database(conn):
    org = make_org(conn, "acme")
    row = {"organization_id": org, "url": "https://example.com/", "event_types": ["alert.created"],
           "secret": signing.new_secret()}
    for _ in range(5):
        insert(conn, "webhook_endpoints", **row)
    with pytest.raises(psycopg2.errors.CheckViolation):
        insert(conn, "webhook_endpoints", **row)
