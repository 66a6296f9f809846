"""Reading GET /changes in tests: one poll that settles on every committed change, and what a page lists."""
import time

from models import db
from tests.support.factories import auth

# The position of the organization's latest change, as the feed's cursor writes it (numbered in the history).
LATEST_SQL = """
SELECT ((current_history() - 1)::numeric * 281474976710656 + c.change_xid::text::numeric)::text || '.' || c.id
       AS position
  FROM (SELECT change_xid, id FROM shipments WHERE organization_id = %(org)s AND ever_visible
        UNION ALL
        SELECT change_xid, id FROM deleted_shipments t WHERE organization_id = %(org)s
           AND NOT EXISTS (SELECT 1 FROM shipments s WHERE s.id = t.id AND s.organization_id = t.organization_id
                             AND s.ever_visible)) c
 ORDER BY c.change_xid DESC, c.id DESC LIMIT 1
"""


def position(cursor):
    """A cursor `xid.id` as a tuple that orders as the feed does."""
    return tuple(int(part) for part in cursor.split("."))


def feed(client, org, since=None, settle=True, **params):
    """One poll. With `settle`, polls again until it has caught up with every committed change.

    The feed holds back for any transaction it cannot place, and a transaction of another test
    database that ends between the feed's snapshot and its look at pg_stat_activity is one of those
    for that poll (slower, never wrong). Tests that hold a transaction open on purpose pass
    settle=False and assert the holding itself.
    """
    query = "&".join(f"{key}={value}" for key, value in {"since": since, **params}.items() if value is not None)
    deadline = time.monotonic() + 10
    while True:
        response = client.get(f"/changes?{query}", headers=auth(org["token"]))
        assert response.status_code == 200, response.json
        body = response.json
        with db.connect(client.application.config["DATABASE_URL"]) as check, check.cursor() as cur:
            cur.execute(LATEST_SQL, {"org": org["id"]})
            latest = cur.fetchone()
        check.close()
        caught_up = (body["has_more"] or latest is None
                     or position(body["next_since"]) >= max(position(latest["position"]), position(since or "0.0")))
        if not settle or caught_up or time.monotonic() > deadline:
            return body
        time.sleep(0.05)


def ids_and_revisions(body):
    """(id, revision, deleted) of each item of a page of the feed."""
    return [(item["id"], item["revision"], item.get("deleted", False)) for item in body["data"]]
