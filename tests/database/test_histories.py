"""Histories (schema.sql): a webhook-id or a feed position handed out in one line of the database's life is never
handed out again in another, and a cursor of another line is refused (docs/operations.md, "After a failover or a
restore"). Here a line is changed by hand: the recorded identity is made another database's, as a restore or a
promotion makes it; tests/database/test_failover_histories.py does it with real servers."""
import threading
import uuid

import pytest

from models import db
from tests.support.changes import feed
from tests.support.factories import auth, make_org, make_shipment, make_token
from tests.support.processes import wait_for

JUMP = 2 ** 32
BASE = 2 ** 48
OTHER_HISTORY = {"error": {
    "type": "invalid_request_error", "code": "invalid_parameter", "param": "since",
    "message": "since was given in another history of this database (before a failover or a restore): changes it "
               "counted may be lost and its position means nothing now. Start again without since (or with "
               "since=0.0) and rebuild your copy."}}
LOST_EVENT = {"error": {
    "type": "invalid_request_error", "code": "invalid_parameter", "param": "starting_after",
    "message": "starting_after names an event of another history of this database: it was sent before a failover "
               "or a restore that lost it, and no page follows it. Start again without starting_after."}}
# A GET /events page holds rendered events: the tests store a body as the delivery process would.
RENDERED = "UPDATE events SET state = 'rendered', body = '{}', api_version = '2026-10-01' WHERE state = 'pending'"


@pytest.fixture
def org(conn):
    """An organization with a token and a visible shipment (their writes begin history 1)."""
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id), "shipment": make_shipment(conn, org_id, status="draft")}


def rows(conn, statement, *params):
    with conn.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else None


def change_status(conn, shipment_id, status):
    """One shipment.status_changed event; returns its id."""
    rows(conn, "UPDATE shipments SET status = %s WHERE id = %s", status, shipment_id)
    return rows(conn, "SELECT max(id) AS id FROM events")[0]["id"]


def histories(conn):
    return rows(conn, "SELECT number, skipped_event_ids FROM histories ORDER BY number")


def change_xid(conn, shipment_id):
    return int(rows(conn, "SELECT change_xid::text AS xid FROM shipments WHERE id = %s", shipment_id)[0]["xid"])


def move_database(conn):
    """What a restore or a promotion does to the identity history() compares: the recorded one is another's now."""
    rows(conn, "UPDATE histories SET database_oid = 0")


def test_the_first_write_records_history_1_which_changes_no_number(conn, client, org):
    recorded = rows(conn, """SELECT h.number, h.skipped_event_ids,
                                    (h.system_identifier, h.timeline, h.database_oid) = (i.system_identifier, i.timeline,
                                                                                        i.database_oid) AS here
                               FROM histories h, history_identity() i""")
    assert recorded == [{"number": 1, "skipped_event_ids": None, "here": True}]
    assert change_status(conn, org["shipment"], "validated") == 1
    body = feed(client, org)
    assert body["next_since"] == f"{change_xid(conn, org['shipment'])}.{org['shipment']}"


def test_a_new_identity_begins_history_2_at_the_next_write_and_every_id_sequence_jumps(conn, client, org):
    first = change_status(conn, org["shipment"], "validated")
    before = rows(conn, "SELECT last_value FROM shipments_id_seq")[0]["last_value"]
    move_database(conn)
    # The first write of the new history is an insert: its row's id is drawn in the new history already.
    assert make_shipment(conn, org["id"]) == before + JUMP + 1
    second = change_status(conn, org["shipment"], "draft")
    assert second == first + JUMP + 1
    skipped = histories(conn)[1]["skipped_event_ids"]
    assert [h["number"] for h in histories(conn)] == [1, 2]
    assert (skipped.lower, skipped.upper, skipped.lower_inc, skipped.upper_inc) == (first + 1, first + JUMP + 1,
                                                                                     True, False)
    # Once per history: the next write, in another transaction, is in history 2 still.
    assert change_status(conn, org["shipment"], "validated") == second + 1
    assert len(histories(conn)) == 2


def test_two_writers_meeting_a_new_identity_begin_one_history_and_jump_once(conn, database_url, org):
    change_status(conn, org["shipment"], "validated")
    last = rows(conn, "SELECT last_value FROM events_id_seq")[0]["last_value"]
    move_database(conn)
    insert = ("INSERT INTO events (organization_id, type, shipment_id) VALUES (%s, 'shipment.status_changed', %s) "
              "RETURNING id")
    first, second = db.connect(database_url), db.connect(database_url)
    made = {}
    try:
        with first.cursor() as cur:
            cur.execute(insert, (org["id"], org["shipment"]))
            made["first"] = cur.fetchone()["id"]

        def other():
            with second.cursor() as cur:
                cur.execute(insert, (org["id"], org["shipment"]))
                made["second"] = cur.fetchone()["id"]
            second.commit()
        writer = threading.Thread(target=other)
        writer.start()
        # The second writer saw history 1 recorded and the identity changed: it waits for the first's lock.
        assert wait_for(lambda: rows(conn, "SELECT count(*) AS waiting FROM pg_locks WHERE NOT granted "
                                           "AND relation = 'histories'::regclass")[0]["waiting"] == 1, 10)
        first.commit()
        writer.join(10)
        assert not writer.is_alive()
    finally:
        first.close()
        second.close()
    assert (made["first"], made["second"]) == (last + JUMP + 1, last + JUMP + 2)
    assert [h["number"] for h in histories(conn)] == [1, 2]


def test_a_transaction_checks_once_a_session_at_each_transaction(conn, database_url, org):
    """The check is kept for the transaction (a statement writing many rows checks once), never for the session:
    a session on a standby outlives its promotion."""
    session = db.connect(database_url)
    try:
        with session.cursor() as cur:
            cur.execute("SELECT history() AS number, current_setting('shiptrack.history_number') AS kept")
            assert cur.fetchone() == {"number": 1, "kept": "1"}
            session.commit()
            move_database(conn)
            cur.execute("SELECT current_setting('shiptrack.history_number', true) AS kept")
            assert cur.fetchone()["kept"] in ("", None)
            cur.execute("SELECT history() AS number")
            assert cur.fetchone()["number"] == 2
            session.commit()
    finally:
        session.close()


def test_in_history_2_cursors_are_numbered_from_2_to_the_48_and_history_1_cursors_are_refused(conn, client, org):
    old = feed(client, org)["next_since"]
    assert int(old.split(".")[0]) < BASE
    move_database(conn)
    # Reads write nothing: before the first write, the feed already numbers as the history that write records.
    unwritten = feed(client, org)["next_since"]
    assert unwritten == f"{BASE + change_xid(conn, org['shipment'])}.{org['shipment']}"
    assert len(histories(conn)) == 1
    rows(conn, "UPDATE shipments SET notes = 'new history' WHERE id = %s", org["shipment"])
    assert len(histories(conn)) == 2
    for refused in (old, f"{BASE - 1}.0", f"{2 * BASE}.0", f"{BASE - 1}.{org['shipment']}"):
        response = client.get("/changes", query_string={"since": refused}, headers=auth(org["token"]))
        assert (response.status_code, response.json) == (400, OTHER_HISTORY), refused
    page = feed(client, org, since=unwritten)
    assert [item["id"] for item in page["data"]] == [f"shp_{org['shipment']}"]
    assert page["next_since"] == f"{BASE + change_xid(conn, org['shipment'])}.{org['shipment']}"
    assert feed(client, org, since="0.0")["next_since"] == page["next_since"]
    assert feed(client, org, since=page["next_since"])["data"] == []


def test_events_starting_after_an_id_of_the_jump_is_refused(conn, client, org):
    kept = change_status(conn, org["shipment"], "validated")
    move_database(conn)
    new = change_status(conn, org["shipment"], "draft")
    rows(conn, RENDERED)
    for lost in (kept + 1, kept + JUMP // 2, new - 1):
        response = client.get("/events", query_string={"starting_after": f"msg_{lost}"}, headers=auth(org["token"]))
        assert (response.status_code, response.json) == (400, LOST_EVENT), lost
    listed = client.get("/events", query_string={"starting_after": f"msg_{new + 1}"}, headers=auth(org["token"]))
    assert [item for item in listed.json["data"]] == [{}, {}]
    older = client.get("/events", query_string={"starting_after": f"msg_{new}"}, headers=auth(org["token"]))
    assert (older.status_code, older.json["data"]) == (200, [{}])


def test_the_jump_needs_no_privilege_of_the_writer(conn, database_url, org):
    """history() runs as its owner: a role that may only insert events begins a history all the same. What
    current_history() asks of the server (pg_control_system, pg_walfile_name) any role may ask."""
    role = f"st_writer_{uuid.uuid4().hex[:8]}"
    rows(conn, f"DROP ROLE IF EXISTS {role}")
    rows(conn, f"CREATE ROLE {role}")
    try:
        rows(conn, f"GRANT SELECT, INSERT ON events TO {role}")
        rows(conn, f"GRANT SELECT ON histories TO {role}")
        move_database(conn)
        writer = db.connect(database_url)
        try:
            with writer.cursor() as cur:
                cur.execute(f"SET ROLE {role}")
                cur.execute("INSERT INTO events (organization_id, type, shipment_id) "
                            "VALUES (%s, 'shipment.status_changed', %s) RETURNING id", (org["id"], org["shipment"]))
                assert cur.fetchone()["id"] > JUMP
                cur.execute("SELECT current_history() AS number")
                assert cur.fetchone()["number"] == 2
            writer.commit()
        finally:
            writer.close()
        assert [h["number"] for h in histories(conn)] == [1, 2]
    finally:
        rows(conn, f"REVOKE ALL ON events, histories FROM {role}")
        rows(conn, f"DROP ROLE {role}")

