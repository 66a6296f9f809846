"""Shipment revisions and GET /changes: every change counted, the feed without gaps under concurrent writers."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from models import db
from tests.support import ROOT
from tests.support.changes import LATEST_SQL, feed, ids_and_revisions
from tests.support.counting import statement_counts
from tests.support.factories import auth, insert, make_container, make_label, make_org, make_shipment, make_token
from tests.support.processes import gunicorn, stop

INVALID_SINCE = "since must be a cursor as `next_since` gave it, such as 0.0."


@pytest.fixture
def org(conn):
    org_id = make_org(conn, "acme")
    return {"id": org_id, "token": make_token(conn, org_id)}


@pytest.fixture(autouse=True)
def no_open_writers_left_here(conn):
    """The feed waits for every open writing transaction of its database: one left over by an earlier
    test in this worker's database would hold it. Name it rather than fail obscurely."""
    with conn.cursor() as cur:
        cur.execute("""SELECT pid, state, backend_xid::text AS xid, left(query, 200) AS query FROM pg_stat_activity
                        WHERE datname = current_database() AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()
                          AND backend_type = 'client backend'""")   # autovacuum's ANALYZE ends by itself
        assert cur.fetchall() == []


def sql(conn, statement, *args):
    with conn.cursor() as cur:
        cur.execute(statement, args)


def revision(client, org, shipment_id):
    response = client.get(f"/shipments/shp_{shipment_id}", headers=auth(org["token"]))
    assert response.status_code == 200
    return response.json["revision"]


# -- revision ---------------------------------------------------------------------------------------

def test_revision_and_etag_change_with_every_kind_of_change_shown(conn, client, org):
    shipment = make_shipment(conn, org["id"], reference="S-1")
    assert revision(client, org, shipment) == 1
    expected = 1
    etags = set()

    def etag():
        return client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).headers["ETag"]

    def changed(statement, *args):
        nonlocal expected
        sql(conn, statement, *args)
        expected += 1
        assert revision(client, org, shipment) == expected, statement
        assert etag() not in etags, statement        # a new body, so a new ETag: a poller's 304 ends
        etags.add(etag())

    def unchanged(statement, *args):
        before = etag()
        sql(conn, statement, *args)
        assert revision(client, org, shipment) == expected, statement
        assert etag() == before, statement

    changed("UPDATE shipments SET notes = 'fragile' WHERE id = %s", shipment)
    unchanged("UPDATE shipments SET notes = 'fragile' WHERE id = %s", shipment)
    changed("UPDATE shipments SET tracking_state = 'pending' WHERE id = %s", shipment)
    container = make_container(conn, shipment, number="MSCU1234565")
    expected += 1
    assert revision(client, org, shipment) == expected
    changed("UPDATE containers SET eta = '2026-05-01T00:00:00Z' WHERE id = %s", container)   # effective ETA too
    changed("UPDATE containers SET seal_number = 'S-9' WHERE id = %s", container)
    unchanged("UPDATE containers SET seal_number = 'S-9' WHERE id = %s", container)
    label = make_label(conn, org["id"], "cold", shipment_ids=[shipment])
    expected += 1
    assert revision(client, org, shipment) == expected
    changed("UPDATE labels SET color = 'blue' WHERE id = %s", label)
    unchanged("UPDATE labels SET color = 'blue' WHERE id = %s", label)
    check = insert(conn, "checks", organization_id=org["id"], shipment_id=shipment, key="k", category="c",
                   title="t")
    expected += 1
    assert revision(client, org, shipment) == expected
    changed("UPDATE checks SET status = 'failed' WHERE id = %s", check)
    packing_list = insert(conn, "packing_lists", organization_id=org["id"], shipment_id=shipment)
    expected += 1
    pallet = insert(conn, "pallets", shipment_id=shipment, packing_list_id=packing_list, pallet_number="P1")
    expected += 1
    line = insert(conn, "packing_lines", pallet_id=pallet, shipment_id=shipment, line_index=1, produce_name="Kiwi")
    expected += 1
    assert revision(client, org, shipment) == expected
    changed("UPDATE packing_lines SET box_count = 12 WHERE id = %s", line)
    changed("UPDATE packing_lists SET is_current = false WHERE id = %s", packing_list)
    changed("DELETE FROM pallets WHERE id = %s", pallet)
    changed("DELETE FROM shipment_labels WHERE label_id = %s", label)
    changed("DELETE FROM checks WHERE id = %s", check)
    changed("DELETE FROM containers WHERE id = %s", container)
    # Other shipments' rows and rows the shipment does not show leave it alone.
    other = make_shipment(conn, org["id"], reference="S-2")
    make_container(conn, other)
    unchanged("INSERT INTO tracking_events (shipment_id, milestone) VALUES (%s, 'booked')", shipment)


def test_one_revision_per_transaction_and_writers_cannot_set_it(conn, client, org):
    shipment = make_shipment(conn, org["id"])
    with db.connect(conn.dsn) as writer:
        with writer.cursor() as cur:
            cur.execute("UPDATE shipments SET notes = 'a' WHERE id = %s", (shipment,))
            cur.execute("UPDATE shipments SET notes = 'b' WHERE id = %s", (shipment,))
            cur.execute("INSERT INTO containers (organization_id, shipment_id) VALUES (%s, %s)", (org["id"], shipment))
    writer.close()
    assert revision(client, org, shipment) == 2
    sql(conn, "UPDATE shipments SET revision = 99, change_xid = '5' WHERE id = %s", shipment)
    assert revision(client, org, shipment) == 2
    insert_with_revision = make_shipment(conn, org["id"], revision=50)
    assert revision(client, org, insert_with_revision) == 1


def test_webhook_and_list_show_the_same_revision(conn, client, org):
    shipment = make_shipment(conn, org["id"])
    sql(conn, "UPDATE shipments SET status = 'validated' WHERE id = %s", shipment)
    listed = client.get("/shipments", headers=auth(org["token"])).json["data"][0]
    assert listed["revision"] == 2
    assert client.get(f"/shipments/shp_{shipment}", headers=auth(org["token"])).json == listed


# -- the feed ---------------------------------------------------------------------------------------

def test_feed_from_the_beginning_then_only_what_changed(conn, client, org):
    first = make_shipment(conn, org["id"], reference="S-1")
    second = make_shipment(conn, org["id"], reference="S-2")
    make_shipment(conn, make_org(conn, "other"), reference="S-9")

    body = feed(client, org)
    shown = {item["id"]: item for item in body["data"]}
    assert list(shown) == [f"shp_{first}", f"shp_{second}"]
    # Each item is exactly what GET /shipments/{id} answers.
    assert shown[f"shp_{first}"] == client.get(f"/shipments/shp_{first}", headers=auth(org["token"])).json
    assert body["object"] == "list" and body["has_more"] is False
    cursor = body["next_since"]
    assert list(body) == ["object", "data", "has_more", "next_since"]

    quiet = feed(client, org, cursor)
    assert quiet == {"object": "list", "data": [], "has_more": False, "next_since": cursor}

    sql(conn, "UPDATE shipments SET notes = 'x' WHERE id = %s", first)
    make_container(conn, first)
    body = feed(client, org, cursor)
    assert ids_and_revisions(body) == [(f"shp_{first}", 3, False)]
    assert body["next_since"] != cursor
    assert feed(client, org, body["next_since"])["data"] == []


def test_paging_a_long_feed(conn, client, org):
    made = [make_shipment(conn, org["id"]) for _ in range(7)]
    seen, cursor = [], None
    while True:
        body = feed(client, org, cursor, limit=3)
        seen += [item["id"] for item in body["data"]]
        cursor = body["next_since"]
        if not body["has_more"]:
            break
    assert seen == [f"shp_{number}" for number in made]
    assert feed(client, org, cursor, limit=3)["data"] == []


def test_a_shipment_changed_again_moves_to_the_end_once(conn, client, org):
    a, b, c = (make_shipment(conn, org["id"]) for _ in range(3))
    cursor = feed(client, org)["next_since"]
    for shipment in (b, a, b):
        sql(conn, "UPDATE shipments SET notes = %s WHERE id = %s", f"n{random.random()}", shipment)
    assert ids_and_revisions(feed(client, org, cursor)) == [(f"shp_{a}", 2, False), (f"shp_{b}", 3, False)]
    assert f"shp_{c}" not in str(feed(client, org, cursor))


def test_hidden_and_deleted_shipments_show_as_deleted(conn, client, org):
    hidden = make_shipment(conn, org["id"])
    deleted = make_shipment(conn, org["id"])
    never_shown = make_shipment(conn, org["id"], awaiting_approval=True)
    cursor = feed(client, org)["next_since"]

    sql(conn, "UPDATE shipments SET owned_elsewhere = true WHERE id = %s", hidden)
    sql(conn, "DELETE FROM shipments WHERE id = %s", deleted)
    sql(conn, "UPDATE shipments SET notes = 'still waiting' WHERE id = %s", never_shown)
    body = feed(client, org, cursor)
    assert body["data"] == [{"object": "shipment", "id": f"shp_{hidden}", "deleted": True, "revision": 2},
                            {"object": "shipment", "id": f"shp_{deleted}", "deleted": True, "revision": 2}]

    # Shown again later: the whole shipment, at a newer revision; approved at last: appears.
    cursor = body["next_since"]
    sql(conn, "UPDATE shipments SET owned_elsewhere = false WHERE id = %s", hidden)
    sql(conn, "UPDATE shipments SET awaiting_approval = false WHERE id = %s", never_shown)
    body = feed(client, org, cursor)
    assert ids_and_revisions(body) == [(f"shp_{hidden}", 3, False), (f"shp_{never_shown}", 3, False)]
    assert body["data"][0]["reference"]


def test_a_deleted_organization_leaves_nothing_behind(conn, client, org):
    other = make_org(conn, "other")
    make_shipment(conn, other)
    sql(conn, "DELETE FROM organizations WHERE id = %s", other)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM deleted_shipments")
        assert cur.fetchone()["n"] == 0


def test_a_poll_with_nothing_new_is_one_statement(conn, app, client, org):
    recorder = statement_counts(app)

    def statements(since, items):
        """Statements of the poll that answered `items` items (polled again while the horizon holds some
        back, see feed(); a held poll stores renderings of what it shows, never of the rest)."""
        deadline = time.monotonic() + 10
        while True:
            recorder.clear()
            response = client.get(f"/changes?since={since or ''}", headers=auth(org["token"]))
            if len(response.json["data"]) == items or time.monotonic() > deadline:
                assert len(response.json["data"]) == items
                return recorder[0]
            time.sleep(0.05)

    make_shipment(conn, org["id"])
    cursor = feed(client, org)["next_since"]
    # The feed (the token and its count are the guard's, kept in memory); a page adds the stored renderings
    # (the poll above stored this one), and for shipments without a current one their rows, containers and
    # labels and the store, whatever their number.
    assert statements(cursor, 0) == 1
    assert statements(None, 1) == 2
    for _ in range(30):
        make_shipment(conn, org["id"])
    assert statements(None, 31) == 6
    assert statements(None, 31) == 2            # every rendering stored now


@pytest.mark.parametrize("value", ["x", "1", "1.", ".1", "01.1", "1.01", "-1.1", "1.1.1", "1,1", " 1.1",
                                   "18446744073709551616.1", "1.9223372036854775808", "1.1x"])
def test_bad_since_is_400(client, org, value):
    response = client.get("/changes", query_string={"since": value}, headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.json == {"error": {"type": "invalid_request_error", "code": "invalid_parameter",
                                       "param": "since", "message": INVALID_SINCE}}


@pytest.mark.parametrize("value", ["0", "101", "1e1", "-1", ""])
def test_bad_limit_is_400(client, org, value):
    response = client.get("/changes", query_string={"limit": value}, headers=auth(org["token"]))
    assert response.status_code == 400
    assert response.json["error"]["param"] == "limit"


def test_a_cursor_ahead_of_the_database_is_400_saying_to_start_again(conn, client, org):
    """No page can ever follow a cursor past every transaction of the server: one from another database or from
    before a restore, here a million transactions ahead."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax")
        ahead = int(cur.fetchone()["xmax"]) + 1_000_000
    response = client.get("/changes", query_string={"since": f"{ahead}.0"}, headers=auth(org["token"]))
    assert (response.status_code, response.json) == (400, {"error": {
        "type": "invalid_request_error", "code": "invalid_parameter", "param": "since",
        "message": "since is ahead of every change this database has made: the cursor comes from another "
                   "database or from before a restore. Start again without since (or with since=0.0) and "
                   "rebuild your copy."}})
    assert response.headers["Service-Version"] == "2026-10-01"


@pytest.mark.parametrize("cursor", ["281474976710656.0", "18446744073709551615.9223372036854775807"])
def test_a_cursor_of_a_later_history_is_400_saying_to_start_again(client, org, cursor):
    """History 1 numbers its positions below 2^48 (schema.sql, "Histories"): the first position of history 2
    and the largest cursor the pattern allows were given in another history."""
    response = client.get("/changes", query_string={"since": cursor}, headers=auth(org["token"]))
    assert (response.status_code, response.json) == (400, {"error": {
        "type": "invalid_request_error", "code": "invalid_parameter", "param": "since",
        "message": "since was given in another history of this database (before a failover or a restore): "
                   "changes it counted may be lost and its position means nothing now. Start again without "
                   "since (or with since=0.0) and rebuild your copy."}})
    assert response.headers["Service-Version"] == "2026-10-01"


def test_a_cursor_never_expires_and_zero_starts_over_with_default_limit_100(conn, client, org):
    for _ in range(101):
        make_shipment(conn, org["id"])
    body = feed(client, org)
    assert len(body["data"]) == 100 and body["has_more"] is True
    assert feed(client, org, "0.0") == body
    # The oldest position a cursor can name, kept since before every shipment: still the whole feed after it.
    assert feed(client, org, "1.0")["data"] == body["data"]


def test_a_quiet_poll_answers_304_to_its_etag(conn, client, org):
    make_shipment(conn, org["id"])
    feed(client, org)                 # settled: the shipment is past the horizon (see feed())
    first = client.get("/changes", headers=auth(org["token"]))
    again = client.get("/changes", headers=auth(org["token"], **{"If-None-Match": first.headers["ETag"]}))
    assert again.status_code == 304
    assert again.data == b""


# -- no gaps under concurrent writers ----------------------------------------------------------------

def test_a_transaction_that_commits_late_is_not_skipped(conn, client, org, database_url):
    early = make_shipment(conn, org["id"], reference="EARLY")
    late = make_shipment(conn, org["id"], reference="LATE")
    cursor = feed(client, org)["next_since"]

    slow = db.connect(database_url)        # takes its transaction id first, commits last
    fast = db.connect(database_url)
    try:
        with slow.cursor() as cur:
            cur.execute("UPDATE shipments SET notes = 'slow' WHERE id = %s", (early,))
        with fast.cursor() as cur:
            cur.execute("UPDATE shipments SET notes = 'fast' WHERE id = %s", (late,))
        fast.commit()
        # The fast change is committed, but a later-numbered change must wait for the open one:
        # handing it out now would move the cursor past the slow one's place.
        held = feed(client, org, cursor, settle=False)
        assert held == {"object": "list", "data": [], "has_more": False, "next_since": cursor}
        slow.commit()
    finally:
        slow.close()
        fast.close()
    body = feed(client, org, cursor)
    assert [(item["id"], item["notes"]) for item in body["data"]] == [(f"shp_{early}", "slow"),
                                                                      (f"shp_{late}", "fast")]


def test_only_open_transactions_of_this_database_hold_the_feed(conn, client, org, database_url):
    cursor = feed(client, org)["next_since"]
    elsewhere = db.connect(conn.dsn.replace(f"dbname={conn.info.dbname}", "dbname=postgres"))
    here = db.connect(database_url)
    try:
        with elsewhere.cursor() as cur:
            cur.execute("SELECT pg_current_xact_id()")     # an older transaction id, in another database
        shipment = make_shipment(conn, org["id"])
        body = feed(client, org, cursor)
        assert ids_and_revisions(body) == [(f"shp_{shipment}", 1, False)]
        # Here, an open transaction may still write a shipment under its older id: the feed waits.
        with here.cursor() as cur:
            cur.execute("SELECT pg_current_xact_id()")
        sql(conn, "UPDATE shipments SET notes = 'x' WHERE id = %s", shipment)
        assert feed(client, org, body["next_since"], settle=False)["data"] == []
        here.rollback()
        assert ids_and_revisions(feed(client, org, body["next_since"])) == [(f"shp_{shipment}", 2, False)]
    finally:
        elsewhere.close()
        here.close()


@pytest.mark.slow
def test_a_mirror_stays_exact_under_concurrent_writers(conn, client, org, database_url):
    """Writers with random, overlapping transaction lengths; a poller keeps a mirror; it ends equal."""
    shipments = [make_shipment(conn, org["id"]) for _ in range(40)]
    stopping = threading.Event()
    errors = []

    def writer(seed):
        rng = random.Random(seed)
        connection = db.connect(database_url)
        try:
            while not stopping.is_set():
                with connection.cursor() as cur:
                    for shipment in sorted(rng.sample(shipments, rng.randint(1, 3))):  # one lock order
                        kind = rng.randrange(4)
                        if kind == 0:
                            cur.execute("UPDATE shipments SET notes = %s WHERE id = %s", (str(rng.random()), shipment))
                        elif kind == 1:
                            cur.execute("INSERT INTO containers (organization_id, shipment_id) VALUES (%s, %s)",
                                        (org["id"], shipment))
                        elif kind == 2:
                            cur.execute("UPDATE shipments SET awaiting_approval = NOT awaiting_approval "
                                        "WHERE id = %s", (shipment,))
                        else:
                            cur.execute("INSERT INTO checks (organization_id, shipment_id, key, category, title) "
                                        "VALUES (%s, %s, %s, 'c', 't') ON CONFLICT (shipment_id, key) DO UPDATE "
                                        "SET status = 'failed'", (org["id"], shipment, str(rng.randrange(5))))
                    time.sleep(rng.choice((0, 0, 0.01, 0.05, 0.2)))   # some hold their transaction open
                connection.commit()
        except Exception as error:              # a deadlock between writers would be a test bug; report it
            errors.append(error)
        finally:
            connection.close()

    mirror, cursor = {}, None

    def poll(settle=False):
        nonlocal cursor
        while True:
            body = feed(client, org, cursor, settle=settle, limit=7)
            for item in body["data"]:
                if item.get("deleted"):
                    mirror.pop(item["id"], None)
                else:
                    mirror[item["id"]] = (item["revision"], item["notes"], len(item["containers"]),
                                          item["checks"]["failed"])
            cursor = body["next_since"]
            if not body["has_more"]:
                return

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        poll()
        time.sleep(0.05)        # within the token's 600 requests per 5 minutes
    stopping.set()
    for thread in threads:
        thread.join()
    poll(settle=True)
    assert not errors
    truth = {item["id"]: (item["revision"], item["notes"], len(item["containers"]), item["checks"]["failed"])
             for item in walk_shipments(client, org)}
    assert mirror == truth
    assert len(truth) > 0


def walk_shipments(client, org):
    items, after = [], ""
    while True:
        body = client.get(f"/shipments?archived=any&limit=100&starting_after={after}",
                          headers=auth(org["token"])).json
        items += body["data"]
        if not body["has_more"]:
            return items
        after = body["data"][-1]["id"]


# -- the poller of docs/sync.md ------------------------------------------------------------------------

def documented_poller():
    """The Python block of docs/sync.md's "Mirroring shipments with the feed"."""
    text = (ROOT / "docs" / "sync.md").read_text()
    section = text.split("## Mirroring shipments with the feed", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow
def test_the_documented_poller_keeps_an_exact_copy(conn, org, database_url, tmp_path):
    made = [make_shipment(conn, org["id"]) for _ in range(3)]
    hidden = make_shipment(conn, org["id"])
    (tmp_path / "mirror.py").write_text(documented_poller())
    with gunicorn(database_url, tmp_path) as base:
        env = {**os.environ, "SHIPTRACK_URL": base, "SHIPTRACK_TOKEN": org["token"]}
        poller = subprocess.Popen([sys.executable, "mirror.py"], cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert poller.stdout.readline() == "4 shipments, cursor " + feed_position(conn, org) + "\n"
            copy = json.loads((tmp_path / "mirror.json").read_text())
            assert sorted(copy["shipments"]) == sorted(f"shp_{number}" for number in [*made, hidden])
            sql(conn, "UPDATE shipments SET awaiting_approval = true WHERE id = %s", hidden)
            sql(conn, "UPDATE shipments SET notes = 'changed' WHERE id = %s", made[0])
        finally:
            stop(poller)
            poller.stdout.close()
        # Started again, it goes on from the cursor it saved with the copy (its next poll is 30 s away,
        # so a second process makes that poll now).
        poller = subprocess.Popen([sys.executable, "mirror.py"], cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert poller.stdout.readline() == "3 shipments, cursor " + feed_position(conn, org) + "\n"
        finally:
            stop(poller)
            poller.stdout.close()
        copy = json.loads((tmp_path / "mirror.json").read_text())
        assert sorted(copy["shipments"]) == sorted(f"shp_{number}" for number in made)
        assert copy["shipments"][f"shp_{made[0]}"]["notes"] == "changed"
        # A copy and cursor of another history (before a restore): told to, it starts again; Ctrl-C stops it
        # quietly.
        (tmp_path / "mirror.json").write_text(json.dumps({"since": "18446744073709551615.0",
                                                          "shipments": {"shp_999": {}}}))
        poller = subprocess.Popen([sys.executable, "mirror.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert poller.stdout.readline().startswith("since was given in another history of this database")
            assert poller.stdout.readline() == "3 shipments, cursor " + feed_position(conn, org) + "\n"
        finally:
            poller.send_signal(signal.SIGINT)
            out, err = poller.communicate(timeout=10)
        assert (poller.returncode, out, err) == (0, "stopped; mirror.json keeps the copy and its cursor\n", "")
    copy = json.loads((tmp_path / "mirror.json").read_text())
    assert sorted(copy["shipments"]) == sorted(f"shp_{number}" for number in made)


def feed_position(conn, org):
    with conn.cursor() as cur:
        cur.execute(LATEST_SQL, {"org": org["id"]})
        return cur.fetchone()["position"]


def test_a_connection_lost_inside_the_feeds_snapshot_is_a_503_not_a_500(conn, app, client, org, monkeypatch):
    """The database going away between the feed's statements: the API's 503, and the next poll works."""
    from models import changes as changes_model

    make_shipment(conn, org["id"])
    real = changes_model.changes_after

    def dropped(connection, *args):
        with conn.cursor() as cur:        # the request's own session, nobody else's
            cur.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
        return real(connection, *args)
    monkeypatch.setattr(changes_model, "changes_after", dropped)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = client.get("/changes", headers=auth(org["token"]))
    assert response.status_code == 503
    assert response.json["error"]["code"] == "service_unavailable"
    monkeypatch.setattr(changes_model, "changes_after", real)
    assert feed(client, org)["data"][0]["revision"] == 1
