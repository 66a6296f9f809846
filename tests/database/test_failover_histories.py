"""An unplanned failover that loses WAL, and a restore, with real servers (tests/support/replication.py): no
webhook-id is handed out twice, and a cursor of the lost line or of an earlier history is refused, never skipped
past (docs/operations.md, "After a failover or a restore")."""
import shutil
import tempfile
from pathlib import Path

import pytest

from models import changes, db
from tests.support.apps import NO_RATE_LIMITS, make_app
from tests.support.databases import apply_schema
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.replication import Server

JUMP = 2 ** 32
BASE = 2 ** 48
SHIPMENTS = 40  # more events than the 32 a sequence logs ahead: the lost line hands out ids the standby never saw


def rows(conn, statement, *params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else None


def set_statuses(conn, org_id, status):
    """One statement changing every shipment's status: one event each; returns their ids, in order."""
    before = rows(conn, "SELECT coalesce(max(id), 0) AS id FROM events")[0]["id"]
    rows(conn, "UPDATE shipments SET status = %s WHERE organization_id = %s", status, org_id)
    return [row["id"] for row in rows(conn, "SELECT id FROM events WHERE id > %s ORDER BY id", before)]


def connect(url):
    conn = db.connect(url)
    conn.autocommit = True
    return conn


def poll(app, token, since=None):
    """One GET /changes: (status, body)."""
    response = app.test_client().get("/changes", query_string={} if since is None else {"since": since},
                                     headers=auth(token))
    return response.status_code, response.json


def refusal(app, token, since):
    status, body = poll(app, token, since)
    assert status == 400, body
    return body["error"]["param"], body["error"]["message"].split(":")[0]


OTHER_HISTORY = ("since", "since was given in another history of this database (before a failover or a restore)")


@pytest.mark.slow
def test_an_unplanned_failover_and_a_restore_reuse_no_event_id_and_refuse_old_cursors(tmp_path):
    # Not under tmp_path: another pytest session starting meanwhile makes pytest-of-<user> 0700 again, and the
    # servers' OS user would lose its way to their folders.
    folder = Path(tempfile.mkdtemp(prefix="st-histories-"))
    primary = Server.primary(folder / "primary")
    standby = None
    opened = []
    try:
        admin = primary.connect()
        with admin.cursor() as cur:
            cur.execute("CREATE DATABASE shiptrack")
        admin.close()
        conn = connect(primary.url("shiptrack"))
        opened.append(conn)
        conn.autocommit = False
        apply_schema(conn)
        conn.commit()
        conn.autocommit = True
        standby = primary.standby(folder / "standby")
        org_id = make_org(conn, "acme")
        token = make_token(conn, org_id)
        shipments = [make_shipment(conn, org_id, status="draft") for _ in range(SHIPMENTS)]
        kept_events = set_statuses(conn, org_id, "validated")
        app = make_app(primary.url("shiptrack"), RATE_LIMITS=NO_RATE_LIMITS, STORAGE_DIR=str(tmp_path / "storage"))
        status, body = poll(app, token)
        assert (status, len(body["data"]), body["has_more"]) == (200, SHIPMENTS, False)
        kept_cursor = body["next_since"]
        assert int(kept_cursor.split(".")[0]) < BASE
        assert standby.replayed(primary)

        # A standby reads the latest history it replayed: the primary's cursors are its own.
        on_standby = connect(standby.url("shiptrack"))
        opened.append(on_standby)
        assert rows(on_standby, "SELECT current_history() AS number")[0]["number"] == 1
        with db.one_snapshot(on_standby):
            txn, shipment = (int(part) for part in kept_cursor.split("."))
            assert changes.changes_after(on_standby, org_id, (txn, shipment), 10) == []
        on_standby.close()

        # The standby stops; the primary goes on and a receiver and a mirror see that line; then it crashes.
        standby.stop("fast")
        lost_events = set_statuses(conn, org_id, "draft")
        assert len(lost_events) == SHIPMENTS and min(lost_events) > max(kept_events)
        status, body = poll(app, token, kept_cursor)
        assert (status, len(body["data"])) == (200, SHIPMENTS)
        lost_cursor = body["next_since"]
        conn.close()
        db.close_pool()
        primary.stop("immediate")

        standby.start()
        standby.promote()
        promoted = connect(standby.url("shiptrack"))
        opened.append(promoted)
        assert rows(promoted, "SELECT max(id) AS id FROM events")[0]["id"] == max(kept_events)
        new_events = set_statuses(promoted, org_id, "in_transit")
        assert len(new_events) == SHIPMENTS
        assert min(new_events) > max(lost_events) and min(new_events) > JUMP
        assert not set(new_events) & set(lost_events) and not set(new_events) & set(kept_events)
        recorded = rows(promoted, "SELECT number, timeline, skipped_event_ids FROM histories ORDER BY number")
        assert [(h["number"], h["timeline"]) for h in recorded] == [(1, 1), (2, 2)]
        skipped = recorded[1]["skipped_event_ids"]
        assert (skipped.upper, skipped.lower <= max(lost_events)) == (min(new_events), True)

        app = make_app(standby.url("shiptrack"), RATE_LIMITS=NO_RATE_LIMITS, STORAGE_DIR=str(tmp_path / "storage"))
        # The lost line's cursor, and one of history 1 from before the fork: refused, saying to start again.
        assert refusal(app, token, lost_cursor) == OTHER_HISTORY
        assert refusal(app, token, kept_cursor) == OTHER_HISTORY
        status, body = poll(app, token)
        assert (status, len(body["data"]), body["has_more"]) == (200, SHIPMENTS, False)
        assert [item["status"] for item in body["data"]] == ["in_transit"] * SHIPMENTS
        new_cursor = body["next_since"]
        assert int(new_cursor.split(".")[0]) > BASE
        rows(promoted, "UPDATE shipments SET notes = 'after the failover' WHERE id = %s", shipments[0])
        status, body = poll(app, token, new_cursor)
        assert (status, [item["id"] for item in body["data"]]) == (200, [f"shp_{shipments[0]}"])
        new_cursor = body["next_since"]
        # An event id of the lost line past what the standby had replayed: no page follows it.
        response = app.test_client().get("/events", query_string={"starting_after": f"msg_{max(lost_events)}"},
                                         headers=auth(token))
        assert (response.status_code, response.json["error"]["param"]) == (400, "starting_after")
        db.close_pool()

        # A restore from a logical backup: another database, so a new history at its first write.
        promoted.close()
        standby.restore_copy("shiptrack", "restored")
        restored = connect(standby.url("restored"))
        opened.append(restored)
        restored_events = set_statuses(restored, org_id, "validated")
        assert min(restored_events) > max(new_events) + JUMP
        assert [h["number"] for h in rows(restored, "SELECT number FROM histories ORDER BY number")] == [1, 2, 3]
        app = make_app(standby.url("restored"), RATE_LIMITS=NO_RATE_LIMITS, STORAGE_DIR=str(tmp_path / "storage"))
        assert refusal(app, token, new_cursor) == OTHER_HISTORY
        status, body = poll(app, token)
        assert (status, len(body["data"]), int(body["next_since"].split(".")[0]) > 2 * BASE) == (200, SHIPMENTS, True)
    finally:
        for conn in opened:
            conn.close()
        db.close_pool()
        if standby is not None:
            standby.remove()
        primary.remove()
        shutil.rmtree(folder, ignore_errors=True)
