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
"""
from models.db import execute_all
from models.standby import Behind

# GET /changes: live and deleted shipments after a position, below the horizon (the first three CTEs:
# changes of transactions below it are final, module docstring), oldest change first.
# Each branch is one range scan of its (organization_id, change_xid, id) index. A deletion is ignored
# while the organization has a shipment of that id it has seen (one moved back, or an id given again
# by hand): that shipment comes whole instead. An empty page is one row of nulls saying whether the
# cursor is beyond every transaction the server has begun (`beyond`): no position handed out can be,
# so it came from another server or from before a restore, and would wait for ever.
FEED_SQL = """
WITH snapshot AS (SELECT pg_current_snapshot() AS taken),
elsewhere AS (
  SELECT a.backend_xid::text::bigint AS xid
    FROM pg_stat_activity a
   WHERE a.datname IS DISTINCT FROM current_database() AND a.backend_xid IS NOT NULL),
horizon AS (
  SELECT coalesce((SELECT min(running.xid) FROM pg_snapshot_xip(snapshot.taken) AS running (xid)
                    WHERE (running.xid::text::bigint & 4294967295) NOT IN (SELECT xid FROM elsewhere)),
                  pg_snapshot_xmax(snapshot.taken)) AS xmin
    FROM snapshot),
live AS (
  SELECT s.id, s.revision, s.change_xid, visible_to(s, %(organization_id)s) AS visible
    FROM shipments s
   WHERE s.organization_id = %(organization_id)s AND s.ever_visible
     AND (s.change_xid, s.id) > (%(after_xid)s::text::xid8, %(after_id)s::bigint)
     AND s.change_xid < (SELECT xmin FROM horizon)
   ORDER BY s.change_xid, s.id
   LIMIT %(limit)s),
gone AS (
  SELECT t.id, t.revision, t.change_xid, false AS visible
    FROM deleted_shipments t
   WHERE t.organization_id = %(organization_id)s
     AND (t.change_xid, t.id) > (%(after_xid)s::text::xid8, %(after_id)s::bigint)
     AND t.change_xid < (SELECT xmin FROM horizon)
     AND NOT EXISTS (SELECT 1 FROM shipments s
                      WHERE s.id = t.id AND s.organization_id = t.organization_id AND s.ever_visible)
   ORDER BY t.change_xid, t.id
   LIMIT %(limit)s),
page AS (
  SELECT * FROM live UNION ALL SELECT * FROM gone
   ORDER BY change_xid, id
   LIMIT %(limit)s)
SELECT c.id, c.revision, c.change_xid::text::numeric AS change_xid, c.visible,
       %(after_xid)s::text::xid8 >= pg_snapshot_xmax(snapshot.taken) AS beyond
  FROM snapshot LEFT JOIN page c ON true
 ORDER BY c.change_xid, c.id
"""


class CursorBeyond(Exception):
    """The cursor names a transaction this server has not begun: no page will ever follow it."""


def changes_after(conn, organization_id, position, limit):
    """Up to `limit` changes after `position` (change_xid, id), oldest first: (position, id, revision, visible).

    The caller runs this inside db.one_snapshot and reads the shipments to show in the same
    snapshot, so each item is the state its revision names. Raises CursorBeyond for a position past
    every transaction of the server; on a standby, Behind instead (the primary may have given it: it answers).
    """
    after_xid, after_id = position
    rows = execute_all(conn, FEED_SQL, {"organization_id": organization_id, "after_xid": str(after_xid),
                                        "after_id": after_id, "limit": limit})
    if rows[0]["beyond"]:
        raise Behind(position) if getattr(getattr(conn, "target", None), "standby", False) else CursorBeyond(position)
    return [((int(row["change_xid"]), row["id"]), row["id"], row["revision"], row["visible"])
            for row in rows if row["id"] is not None]
