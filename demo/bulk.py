"""Bulk loading: rows carry batch-local ids, blocks of real ids come from the sequences, COPY writes them.

A row's own id and its references to rows of the same batch are local numbers (0, 1, ...);
at load time each table reserves one block of ids with a single statement and the local
numbers are shifted by the block's start, so children reference parents without a round trip.
"""
import io
import json
import re
from datetime import date, datetime
from decimal import Decimal

from models import migrations
from models.db import sql


class Table:
    """A table the generator fills: its columns and which of them reference rows of the batch."""

    def __init__(self, name, columns, refs=(), own_id=True):
        self.name = name
        self.own_id = own_id
        self.columns = (("id",) if own_id else ()) + tuple(columns.split())
        self.refs = dict(refs)
        self.ref_positions = [(self.columns.index(column), target) for column, target in self.refs.items()]


# In load order: parents before children.
TABLES = [Table(*spec) for spec in (
    ("shipments", """organization_id reference erp_reference transport_reference transport_type cargo_type
        temperature_celsius status awaiting_approval owned_elsewhere archived archived_at validated_at approved_at
        origin_location origin_country origin_timezone destination_location destination_country
        destination_timezone etd eta original_eta predicted_eta carrier_name carrier_scac tracking_state
        tracking_status unavailable_reason halted_reason last_tracked_at carrier_updated_at consignor consignee
        notify_party draft_produce notes load_type house_bl forwarder_reference forwarder_eta
        demurrage_free_days detention_free_days free_days_basis created_at updated_at"""),
    ("shipment_labels", "shipment_id label_id", {"shipment_id": "shipments"}, False),
    ("containers", """organization_id shipment_id number seal_number vessel voyage port_of_loading
        port_of_discharge etd eta cargo_type temperature_celsius created_at""", {"shipment_id": "shipments"}),
    ("shipment_legs", """shipment_id position transport_type carrier transport_reference origin_location
        origin_country origin_timezone destination_location destination_country destination_timezone etd eta""",
     {"shipment_id": "shipments"}),
    ("tracking_events", """shipment_id milestone actual occurred_at occurred_at_offset_minutes container_number
        leg_index location_name location_code location_country_code vessel_name vessel_imo vessel_voyage
        flight_number latitude longitude created_at""", {"shipment_id": "shipments"}),
    ("eta_revisions", "shipment_id observed_at previous_eta new_eta first_estimate backfilled",
     {"shipment_id": "shipments"}),
    ("documents", """organization_id shipment_id type filename content_type byte_size source parse_status
        page_range record_kind replaced_by_id storage_key scan_state created_at updated_at""",
     {"shipment_id": "shipments", "replaced_by_id": "documents"}),
    ("document_data", "document_id schema fields extracted_at", {"document_id": "documents"}, False),
    ("arrival_notices", """shipment_id document_id received_at demurrage_free_days detention_free_days
        free_days_basis""", {"shipment_id": "shipments", "document_id": "documents"}),
    ("packing_lists", """organization_id shipment_id document_id container_id reference declared_box_count
        declared_net_weight_kg is_current created_at""",
     {"shipment_id": "shipments", "document_id": "documents", "container_id": "containers"}),
    ("pallets", "shipment_id packing_list_id container_id pallet_number",
     {"shipment_id": "shipments", "packing_list_id": "packing_lists", "container_id": "containers"}),
    ("packing_lines", """pallet_id shipment_id line_index produce_name produce_type variety calibre
        quality_category pack_format label ggn organic box_count box_weight_kg net_weight_kg gross_weight_kg""",
     {"pallet_id": "pallets", "shipment_id": "shipments"}),
    ("check_runs", "organization_id shipment_id started_at finished_at", {"shipment_id": "shipments"}),
    ("checks", """organization_id shipment_id check_run_id key category status title message ran_at""",
     {"shipment_id": "shipments", "check_run_id": "check_runs"}),
    ("alerts", """organization_id shipment_id key severity title summary since first_detected_at
        last_detected_at resolved_at""", {"shipment_id": "shipments"}),
)]
TABLES_BY_NAME = {t.name: t for t in TABLES}


class Batch:
    """Rows of many tables waiting to be loaded together."""

    def __init__(self):
        self.rows = {t.name: [] for t in TABLES}

    def add(self, table, **values):
        """Queue a row; returns its local id (meaningless for tables without an id)."""
        spec = TABLES_BY_NAME[table]
        rows = self.rows[table]
        local = len(rows)
        if spec.own_id:
            values["id"] = local
        rows.append(tuple(map(values.get, spec.columns)))
        return local

    def update(self, table, local, **changes):
        """Change columns of a queued row."""
        columns = TABLES_BY_NAME[table].columns
        row = list(self.rows[table][local])
        for name, value in changes.items():
            row[columns.index(name)] = value
        self.rows[table][local] = tuple(row)

    def count(self, table):
        """Number of queued rows of a table."""
        return len(self.rows[table])


# Reserve n ids at once: the sequence jumps by n and the block is [last - n + 1, last].
# nextval and setval are two steps: the seed's own loaders take turns under an advisory lock;
# another writer's nextval landing in between would make the COPY fail, never mix rows.
RESERVE_IDS = """SELECT setval(pg_get_serial_sequence(%(table)s, 'id'),
                               nextval(pg_get_serial_sequence(%(table)s, 'id')) + %(n)s - 1) AS last"""
ID_LOCK = "SELECT pg_advisory_lock(hashtext('demo seed ids'))"
ID_UNLOCK = "SELECT pg_advisory_unlock(hashtext('demo seed ids'))"


def reserve_ids(conn, counts):
    """The first id of a block reserved from each table's sequence ({table: n} in, {table: first} out)."""
    bases = {}
    with conn.cursor() as cur:
        cur.execute(ID_LOCK)
        try:
            for table, n in counts.items():
                cur.execute(RESERVE_IDS, {"table": table, "n": n})
                bases[table] = cur.fetchone()["last"] - n + 1
        finally:
            cur.execute(ID_UNLOCK)
    return bases


# The migration from which the keys to shipments are deferrable (schema.sql, before shipment_renderings).
# On a schema before it (the upgrade tests seed at migrations 1 and 5) the batch loads parents first
# and each child table's insert touches its shipments, so the derived columns are still right.
DEFERRABLE_KEYS_MIGRATION = 11
# The keys to shipments are checked at commit, so each shipment is written after its other rows:
# its insert (shipments_before_write) then computes the derived columns once, from all of them.
DEFER_SHIPMENT_KEYS = "SET CONSTRAINTS ALL DEFERRED"
# The child tables' touch triggers (schema.sql touch_parent_shipments) have nothing to do meanwhile:
# the shipments they would touch are not written yet.
DEFER_TOUCH = "SET LOCAL shiptrack.defer_touch = 'on'"
# What the batch writes is history, not news: check runs and alerts write no webhook events.
HISTORY = "SET LOCAL shiptrack.history = 'on'"
# A batch's commit need not wait for the WAL flush: a server crash that loses the last batches
# leaves a half-loaded demo, as a crash during the seed does anyway (`demo seed --reset` again).
NO_FLUSH_WAIT = "SET LOCAL synchronous_commit = off"
# Once the rows are in: the deferred keys are checked now (an error is the load's, not a later
# statement's), and whatever the caller writes next in this transaction touches as usual.
CHECK_SHIPMENT_KEYS = "SET CONSTRAINTS ALL IMMEDIATE"
END_DEFERRAL = "SET LOCAL shiptrack.defer_touch = 'off'"
# Shipments after every row their insert reads, and ETA revisions last: they replace the ones that
# insert writes (the seed's after_table hook deletes those).
SHIPMENTS_LAST = ([t for t in TABLES if t.name not in ("shipments", "eta_revisions")]
                  + [TABLES_BY_NAME["shipments"], TABLES_BY_NAME["eta_revisions"]])


def load(conn, batch, after_table=None):
    """Reserve ids for every table of the batch and COPY its rows, shipments after their other rows;
    returns first ids.

    `after_table(name, bases)` runs right after a table is loaded (the seed uses it to replace
    the ETA revisions the shipments trigger wrote with the planned histories).
    """
    deferrable = DEFERRABLE_KEYS_MIGRATION in migrations.applied_versions(conn)
    bases = reserve_ids(conn, {t.name: batch.count(t.name) for t in TABLES if t.own_id and batch.count(t.name)})
    with conn.cursor() as cur:
        cur.execute(HISTORY)
        cur.execute(NO_FLUSH_WAIT)
        if deferrable:
            cur.execute(DEFER_SHIPMENT_KEYS)
            cur.execute(DEFER_TOUCH)
    for spec in SHIPMENTS_LAST if deferrable else TABLES:
        rows = batch.rows[spec.name]
        if rows:
            _copy(conn, spec, rows, bases)
        if after_table:
            after_table(spec.name, bases)
    if deferrable:
        with conn.cursor() as cur:
            cur.execute(CHECK_SHIPMENT_KEYS)
            cur.execute(END_DEFERRAL)
    return bases


def _copy(conn, spec, rows, bases):
    shifts = [(position, bases[target]) for position, target in spec.ref_positions]
    if spec.own_id:
        shifts.append((0, bases[spec.name]))
    buffer = io.StringIO()
    write, formats = buffer.write, _FORMATS
    for row in rows:
        if shifts:
            row = list(row)
            for position, base in shifts:
                if row[position] is not None:
                    row[position] += base
        write("\t".join([formats[type(v)](v) for v in row]))
        write("\n")
    buffer.seek(0)
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(spec.name), sql.SQL(", ").join(map(sql.Identifier, spec.columns)))
    with conn.cursor() as cur:
        cur.copy_expert(statement.as_string(conn), buffer)


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")


def _str(value):
    return value.translate(_ESCAPES) if _NEEDS_ESCAPE.search(value) else value


def _array(value):
    items = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in value)
    return _str("{" + ",".join(items) + "}")


# COPY text format per Python type; one dict lookup per value keeps a million shipments fast.
_FORMATS = {
    str: _str, int: str, float: repr, Decimal: str, datetime: datetime.isoformat, date: date.isoformat,
    list: _array, tuple: _array, dict: lambda value: _str(json.dumps(value, ensure_ascii=False)),
    bool: lambda value: "t" if value else "f", type(None): lambda value: "\\N",
}


# Trigram (GIN) indexes of the tables the seed fills: a large load drops them and builds them
# once at the end: building one from all rows is far cheaper than growing it row by row.  schema.sql
# creates them again too (`flask db init`), should a load die before rebuilding them.
GIN_INDEXES = """SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = current_schema() AND tablename = ANY (%(tables)s) AND indexdef LIKE '%% USING gin %%'
 ORDER BY indexname"""


def drop_gin_indexes(conn):
    """Drop the trigram indexes of the loaded tables; returns their definitions (committed)."""
    with conn.cursor() as cur:
        cur.execute(GIN_INDEXES, {"tables": [t.name for t in TABLES]})
        indexes = [(row["indexname"], row["indexdef"]) for row in cur.fetchall()]
        for name, _definition in indexes:
            cur.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
    conn.commit()
    return indexes


def create_indexes(conn, indexes):
    """Build the dropped indexes again (committed)."""
    with conn.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '256MB'")
        for _name, definition in indexes:
            cur.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
    conn.commit()
