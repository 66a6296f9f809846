"""`flask demo simulate`: its writes are the application's, and the database turns them into events and changes."""
import random
from datetime import datetime, timedelta, timezone

import pytest

from delivery.outbox import render_pending
from demo import simulator
from models import db
from tests.support.factories import make_org


@pytest.fixture
def acme(app, conn):
    """acme seeded small (60 shipments); its organization row."""
    result = app.test_cli_runner().invoke(args=["demo", "seed", "--shipments", "60", "--globex-shipments", "0",
                                                "--workers", "1"])
    assert result.exit_code == 0, result.output
    return rows(conn, "SELECT id, slug FROM organizations WHERE slug = 'acme'")[0]


def rows(conn, statement, **params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall()


def simulate(database_url, org, start, seconds, cast=None, seed=5):
    """The simulator's lines over `seconds` of a clock the test drives, a step every 5 s."""
    work, cast, rng = db.connect(database_url), {} if cast is None else cast, random.Random(seed)
    try:
        return [line for tick in range(0, seconds + 1, 5)
                for line in simulator.step(work, org, cast, start + timedelta(seconds=tick), rng)]
    finally:
        work.close()


def test_shipments_join_with_their_past_and_without_events(database_url, conn, acme):
    before = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
    start = datetime.now(timezone.utc).replace(microsecond=0)
    lines = simulate(database_url, acme, start, 0)
    assert [line.split(" ")[1] for line in lines] == ["joins:"] * 4 + ["booked"]
    joined = [int(line.split(" ")[0][4:]) for line in lines]
    assert rows(conn, "SELECT status FROM shipments WHERE id = ANY(%(ids)s) ORDER BY id", ids=joined) == [
        {"status": status} for status in ("arrived", "arrived", "in_transit", "in_transit", "draft")]
    # Their past is written while they await approval, so the start sends nothing; they are visible now.
    assert rows(conn, "SELECT type FROM events WHERE id > %(id)s", id=before) == []
    assert rows(conn, "SELECT count(*) AS n FROM shipments WHERE id = ANY(%(ids)s) AND NOT awaiting_approval "
                      "AND approved_at IS NOT NULL AND notes = %(notes)s", ids=joined,
                notes=simulator.SIMULATED) == [{"n": 5}]


def test_every_event_renders_as_the_api_shows_it(database_url, conn, acme):
    before = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
    simulate(database_url, acme, datetime.now(timezone.utc), 300)
    conn.autocommit = False
    render_pending(conn, datetime.now(timezone.utc) + timedelta(minutes=5))
    conn.commit()
    conn.autocommit = True
    assert {row["state"] for row in rows(conn, "SELECT state FROM events WHERE id > %(id)s", id=before)} \
        == {"rendered"}


def test_a_second_run_archives_what_the_first_left_on_the_way(database_url, conn, acme):
    start = datetime.now(timezone.utc).replace(microsecond=0)
    simulate(database_url, acme, start, 60)
    on_the_way = rows(conn, "SELECT id FROM shipments WHERE notes = %(notes)s AND status <> 'in_warehouse' "
                            "ORDER BY id", notes=simulator.SIMULATED)
    lines = simulate(database_url, acme, start + timedelta(minutes=1), 0)
    assert lines[0] == f"archived {len(on_the_way)} simulated shipments a previous run left on the way"
    assert rows(conn, "SELECT id FROM shipments WHERE archived AND notes = %(notes)s ORDER BY id",
                notes=simulator.SIMULATED) == on_the_way


def test_simulate_command(app, acme):
    result = app.test_cli_runner().invoke(args=["demo", "simulate", "--steps", "2", "--every", "0.1",
                                                "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 5 and all(line.startswith("simulator ") for line in lines)
    assert [line.split(" ")[3] for line in lines] == ["joins:"] * 4 + ["booked"]


def test_simulate_an_organization_that_does_not_exist(app):
    result = app.test_cli_runner().invoke(args=["demo", "simulate", "--org", "nobody", "--steps", "1"])
    assert result.exit_code == 1
    assert "no organization nobody (make it with: flask --app app demo seed)" in result.output


def test_simulate_an_organization_without_shipments_to_copy(app, conn):
    make_org(conn, "acme")
    result = app.test_cli_runner().invoke(args=["demo", "simulate", "--steps", "1"])
    assert result.exit_code == 1
    assert result.output == ("Error: no ocean shipment between known ports with a carrier's free days to copy "
                             "(seed the organization with: flask --app app demo seed)\n")
