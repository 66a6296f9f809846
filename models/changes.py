"""The change feed: an organization's shipments in the order of their latest change, without gaps.

Every change to what GET /shipments/{id} shows gives the shipment a new `revision` and records the
writing transaction in `change_xid` (schema.sql, shipments_before_write).  The feed is ordered by
(change_xid, id) and only shows changes of transactions below the horizon: the oldest transaction
still running when the snapshot was taken (pg_current_snapshot's in-progress list), else the
snapshot's xmax.  Every transaction below it has ended, and a writer still running or yet to come
has an id at or above it, so a position once passed never receives another row.

Transaction ids are shared by every database of the server, and a long transaction elsewhere
would hold the horizon back for nothing: running transactions that pg_stat_activity shows in
another database are left out (their ids are compared on the low 32 bits, backend_xid's width).
pg_stat_activity shows every session's database and backend_xid to any role (only its query and
state need pg_read_all_stats). What it cannot place (a prepared transaction) keeps holding the
horizon: slower, never wrong.  docs/sync.md explains it for users.

A cursor's transaction is `(history - 1) * 2^48 + change_xid` (schema.sql, "Histories"): the first history
hands out the xid8s themselves. After a failover or a restore the database is in a new history whose
transaction ids can repeat ones the old line gave out, so every cursor of another history is refused
(docs/sync.md), even one from before the fork: nothing tells a cursor the lost line gave from one it did not.
"""
from models.db import execute_all
from models.standby import Behind

# GET /changes: live and deleted shipments after a position, below the horizon (snapshot, elsewhere and
# horizon: changes of transactions below it are final, module docstring), oldest change first. A position's
# transaction is the history's base plus the xid8 (module docstring); `position` turns the cursor's back
# into the xid8 before the range scans, or into null for a cursor of another history (`other_history`).
# Each branch is one range scan of its (organization_id, change_xid, id) index. A deletion is ignored
# while the organization has a shipment of that id it has seen (one moved back, or an id given again
# by hand): that shipment comes whole instead. An empty page is one row of nulls saying whether the
# cursor is of another history, or beyond every transaction the server has begun (`beyond`): no position
# handed out can be, so it came from another server, and would wait for ever.
FEED_SQL = """
WITH snapshot AS (SELECT pg_current_snapshot() AS taken),
elsewhere AS (
  SELECT a.backend_xid::text::bigint AS xid
    FROM pg_stat_activity a
   WHERE a.datname IS DISTINCT FROM current_database() AND a.backend_xid IS NOT NULL),
history AS (SELECT (current_history() - 1)::numeric * 281474976710656 AS base),
position AS (
  SELECT CASE WHEN %(after_txn)s::numeric = 0 THEN '0'::xid8
              WHEN %(after_txn)s::numeric >= h.base AND %(after_txn)s::numeric < h.base + 281474976710656
              THEN (%(after_txn)s::numeric - h.base)::text::xid8 END AS xid
    FROM history h),
horizon AS (
  SELECT coalesce((SELECT min(running.xid) FROM pg_snapshot_xip(snapshot.taken) AS running (xid)
                    WHERE (running.xid::text::bigint & 4294967295) NOT IN (SELECT xid FROM elsewhere)),
                  pg_snapshot_xmax(snapshot.taken)) AS xmin
    FROM snapshot),
live AS (
  SELECT s.id, s.revision, s.change_xid, visible_to(s, %(organization_id)s) AS visible
    FROM shipments s
   WHERE s.organization_id = %(organization_id)s AND s.ever_visible
     AND (s.change_xid, s.id) > ((SELECT xid FROM position), %(after_id)s::bigint)
     AND s.change_xid < (SELECT xmin FROM horizon)
   ORDER BY s.change_xid, s.id
   LIMIT %(limit)s),
gone AS (
  SELECT t.id, t.revision, t.change_xid, false AS visible
    FROM deleted_shipments t
   WHERE t.organization_id = %(organization_id)s
     AND (t.change_xid, t.id) > ((SELECT xid FROM position), %(after_id)s::bigint)
     AND t.change_xid < (SELECT xmin FROM horizon)
     AND NOT EXISTS (SELECT 1 FROM shipments s
                      WHERE s.id = t.id AND s.organization_id = t.organization_id AND s.ever_visible)
   ORDER BY t.change_xid, t.id
   LIMIT %(limit)s),
page AS (
  SELECT * FROM live UNION ALL SELECT * FROM gone
   ORDER BY change_xid, id
   LIMIT %(limit)s)
SELECT c.id, c.revision, h.base + c.change_xid::text::numeric AS change_xid, c.visible,
       p.xid IS NULL AS other_history, p.xid >= pg_snapshot_xmax(snapshot.taken) AS beyond
  FROM snapshot CROSS JOIN history h CROSS JOIN position p LEFT JOIN page c ON true
 ORDER BY c.change_xid, c.id
"""


class CursorBeyond(Exception):
    """The cursor names a transaction this server has not begun: no page will ever follow it."""


class CursorOfAnotherHistory(CursorBeyond):
    """The cursor was given in another history of the database (before a failover or a restore): refused."""


def changes_after(conn, organization_id, position, limit):
    """Up to `limit` changes after `position` (change_xid, id), oldest first: (position, id, revision, visible).

    The caller runs this inside db.one_snapshot and reads the shipments to show in the same
    snapshot, so each item is the state its revision names. Raises CursorOfAnotherHistory for a position
    given in another history, CursorBeyond for one past every transaction of the server; on a standby, Behind
    for either (the primary may have given it, in a history or at a transaction the standby has not replayed
    yet: the primary answers).
    """
    after_txn, after_id = position
    rows = execute_all(conn, FEED_SQL, {"organization_id": organization_id, "after_txn": str(after_txn),
                                        "after_id": after_id, "limit": limit})
    if rows[0]["other_history"] or rows[0]["beyond"]:
        if getattr(getattr(conn, "target", None), "standby", False):
            raise Behind(position)
        raise CursorOfAnotherHistory(position) if rows[0]["other_history"] else CursorBeyond(position)
    return [((int(row["change_xid"]), row["id"]), row["id"], row["revision"], row["visible"])
            for row in rows if row["id"] is not None]
