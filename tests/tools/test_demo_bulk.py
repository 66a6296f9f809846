"""The seed's bulk path (keys to shipments deferred, each shipment written after its other rows) stores
what the triggers would."""
import psycopg2
import pytest

from models import db

# Every column of every shipment as text, but the change feed's transaction id (a touch moves it).
SHIPMENT_ROWS = """SELECT s.id, to_jsonb(s) - 'change_xid' - 'revision' AS row, s.revision FROM shipments s ORDER BY s.id"""
# A touch of every shipment: shipments_before_write recomputes all the derived values.
TOUCH_ALL = "UPDATE shipments SET change_xid = NULL"


@pytest.fixture
def seeded(app, database_url):
    """A fresh seed in batches of 40 (so several batches, the 400-line shipment and the live change)."""
    result = app.test_cli_runner().invoke(args=[
        "demo", "seed", "--shipments", "120", "--globex-shipments", "10", "--batch-size", "40", "--workers", "1",
        "--now", "2026-03-01T12:00"])
    assert result.exit_code == 0, result.output
    connection = db.connect(database_url)
    yield connection
    connection.rollback()
    connection.close()


def rows(conn):
    with conn.cursor() as cur:
        cur.execute(SHIPMENT_ROWS)
        return cur.fetchall()


def test_bulk_loaded_derived_columns_equal_a_touch(seeded):
    """Touching every shipment again changes nothing but the revision, which moves by one."""
    loaded = rows(seeded)
    with seeded.cursor() as cur:
        cur.execute(TOUCH_ALL)
        assert cur.rowcount == 130
    touched = rows(seeded)
    seeded.rollback()
    assert [(r["id"], r["row"]) for r in touched] == [(r["id"], r["row"]) for r in loaded]
    assert [r["revision"] for r in touched] == [r["revision"] + 1 for r in loaded]
    # Not vacuous: the derived columns hold values only child rows give.
    totals = {r["id"]: r["row"] for r in loaded}
    assert sum(1 for row in totals.values() if row["effective_eta"] is not None and row["eta"] is None) > 0
    assert max(row["search_text"].count(" | ") for row in totals.values()) >= 6


def test_revisions_as_the_api_shows_them(seeded):
    """Loaded history is revision 1; the one shipment moved live after loading is at 2."""
    with seeded.cursor() as cur:
        cur.execute("SELECT revision, count(*) AS n FROM shipments GROUP BY 1 ORDER BY 1")
        assert [(r["revision"], r["n"]) for r in cur.fetchall()] == [(1, 129), (2, 1)]
        cur.execute("SELECT count(*) AS n FROM events")
        assert cur.fetchone()["n"] == 1


def test_deferred_touch_is_the_transaction_s_own(seeded):
    """With shiptrack.defer_touch on, a new container leaves its shipment alone until touched; later
    transactions (and every other writer) touch as always."""
    add = "INSERT INTO containers (organization_id, shipment_id, number) VALUES (%(org)s, %(id)s, %(number)s)"
    state = ("SELECT position('MSKU1234565' IN search_text) > 0 AS first, position('MSKU7654328' IN search_text) > 0 "
             "AS second, revision FROM shipments WHERE id = %(id)s")
    with seeded.cursor() as cur:
        cur.execute("SELECT id, organization_id AS org, revision FROM shipments s WHERE NOT EXISTS "
                    "(SELECT 1 FROM containers c WHERE c.shipment_id = s.id) ORDER BY id LIMIT 1")
        shipment = cur.fetchone()
        revision = shipment["revision"]
        cur.execute("SET LOCAL shiptrack.defer_touch = 'on'")
        cur.execute(add, dict(shipment, number="MSKU1234565"))
        cur.execute(state, shipment)
        assert cur.fetchone() == {"first": False, "second": False, "revision": revision}
        cur.execute("UPDATE shipments SET change_xid = NULL WHERE id = %(id)s", shipment)
        cur.execute(state, shipment)
        assert cur.fetchone() == {"first": True, "second": False, "revision": revision + 1}
    seeded.commit()
    with seeded.cursor() as cur:
        cur.execute(add, dict(shipment, number="MSKU7654328"))
        cur.execute(state, shipment)
        assert cur.fetchone() == {"first": True, "second": True, "revision": revision + 2}


def test_history_writes_no_events_and_other_writers_do(seeded):
    """The seed's check runs and alerts wrote no events (shiptrack.history); a finished check run
    written afterwards by anyone else still does."""
    with seeded.cursor() as cur:
        cur.execute("SELECT type, count(*) AS n FROM events GROUP BY 1")
        assert cur.fetchall() == [{"type": "shipment.eta_changed", "n": 1}]
        cur.execute("SELECT count(*) AS n FROM check_runs WHERE finished_at IS NOT NULL")
        assert cur.fetchone()["n"] > 100
        cur.execute("SELECT id, organization_id AS org FROM shipments "
                    "WHERE NOT awaiting_approval AND NOT owned_elsewhere ORDER BY id LIMIT 1")
        shipment = cur.fetchone()
        cur.execute("INSERT INTO check_runs (organization_id, shipment_id, started_at, finished_at) "
                    "VALUES (%(org)s, %(id)s, now(), now())", shipment)
        cur.execute("SELECT type, shipment_id FROM events WHERE type <> 'shipment.eta_changed'")
        assert cur.fetchall() == [{"type": "shipment.checks_completed", "shipment_id": shipment["id"]}]


def test_keys_to_shipments_are_deferrable_and_checked_at_once_unless_deferred(seeded):
    """Every key to shipments may be deferred (the seed does), yet any other writer has it checked at
    its statement, and a deferred one still at commit."""
    with seeded.cursor() as cur:
        cur.execute("SELECT conrelid::regclass::text AS child, condeferrable, condeferred FROM pg_constraint "
                    "WHERE contype = 'f' AND confrelid = 'shipments'::regclass ORDER BY 1")
        keys = cur.fetchall()
        assert len(keys) == 15
        assert [k["child"] for k in keys if not k["condeferrable"] or k["condeferred"]] == []
        cur.execute("SELECT id, organization_id AS org FROM shipments ORDER BY id LIMIT 1")
        shipment = cur.fetchone()
        orphan = "INSERT INTO containers (organization_id, shipment_id) VALUES (%(org)s, %(id)s + 1000000)"
        with pytest.raises(psycopg2.errors.ForeignKeyViolation):
            cur.execute(orphan, shipment)
    seeded.rollback()
    with seeded.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL DEFERRED")
        cur.execute(orphan, shipment)
        with pytest.raises(psycopg2.errors.ForeignKeyViolation):
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    seeded.rollback()
