"""Packing lists as the API shows them: the current ones of a visible shipment, with pallets and lines."""
from models.db import Prepared, execute_all, execute_one, group_rows

# stored_rendering: a visible shipment's revision and its stored packing-lists answer when it is current
# (rendered at this version, by this code, at this revision: the same check as a shipment's, made in the
# statement that reads it). Prepared: its plan does not depend on the values.
STORED_RENDERING_SQL = """
SELECT s.revision, r.body, r.body_md5
  FROM shipments s
  LEFT JOIN shipment_renderings r
    ON r.shipment_id = s.id AND r.resource = 'packing_lists' AND r.api_version = %(api_version)s
   AND r.renderer = %(renderer)s AND r.revision = s.revision
 WHERE s.id = %(shipment_id)s AND visible_to(s, %(organization_id)s)
"""
_STORED = Prepared("packing_lists_rendering_md5", STORED_RENDERING_SQL)

# list_shipment_packing_lists: the visible shipment (one row even without packing lists) and its
# current packing lists, oldest first: by created_at to the second (the precision every timestamp
# is shown at), then id; served by packing_lists_shipment_created_idx.
LISTS_SQL = """
SELECT s.revision AS found_revision, k.id, k.shipment_id, k.document_id, k.container_id, k.reference,
       k.declared_box_count, k.declared_net_weight_kg
  FROM shipments s
  LEFT JOIN packing_lists k ON k.shipment_id = s.id AND k.is_current
 WHERE s.id = %(shipment_id)s AND visible_to(s, %(organization_id)s)
 ORDER BY date_trunc('second', k.created_at AT TIME ZONE 'UTC'), k.id
"""

# The pallets of a set of packing lists, oldest first; served by pallets_packing_list_idx.
PALLETS_SQL = """
SELECT p.packing_list_id, p.id, p.pallet_number, p.container_id
  FROM pallets p
 WHERE p.packing_list_id = ANY (%(ids)s)
 ORDER BY p.packing_list_id, p.id
"""

# The lines of a set of pallets, by line_index; served by the (pallet_id, line_index) unique index.
LINES_SQL = """
SELECT l.pallet_id, l.id, l.line_index, l.produce_name, l.produce_type, l.variety, l.calibre,
       l.quality_category, l.pack_format, l.label, l.ggn, l.box_count, l.box_weight_kg,
       l.net_weight_kg, l.gross_weight_kg
  FROM packing_lines l
 WHERE l.pallet_id = ANY (%(ids)s)
 ORDER BY l.pallet_id, l.line_index
"""


def stored_rendering(conn, organization_id, shipment_id, api_version, renderer):
    """(revision, stored JSON or None, its MD5 or None) of a visible shipment's packing lists; None when the shipment
    is not found."""
    row = execute_one(conn, _STORED, {"organization_id": organization_id, "shipment_id": shipment_id,
                                      "api_version": api_version, "renderer": renderer})
    return None if row is None else (row["revision"], row["body"], row["body_md5"])


def list_shipment_packing_lists(conn, organization_id, shipment_id):
    """(revision, current packing lists oldest first) of a visible shipment; None when it is not found.

    Run inside db.one_snapshot when the revision must be the lists' own (a stored rendering's key).
    """
    rows = execute_all(conn, LISTS_SQL, {"organization_id": organization_id, "shipment_id": shipment_id})
    if not rows:
        return None
    revision = rows[0]["found_revision"]
    lists = [{k: v for k, v in row.items() if k != "found_revision"} for row in rows if row["id"] is not None]
    if not lists:
        return revision, []
    pallets = execute_all(conn, PALLETS_SQL, {"ids": [item["id"] for item in lists]})
    lines = {}
    if pallets:
        lines = group_rows(execute_all(conn, LINES_SQL, {"ids": [pallet["id"] for pallet in pallets]}), "pallet_id")
    for pallet in pallets:
        pallet["lines"] = lines.get(pallet["id"], [])
    by_list = group_rows(pallets, "packing_list_id")
    for item in lists:
        item["pallets"] = by_list.get(item["id"], [])
        item["totals"] = _totals(item["pallets"])
    return revision, lists


def _totals(pallets):
    """Pallets, boxes and net weight of a packing list, from its pallets and their lines."""
    lines = [line for pallet in pallets for line in pallet["lines"]]
    return {"pallets": len(pallets), "boxes": sum(line["box_count"] for line in lines),
            "net_weight_kg": sum(line["net_weight_kg"] for line in lines)}
