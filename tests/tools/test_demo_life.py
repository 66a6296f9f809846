"""The simulator's shipments live like shipments: its first five minutes, and the hour after, on a driven clock."""
import random
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest

from demo import journeys, simulator
from models import db

STATUSES = {"draft", "validated", "in_transit", "arrived", "in_warehouse"}
MILESTONES = {"booked", "loaded", "departed", "transshipment_arrival", "transshipment_discharge", "transshipment_load",
              "transshipment_departure", "arrived", "discharged", "gate_out", "delivered"}
EVENT_TYPES = {"shipment.status_changed", "shipment.eta_changed", "shipment.checks_completed", "alert.created"}
EVERY = 5  # seconds between steps, as in the demo


def rows(conn, statement, **params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall()


@pytest.fixture(scope="module")
def lived(module_database, tmp_path_factory):
    """acme seeded small (60 shipments), then an hour and five minutes of the simulator, a step every 5 s of a
    clock the test drives: (connection, start, the last event id before, the last of the first five minutes)."""
    storage = str(tmp_path_factory.mktemp("life") / "storage")
    with module_database(STORAGE_DIR=storage) as (conn, app):
        result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "60", "--globex-shipments", "0",
                                                    "--workers", "1"])
        assert result.exit_code == 0, result.output
        acme = rows(conn, "SELECT id, slug FROM organizations WHERE slug = 'acme'")[0]
        before = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
        start = datetime.now(timezone.utc).replace(microsecond=0)
        work, cast, rng, five = db.connect(app.config["DATABASE_URL"]), {}, random.Random(7), None
        try:
            for tick in range(0, 65 * 60 + 1, EVERY):
                for _line in simulator.step(work, acme, cast, start + timedelta(seconds=tick), rng):
                    pass
                if tick == 5 * 60:
                    five = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
        finally:
            work.close()
        yield conn, start, before, five


SIMULATED = "(SELECT id FROM shipments WHERE notes = %(notes)s)"


def test_every_status_milestone_and_webhook_type_within_five_minutes(lived):
    conn, start, before, five = lived
    events = rows(conn, "SELECT type, shipment_id, previous_attributes FROM events WHERE id > %(before)s "
                        "AND id <= %(five)s ORDER BY id", before=before, five=five)
    assert {event["type"] for event in events} == EVENT_TYPES
    # An ETA that slipped and a demurrage clock that ran out, each an alert.
    assert {row["key"] for row in rows(conn, "SELECT a.key FROM alerts a JOIN events e ON e.alert_id = a.id "
                                             "WHERE e.id > %(before)s AND e.id <= %(five)s",
                                       before=before, five=five)} == {"eta_drift", "demurrage_risk"}
    # Each status a shipment left was reached, and one reached the warehouse.
    left = {event["previous_attributes"]["status"] for event in events if event["type"] == "shipment.status_changed"}
    assert left == STATUSES - {"in_warehouse"}
    moved = {event["shipment_id"] for event in events if event["type"] == "shipment.status_changed"}
    assert "in_warehouse" in {row["status"] for row in rows(
        conn, "SELECT status FROM shipments WHERE id = ANY(%(ids)s)", ids=list(moved))}
    milestones = rows(conn, f"SELECT DISTINCT milestone FROM tracking_events WHERE shipment_id IN {SIMULATED} "
                            "AND actual AND occurred_at BETWEEN %(start)s AND %(five)s",
                      notes=simulator.SIMULATED, start=start, five=start + timedelta(minutes=5))
    assert {row["milestone"] for row in milestones} == MILESTONES


def test_at_most_one_open_alert_per_cause_and_shipment_and_each_resolves(lived):
    conn = lived[0]
    assert rows(conn, "SELECT shipment_id, key FROM alerts WHERE resolved_at IS NULL GROUP BY shipment_id, key "
                      "HAVING count(*) > 1") == []
    alerts = rows(conn, f"SELECT a.key, a.resolved_at IS NOT NULL AS resolved, s.status FROM alerts a "
                        f"JOIN shipments s ON s.id = a.shipment_id WHERE s.id IN {SIMULATED}",
                  notes=simulator.SIMULATED)
    assert {alert["key"] for alert in alerts} == {"eta_drift", "demurrage_risk"}
    # Once in the warehouse, a shipment has no open alert: each resolved at its arrival or its gate-out.
    assert all(alert["resolved"] for alert in alerts if alert["status"] == "in_warehouse")


def test_etas_keep_their_direction_and_the_vessel_arrives_at_the_last(lived):
    conn = lived[0]
    slips = defaultdict(set)
    for revision in rows(conn, f"SELECT shipment_id, slip_seconds FROM eta_revisions WHERE NOT first_estimate "
                               f"AND shipment_id IN {SIMULATED} ORDER BY id", notes=simulator.SIMULATED):
        slips[revision["shipment_id"]].add(revision["slip_seconds"] > 0)
    assert slips and all(directions == {True} for directions in slips.values())
    assert rows(conn, f"SELECT s.id FROM shipments s JOIN tracking_events e ON e.shipment_id = s.id "
                      f"AND e.milestone = 'arrived' WHERE s.id IN {SIMULATED} AND e.occurred_at <> s.eta",
                notes=simulator.SIMULATED) == []


def test_milestones_come_in_order_and_never_ahead_of_the_clock(lived):
    conn, start = lived[:2]
    events = rows(conn, f"SELECT shipment_id, milestone_rank(milestone) AS rank, occurred_at FROM tracking_events "
                        f"WHERE shipment_id IN {SIMULATED} ORDER BY shipment_id, id", notes=simulator.SIMULATED)
    by_shipment = defaultdict(list)
    for event in events:
        by_shipment[event["shipment_id"]].append((event["occurred_at"], event["rank"]))
    assert len(by_shipment) >= 15
    assert all(timeline == sorted(timeline) for timeline in by_shipment.values())
    assert max(event["occurred_at"] for event in events) <= start + timedelta(minutes=65)


def test_checks_run_only_on_what_is_being_received(lived):
    conn, before = lived[0], lived[2]
    received = rows(conn, """SELECT r.id FROM check_runs r
      WHERE r.id IN (SELECT check_run_id FROM events WHERE id > %(before)s AND check_run_id IS NOT NULL)
        AND r.shipment_id IN (SELECT id FROM shipments WHERE notes = %(notes)s)
        AND EXISTS (SELECT 1 FROM tracking_events e WHERE e.shipment_id = r.shipment_id AND e.actual
                     AND e.milestone = 'discharged' AND e.occurred_at <= r.started_at)
        AND NOT EXISTS (SELECT 1 FROM tracking_events e WHERE e.shipment_id = r.shipment_id
                         AND e.milestone = 'delivered' AND e.occurred_at <= r.started_at)""",
                    before=before, notes=simulator.SIMULATED)
    checked = rows(conn, "SELECT count(*) AS n FROM events WHERE id > %(before)s "
                         "AND type = 'shipment.checks_completed'", before=before)[0]["n"]
    assert checked > 0 and len(received) == checked


def test_the_plan_holds_together():
    """Each revised ETA is later than the last and still ahead; the vessel arrives at the last; every step falls
    within the first five minutes of some shipment that joins at the start."""
    etas = [(offset, argument) for offset, name, argument in journeys.JOURNEY if name in ("book", "revise_eta")]
    assert all(offset < eta for offset, eta in etas)
    assert [eta for _offset, eta in etas] == sorted({eta for _offset, eta in etas})
    assert all(offset < previous for (offset, _eta), (_o, previous) in zip(etas[1:], etas))
    assert journeys.offset_of("arrive") == etas[-1][1]
    offsets = [offset for offset, _name, _argument in journeys.JOURNEY]
    assert offsets == sorted(offsets)
    assert all(any(phase <= offset < phase + 300 for phase in journeys.CAST_PHASES) for offset in offsets)
    # A booking every ENTRY_EVERY seconds: the steps that send events are never more than 50 s apart.
    sending = sorted({offset % journeys.ENTRY_EVERY for offset, name, _argument in journeys.JOURNEY
                      if name in ("validate", "depart", "revise_eta", "arrive", "discharge", "deliver")})
    assert max(b - a for a, b in zip(sending, sending[1:] + [sending[0] + journeys.ENTRY_EVERY])) <= 50
