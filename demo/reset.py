"""`demo seed --reset`: delete a demo organization and everything it owns, fast even at a million shipments.

A plain `DELETE FROM organizations` cascades row by row: every deleted shipment runs one
statement per child table (each firing the refresh triggers), and foreign keys without an
index of their own are checked by scanning the whole child table per deleted row.  So the
reset deletes bottom-up, one set-based statement per table.  When the session may switch
off triggers (superuser) and no unknown table refers to the demo tables, it does so for
those statements (skipping the refresh triggers on rows about to vanish); otherwise it
builds temporary indexes for the unindexed foreign keys and lets the cascade run.
"""

_SHIPMENTS = "(SELECT id FROM shipments WHERE organization_id = %(org)s)"

# Bottom-up: each statement deletes rows nothing left behind refers to.
BOTTOM_UP = (
    f"DELETE FROM packing_lines WHERE shipment_id IN {_SHIPMENTS}",
    f"DELETE FROM pallets WHERE shipment_id IN {_SHIPMENTS}",
    "DELETE FROM packing_lists WHERE organization_id = %(org)s",
    "DELETE FROM document_data WHERE document_id IN (SELECT id FROM documents WHERE organization_id = %(org)s)",
    f"DELETE FROM arrival_notices WHERE shipment_id IN {_SHIPMENTS}",
    "DELETE FROM documents WHERE organization_id = %(org)s",
    "DELETE FROM checks WHERE organization_id = %(org)s",
    "DELETE FROM check_runs WHERE organization_id = %(org)s",
    "DELETE FROM alerts WHERE organization_id = %(org)s",
    f"DELETE FROM tracking_events WHERE shipment_id IN {_SHIPMENTS}",
    f"DELETE FROM eta_revisions WHERE shipment_id IN {_SHIPMENTS}",
    f"DELETE FROM shipment_legs WHERE shipment_id IN {_SHIPMENTS}",
    f"DELETE FROM shipment_labels WHERE shipment_id IN {_SHIPMENTS}",
    "DELETE FROM containers WHERE organization_id = %(org)s",
    "DELETE FROM shipments WHERE organization_id = %(org)s",
)
DELETED_TABLES = {"packing_lines", "pallets", "packing_lists", "document_data", "arrival_notices", "documents",
                  "checks", "check_runs", "alerts", "tracking_events", "eta_revisions", "shipment_legs",
                  "shipment_labels", "containers", "shipments", "events"}

# Tables that refer to the ones deleted bottom-up: all must be known, or triggers stay on.
REFERRING_TABLES = """
SELECT DISTINCT conrelid::regclass::text AS child FROM pg_constraint
 WHERE contype = 'f' AND confrelid::regclass::text = ANY (%(parents)s)"""
# Whether this session may switch triggers off (session_replication_role is superuser-only).
IS_SUPERUSER = "SELECT current_setting('is_superuser') = 'on' AS superuser"
# Events first, with triggers on, so their deliveries and attempts cascade.
DELETE_EVENTS = "DELETE FROM events WHERE organization_id = %(org)s"
DELETE_ORGANIZATION = "DELETE FROM organizations WHERE id = %(org)s"

# Foreign keys the cascade checks by scanning without these (dropped again before commit).
TEMPORARY_INDEXES = (
    ("documents", "shipment_id"), ("documents", "replaced_by_id"), ("alerts", "shipment_id"),
    ("check_runs", "shipment_id"), ("arrival_notices", "document_id"), ("packing_lists", "document_id"),
    ("packing_lists", "container_id"), ("pallets", "container_id"), ("events", "shipment_id"),
    ("events", "alert_id"), ("events", "check_run_id"),
)


def delete_organization(conn, organization_id):
    """Delete one organization with all its rows; the caller commits."""
    params = {"org": organization_id}
    with conn.cursor() as cur:
        cur.execute(DELETE_EVENTS, params)
        if _may_skip_triggers(cur):
            cur.execute("SET LOCAL session_replication_role = replica")
            for statement in BOTTOM_UP:
                cur.execute(statement, params)
            cur.execute("SET LOCAL session_replication_role = origin")
        else:
            for table, column in TEMPORARY_INDEXES:
                cur.execute(f"CREATE INDEX demo_reset_{table}_{column} ON {table} ({column})")
            for statement in BOTTOM_UP:
                cur.execute(statement, params)
            for table, column in TEMPORARY_INDEXES:
                cur.execute(f"DROP INDEX demo_reset_{table}_{column}")
        cur.execute(DELETE_ORGANIZATION, params)


def _may_skip_triggers(cur):
    cur.execute(IS_SUPERUSER)
    if not cur.fetchone()["superuser"]:
        return False
    cur.execute(REFERRING_TABLES, {"parents": sorted(DELETED_TABLES - {"events"})})
    return {row["child"] for row in cur.fetchall()} <= DELETED_TABLES
