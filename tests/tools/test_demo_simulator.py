"""`flask demo simulate`: its writes are the application's, and the database turns them into events and changes."""
from datetime import datetime, timezone

import pytest

from delivery.outbox import render_pending
from demo import simulator
from models import db


class LastChoice:
    """A stand-in for random.Random that always takes the last option and the largest number."""

    def choice(self, options):
        return options[-1]

    def randint(self, _low, high):
        return high


@pytest.fixture
def acme(app, conn):
    """acme seeded small (60 shipments); its id."""
    result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "60", "--globex-shipments", "0",
                                                "--workers", "1"])
    assert result.exit_code == 0, result.output
    with conn.cursor() as cur:
        cur.execute("SELECT id FROM organizations WHERE slug = 'acme'")
        return cur.fetchone()["id"]


def rows(conn, statement, **params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall()


def test_a_step_makes_every_kind_of_event_and_moves_the_feed(database_url, conn, acme):
    before = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
    revisions = {row["id"]: row["revision"] for row in rows(conn, "SELECT id, revision FROM shipments")}
    work = db.connect(database_url)
    try:
        lines = list(simulator.step(work, acme, LastChoice()))
    finally:
        work.close()
    assert [line.split(" ")[1] for line in lines] == ["status", "eta", "checks"]
    assert lines[1].endswith(", alert eta_drift") and " +540 min -> " in lines[1]
    assert lines[2].endswith(" consignee_matches failed")
    changed = {int(line.split(" ")[0].removeprefix("shp_")) for line in lines}
    events = rows(conn, "SELECT type, shipment_id, previous_attributes FROM events WHERE id > %(id)s ORDER BY id",
                  id=before)
    assert sorted(event["type"] for event in events) == ["alert.created", "shipment.checks_completed",
                                                         "shipment.eta_changed", "shipment.status_changed"]
    assert {event["shipment_id"] for event in events} == changed
    status_from, status_to = lines[0].split(" ")[2], lines[0].split(" ")[4]
    assert [e["previous_attributes"] for e in events if e["type"] == "shipment.status_changed"] \
        == [{"status": status_from}]
    assert rows(conn, "SELECT status FROM shipments WHERE id = %(id)s",
                id=int(lines[0].split(" ")[0][4:]))[0]["status"] == status_to
    # The database wrote the ETA revision and raised each changed shipment's revision (GET /changes).
    eta_shipment = int(lines[1].split(" ")[0][4:])
    assert rows(conn, "SELECT slip_seconds FROM eta_revisions WHERE shipment_id = %(id)s AND NOT backfilled "
                      "ORDER BY id DESC LIMIT 1", id=eta_shipment)[0]["slip_seconds"] == 540 * 60
    after = {row["id"]: row["revision"] for row in rows(conn, "SELECT id, revision FROM shipments")}
    assert {shipment for shipment in after if after[shipment] > revisions[shipment]} == changed
    # Every event renders as the API would show it.
    conn.autocommit = False
    render_pending(conn, datetime.now(timezone.utc))
    conn.commit()
    conn.autocommit = True
    assert {row["state"] for row in rows(conn, "SELECT state FROM events WHERE id > %(id)s", id=before)} \
        == {"rendered"}


def test_old_alerts_are_resolved_and_new_drafts_come_when_nothing_can_move(database_url, conn, acme):
    rows(conn, "UPDATE shipments SET status = 'in_warehouse' WHERE organization_id = %(org)s RETURNING id", org=acme)
    open_alerts = rows(conn, "SELECT id FROM alerts WHERE organization_id = %(org)s AND resolved_at IS NULL "
                             "ORDER BY id", org=acme)
    for _ in range(simulator.OPEN_ALERTS_KEPT + 1 - len(open_alerts)):
        rows(conn, "INSERT INTO alerts (organization_id, shipment_id, key, title) SELECT organization_id, id, "
                   "'eta_drift', 'ETA moved' FROM shipments WHERE organization_id = %(org)s LIMIT 1 RETURNING id",
             org=acme)
    oldest = rows(conn, "SELECT id, shipment_id FROM alerts WHERE organization_id = %(org)s AND resolved_at IS NULL "
                        "ORDER BY id LIMIT 1", org=acme)[0]
    work = db.connect(database_url)
    try:
        lines = list(simulator.step(work, acme, LastChoice()))
    finally:
        work.close()
    draft = int(lines[0].split(" ")[0][4:])
    assert lines[0] == f"shp_{draft} new draft"
    assert lines[-1] == f"shp_{oldest['shipment_id']} alert alr_{oldest['id']} resolved"
    assert rows(conn, "SELECT status, reference ~ '^SHIP-' AS generated FROM shipments WHERE id = %(id)s",
                id=draft) == [{"status": "draft", "generated": True}]


def test_simulate_command(app, acme):
    result = app.test_cli_runner().invoke(args=["demo", "simulate", "--steps", "2", "--every", "0.1",
                                                "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines and all(line.startswith("simulator ") for line in lines)
    assert any(" status " in line for line in lines) and any(" checks run, " in line for line in lines)


def test_simulate_an_organization_that_does_not_exist(app):
    result = app.test_cli_runner().invoke(args=["demo", "simulate", "--org", "nobody", "--steps", "1"])
    assert result.exit_code == 1
    assert "no organization nobody (make it with: flask --app app demo seed)" in result.output
