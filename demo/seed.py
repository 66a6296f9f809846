"""The seed: demo organizations, their people and settings, then shipments in COPY batches."""
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from demo import batches, bulk, catalog, reset as demo_reset
from models import db, organizations

ORGANIZATIONS = (("acme", "Acme Fresh Imports"), ("globex", "Globex Produce"))
# From this many shipments on, search indexes are dropped during the load and built after it.
BULK_INDEX_THRESHOLD = 50_000
# Past this index documents point at shared sample files instead of a file each.
FILE_LIMIT = 2000

# alert_kinds: the kinds the demo raises; internal ones are never shown.
UPSERT_ALERT_KIND = """INSERT INTO alert_kinds (key, "group", customer_visible) VALUES (%(key)s, %(group)s, %(visible)s)
ON CONFLICT (key) DO NOTHING"""
# produce_aliases: names searches understand.
UPSERT_ALIAS = """INSERT INTO produce_aliases (alias, produce_name) VALUES (%(alias)s, %(produce)s)
ON CONFLICT (alias) DO NOTHING"""
# labels: the organization's label set.
INSERT_LABEL = """INSERT INTO labels (organization_id, name, color) VALUES (%(org)s, %(name)s, %(color)s)
RETURNING id, name"""
# carrier_terms: free days agreed with a carrier.
INSERT_TERMS = """INSERT INTO carrier_terms (organization_id, carrier, demurrage_free_days, detention_free_days,
free_days_basis) VALUES (%(org)s, %(carrier)s, %(dem)s, %(det)s, %(basis)s)"""
# A live ETA change after loading, so the trigger's own revisions (and events) appear too.
MOVE_ETA = "UPDATE shipments SET eta = eta + %(by)s * interval '1 minute' WHERE id = %(id)s"


class Org:
    """One demo organization being seeded, and what its plans share."""

    def __init__(self, row, slug, count, now, storage_dir):
        self.id, self.slug, self.count, self.now = row["id"], slug, count, now
        self.importer = catalog.IMPORTERS[slug]
        self.storage_dir, self.shared_files = storage_dir, {}
        self.file_limit = FILE_LIMIT
        self.reference_offset = 0
        self.batch_size = batches.BATCH_SIZE
        self.label_ids = {}


class Options:
    """What `demo seed` was asked for."""

    def __init__(self, shipments=300, others=40, seed_value=1, reset=False, workers=1, now=None,
                 batch_size=batches.BATCH_SIZE):
        self.counts, self.seed_value, self.reset, self.workers = (shipments, others), seed_value, reset, workers
        self.now = now or datetime.now(timezone.utc).replace(second=0, microsecond=0)
        self.batch_size = batch_size


def seed(url, storage_dir, options, echo=print):
    """Create the demo organizations and their shipments; returns per-organization row counts."""
    conn = db.connect(url)
    try:
        _reference_rows(conn)
        results = {}
        for (slug, name), count in zip(ORGANIZATIONS, options.counts):
            existing = organizations.get_organization_by_slug(conn, slug)
            if existing and not options.reset:
                echo(f"{slug}: already exists, left unchanged (use --reset to recreate it)")
                continue
            if existing:
                started = time.monotonic()
                demo_reset.delete_organization(conn, existing["id"])
                echo(f"{slug}: deleted in {time.monotonic() - started:.1f}s")
                shutil.rmtree(Path(storage_dir) / "demo" / slug, ignore_errors=True)
            conn.commit()
            started = time.monotonic()
            results[slug] = _organization_with_shipments(url, conn, storage_dir, slug, name, count, options, echo)
            echo(f"{slug}: {count} shipments in {time.monotonic() - started:.1f}s")
        with conn.cursor() as cur:
            cur.execute(batches.ANALYZE)
        conn.commit()
        return results
    finally:
        conn.close()


def _organization_with_shipments(url, conn, storage_dir, slug, name, count, options, echo):
    org = Org(_organization(conn, slug, name), slug, count, options.now, storage_dir)
    org.batch_size = options.batch_size
    _settings(conn, org)
    conn.commit()
    indexes = bulk.drop_gin_indexes(conn) if count >= BULK_INDEX_THRESHOLD else []
    try:
        return _shipments(url, conn, org, options.seed_value, options.workers, echo)
    except BaseException:
        # Batches commit as they go: take a half-loaded organization away again.
        conn.rollback()
        demo_reset.delete_organization(conn, org.id)
        conn.commit()
        raise
    finally:
        if indexes:
            echo(f"{slug}: building {len(indexes)} search indexes")
            bulk.create_indexes(conn, indexes)


def _reference_rows(conn):
    with conn.cursor() as cur:
        for key, group, visible in catalog.ALERT_KINDS:
            cur.execute(UPSERT_ALERT_KIND, {"key": key, "group": group, "visible": visible})
        for alias, produce in catalog.PRODUCE_ALIASES:
            cur.execute(UPSERT_ALIAS, {"alias": alias, "produce": produce})
    conn.commit()


def _organization(conn, slug, name):
    org = organizations.create_organization(conn, name, slug)
    for role in ("owner", "admin", "member"):
        user = organizations.ensure_user(conn, f"{role}@{slug}.example", f"{role.title()} of {name}")
        organizations.add_member(conn, org["id"], user["id"], role)
    return org


def _settings(conn, org):
    with conn.cursor() as cur:
        for name, color in catalog.LABELS:
            cur.execute(INSERT_LABEL, {"org": org.id, "name": name, "color": color})
            row = cur.fetchone()
            org.label_ids[row["name"]] = row["id"]
        for carrier, (dem, det, basis) in catalog.CARRIER_TERMS[org.slug].items():
            cur.execute(INSERT_TERMS, {"org": org.id, "carrier": carrier, "dem": dem, "det": det, "basis": basis})


def _shipments(url, conn, org, seed_value, workers, echo):
    live = batches.load_all(url, conn, org, seed_value, workers, echo)
    with conn.cursor() as cur:
        for shipment_id in live:
            cur.execute(MOVE_ETA, {"id": shipment_id, "by": 3})   # under 5 minutes: no revision
            cur.execute(MOVE_ETA, {"id": shipment_id, "by": 360})  # the trigger records this one
    conn.commit()
    return _counts(conn, org)


# Summary: rows per table belonging to one organization.
COUNT_SQL = {
    "shipments": "SELECT count(*) FROM shipments WHERE organization_id = %(org)s",
    "containers": "SELECT count(*) FROM containers WHERE organization_id = %(org)s",
    "tracking_events": "SELECT count(*) FROM tracking_events e JOIN shipments s ON s.id = e.shipment_id "
                       "WHERE s.organization_id = %(org)s",
    "eta_revisions": "SELECT count(*) FROM eta_revisions r JOIN shipments s ON s.id = r.shipment_id "
                     "WHERE s.organization_id = %(org)s",
    "documents": "SELECT count(*) FROM documents WHERE organization_id = %(org)s",
    "packing_lines": "SELECT count(*) FROM packing_lines l JOIN shipments s ON s.id = l.shipment_id "
                     "WHERE s.organization_id = %(org)s",
    "checks": "SELECT count(*) FROM checks WHERE organization_id = %(org)s",
    "alerts": "SELECT count(*) FROM alerts WHERE organization_id = %(org)s",
}


def _counts(conn, org):
    counts = {}
    with conn.cursor() as cur:
        for table, statement in COUNT_SQL.items():
            cur.execute(statement, {"org": org.id})
            counts[table] = cur.fetchone()["count"]
    return counts
