"""Shipment aggregates two ways: as the database keeps them, and recomputed from scratch for comparison."""

COLUMNS = ("checks_total", "checks_passed", "checks_failed", "checks_warnings", "checks_skipped", "checks_pending",
           "cargo_pallets", "cargo_boxes", "cargo_net_weight_kg", "cargo_gross_weight_kg", "organic", "produce")

# The checks summary, cargo, organic and produce of every shipment as GET /shipments computed them per
# request before they were kept on write (models/shipments.py LIST_SQL up to migration 6), written
# independently of schema.sql's shipment_derived; the draft-entry fallback is applied in Python below.
FROM_SCRATCH_SQL = """
SELECT s.id, s.draft_produce, pa.has_packing_list,
       ck.total AS checks_total, ck.passed AS checks_passed, ck.failed AS checks_failed,
       ck.warnings AS checks_warnings, ck.skipped AS checks_skipped, ck.pending AS checks_pending,
       pa.pallets AS cargo_pallets, ln.boxes AS cargo_boxes, ln.net_weight_kg AS cargo_net_weight_kg,
       ln.gross_weight_kg AS cargo_gross_weight_kg, ln.organic, ln.produce
  FROM shipments s
  CROSS JOIN LATERAL (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE c.status = 'passed') AS passed,
           count(*) FILTER (WHERE c.status = 'failed') AS failed,
           count(*) FILTER (WHERE c.status = 'warning') AS warnings,
           count(*) FILTER (WHERE c.status = 'skipped') AS skipped,
           count(*) FILTER (WHERE c.status = 'pending') AS pending
      FROM checks c WHERE c.shipment_id = s.id) ck
  CROSS JOIN LATERAL (
    SELECT count(*) AS pallets,
           EXISTS (SELECT 1 FROM packing_lists k
                    WHERE k.shipment_id = s.id AND k.is_current) AS has_packing_list
      FROM pallets pl LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
     WHERE pl.shipment_id = s.id AND (k.id IS NULL OR k.is_current)) pa
  CROSS JOIN LATERAL (
    SELECT coalesce(sum(l.box_count), 0) AS boxes,
           coalesce(sum(l.net_weight_kg), 0) AS net_weight_kg,
           coalesce(sum(l.gross_weight_kg), 0) AS gross_weight_kg,
           coalesce(bool_or(l.organic) FILTER (WHERE k.id IS NOT NULL), false) AS organic,
           coalesce(array_agg(DISTINCT l.produce_name ORDER BY l.produce_name)
                    FILTER (WHERE k.id IS NOT NULL), '{}'::text[]) AS produce
      FROM packing_lines l
      JOIN pallets pl ON pl.id = l.pallet_id
      LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
     WHERE l.shipment_id = s.id AND (k.id IS NULL OR k.is_current)) ln
 ORDER BY s.id
"""


def from_scratch(conn):
    """{shipment id: {column: value}} recomputed from checks, pallets, packing lists and lines."""
    with conn.cursor() as cur:
        cur.execute(FROM_SCRATCH_SQL)
        rows = cur.fetchall()
    found = {}
    for row in rows:
        values = {column: row[column] for column in COLUMNS}
        if not row["has_packing_list"]:
            values["produce"] = sorted(set(name for name in row["draft_produce"] if name is not None))
        found[row["id"]] = values
    return found


def stored(conn):
    """{shipment id: {column: value}} as the shipments table keeps them."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {', '.join(COLUMNS)} FROM shipments ORDER BY id")
        return {row["id"]: {column: row[column] for column in COLUMNS} for row in cur.fetchall()}


def exact(values):
    """The values with their exact representation (Decimal('0') and Decimal('0.000') differ in JSON)."""
    return {key: {column: repr(value) for column, value in row.items()} for key, row in values.items()}
