"""`flask demo simulate`: its writes are the application's, and the database turns them into events and changes."""
import random
from datetime import datetime, timedelta, timezone

import pytest

from delivery.outbox import render_pending
from demo import simulator
from models import db
from tests.support.factories import make_org, make_shipment


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


def test_a_shipment_moves_on_only_when_its_milestone_is_due_and_the_estimate_becomes_the_event(database_url, conn):
    org = make_org(conn, "acme")
    far = make_shipment(conn, org, status="in_transit", eta=NOW + timedelta(days=14), tracking_state="available",
                        tracking_status="in_transit", destination_location="Rotterdam")
    due = make_shipment(conn, org, status="in_transit", eta=NOW - timedelta(hours=2), tracking_state="available",
                        tracking_status="in_transit", destination_location="Rotterdam")
    draft = make_shipment(conn, org, status="draft")
    for shipment, milestone, at in ((far, "arrived", NOW + timedelta(days=14)), (due, "arrived", NOW - timedelta(hours=2)),
                                    (due, "discharged", NOW + timedelta(hours=3))):
        rows(conn, "INSERT INTO tracking_events (shipment_id, milestone, actual, occurred_at, location_name) "
                   "VALUES (%(id)s, %(milestone)s, false, %(at)s, 'Rotterdam') RETURNING id",
             id=shipment, milestone=milestone, at=at)
    work = db.connect(database_url)
    try:
        assert advance(work, org) == f"shp_{due} status in_transit -> arrived"
        # The estimated arrival is now the actual one, at its time; the discharge is still ahead.
        assert timeline(conn, due) == [("arrived", True, NOW - timedelta(hours=2)),
                                       ("discharged", False, NOW + timedelta(hours=3))]
        assert rows(conn, "SELECT status, tracking_status, eta <= now() AS eta_past FROM shipments WHERE id = %(id)s",
                    id=due) == [{"status": "arrived", "tracking_status": "arrived", "eta_past": True}]
        # Nothing else is due: the far one's ETA is two weeks ahead, the draft was entered now, and the
        # arrived one waits for four hours after its arrival and for the discharge.
        assert advance(work, org) is None
        rows(conn, "UPDATE tracking_events SET occurred_at = occurred_at - interval '5 hours' "
                   "WHERE shipment_id = %(id)s RETURNING id", id=due)
        assert advance(work, org) == f"shp_{due} status arrived -> in_warehouse"
        delivered = timeline(conn, due)
        assert [(milestone, actual) for milestone, actual, _at in delivered] == [
            ("arrived", True), ("discharged", True), ("delivered", True)]
        assert delivered[1][2] < delivered[2][2]  # delivered after the discharge, which came after the arrival
        assert rows(conn, "SELECT status FROM shipments WHERE id IN (%(far)s, %(draft)s) ORDER BY id",
                    far=far, draft=draft) == [{"status": "in_transit"}, {"status": "draft"}]
    finally:
        work.close()


def test_simulated_shipments_stay_believable(database_url, conn, acme):
    """Forty steps on the demo data: no shipment moves twice (hours pass between milestones), none arrives
    with its ETA ahead, no estimate is left behind an actual event, and revised ETAs stay ahead."""
    work, rng = db.connect(database_url), random.Random(5)
    try:
        lines = [line for _ in range(40) for line in simulator.step(work, acme, rng)]
    finally:
        work.close()
    moved = [int(line.split(" ")[0][4:]) for line in lines if " status " in line]
    assert moved and len(moved) == len(set(moved))
    revised = [int(line.split(" ")[0][4:]) for line in lines if " eta " in line]
    assert rows(conn, """SELECT s.id FROM shipments s WHERE s.id = ANY(%(moved)s) AND (
                           (s.status IN ('arrived', 'in_warehouse') AND s.effective_eta > now())
                           OR EXISTS (SELECT 1 FROM tracking_events e WHERE e.shipment_id = s.id
                                       AND NOT e.actual AND e.occurred_at <= now())
                           OR EXISTS (SELECT 1 FROM tracking_events e WHERE e.shipment_id = s.id
                                       AND e.actual AND e.occurred_at > now()))
                         UNION ALL
                         SELECT id FROM shipments WHERE id = ANY(%(revised)s) AND status = 'in_transit'
                                                    AND eta <= now()""", moved=moved, revised=revised) == []


NOW = datetime.now(timezone.utc).replace(microsecond=0)


def advance(work, org):
    """One status change by the simulator, committed; its line or None."""
    try:
        return simulator.advance_status(work, org)
    finally:
        work.commit()


def timeline(conn, shipment):
    """(milestone, actual, occurred_at) of a shipment's tracking events, in time order."""
    return [(row["milestone"], row["actual"], row["occurred_at"]) for row in rows(
        conn, "SELECT milestone, actual, occurred_at FROM tracking_events WHERE shipment_id = %(id)s "
              "ORDER BY occurred_at, id", id=shipment)]
