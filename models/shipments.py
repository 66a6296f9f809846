"""Shipments as the API shows them: one page (or one shipment) in a constant number of statements."""
import re

import psycopg2.extensions

from models.db import DatabaseUnavailable, execute, execute_all, group_rows

# rendered_page: a page of visible shipments (the filters of GET /shipments and GET /shipments/{id}: the
# shipment_page function of schema.sql, inlined here with these values), each with its stored rendering
# when it is current: rendered at this version, by this code (`renderer`, a digest of what shapes a
# shipment), at the shipment's revision. The freshness check is in the statement that reads, so a stale
# rendering is never returned. page_digests reads the same page without the renderings, only their MD5s:
# the process keeps the renderings it has read (rendering/shipment_renderings.py).
_PAGE_READ = """
  FROM shipment_page(organization_id => %(organization_id)s, page_size => %(limit)s,
                     shipment_id => %(shipment_id)s::bigint, shipment_ids => %(shipment_ids)s::bigint[],
                     archived => %(archived)s::boolean, statuses => %(statuses)s::text[],
                     created_after => %(created_after)s::timestamptz,
                     created_before => %(created_before)s::timestamptz,
                     eta_after => %(eta_after)s::timestamptz, eta_before => %(eta_before)s::timestamptz,
                     starting_after => %(starting_after)s::bigint, label_ids => %(label_ids)s::bigint[],
                     q => %(q)s, q_like => %(q_like)s, q_compact_like => %(q_compact_like)s,
                     q_alias_regex => %(q_alias_regex)s, q_fuzzy => %(q_fuzzy)s) p
  LEFT JOIN shipment_renderings r
    ON r.shipment_id = p.id AND r.resource = 'shipment' AND r.api_version = %(api_version)s
   AND r.renderer = %(renderer)s
   AND r.revision = p.revision
 ORDER BY p.id DESC
"""
RENDERED_PAGE_SQL = "SELECT p.id, r.body, r.body_md5" + _PAGE_READ
PAGE_DIGESTS_SQL = "SELECT p.id, NULL AS body, r.body_md5" + _PAGE_READ

# list_shipments: visible shipments read whole (the page's misses, or one shipment), newest first. The
# checks summary, cargo, organic and produce are columns kept by the database on write (schema.sql
# shipment_derived), never aggregated here.
LIST_SQL = """
SELECT p.id, p.reference, p.erp_reference, p.transport_reference, p.transport_reference_type,
       p.transport_type, p.cargo_type, p.temperature_celsius, p.status, p.archived, p.archived_at,
       p.validated_at, p.approved_at,
       p.origin_location, p.origin_country, p.origin_timezone,
       p.destination_location, p.destination_country, p.destination_timezone,
       p.etd, p.eta, p.effective_eta, p.original_eta, p.predicted_eta,
       p.carrier_name, p.carrier_scac,
       p.tracking_state, p.tracking_status, p.unavailable_reason, p.halted_reason,
       p.last_tracked_at, p.carrier_updated_at,
       p.consignor, p.consignee, p.notify_party, p.notes,
       p.load_type, p.house_bl, p.forwarder_reference, p.forwarder_eta,
       p.created_at, p.updated_at, p.revision,
       p.checks_total, p.checks_passed, p.checks_failed, p.checks_warnings, p.checks_skipped, p.checks_pending,
       p.cargo_pallets, p.cargo_boxes, p.cargo_net_weight_kg, p.cargo_gross_weight_kg, p.organic, p.produce
  FROM shipment_page(organization_id => %(organization_id)s, page_size => %(limit)s,
                     shipment_id => %(shipment_id)s::bigint, shipment_ids => %(shipment_ids)s::bigint[]) p
 ORDER BY p.id DESC
"""

# stored_bodies: the current stored renderings of shipments a page named by their MD5 (page_digests), for
# those the process does not keep; one replaced meanwhile comes as it is now (a newer revision).
STORED_BODIES_SQL = """
SELECT r.shipment_id, r.body, r.body_md5 FROM shipment_renderings r
 WHERE r.shipment_id = ANY (%(ids)s::bigint[]) AND r.resource = 'shipment' AND r.api_version = %(api_version)s
   AND r.renderer = %(renderer)s
"""

# Store renderings made on a miss (of a shipment, or of its packing lists: `resource`); a newer revision
# (or another renderer) replaces an older one. In id order, so that two requests storing overlapping
# pages lock rows in the same order.
STORE_RENDERINGS_SQL = """
INSERT INTO shipment_renderings AS r (shipment_id, api_version, resource, renderer, revision, body)
SELECT f.shipment_id, %(api_version)s, %(resource)s, %(renderer)s, f.revision, f.body
  FROM unnest(%(ids)s::bigint[], %(revisions)s::bigint[], %(bodies)s::text[]) AS f (shipment_id, revision, body)
 ORDER BY f.shipment_id
ON CONFLICT (shipment_id, api_version, resource) DO UPDATE
   SET renderer = EXCLUDED.renderer, revision = EXCLUDED.revision, body = EXCLUDED.body, rendered_at = now()
 WHERE r.revision < EXCLUDED.revision OR r.renderer <> EXCLUDED.renderer
"""

# rendered_page with q: produce names that a query names by one of their aliases.
ALIASES_SQL = """
SELECT DISTINCT a.produce_name FROM produce_aliases a WHERE a.alias LIKE lower(%(q_like)s)
"""


# shipment containers, oldest first (created_at to the second, the precision timestamps are shown
# at, then id), for a set of shipments; served by containers_shipment_created_idx.
CONTAINERS_SQL = """
SELECT c.shipment_id, c.id, c.number, c.seal_number, c.vessel, c.voyage, c.port_of_loading,
       c.port_of_discharge, c.etd, c.eta, c.cargo_type, c.temperature_celsius
  FROM containers c
 WHERE c.shipment_id = ANY (%(ids)s)
 ORDER BY c.shipment_id, date_trunc('second', c.created_at AT TIME ZONE 'UTC'), c.id
"""

# shipment labels, sorted by name, for a set of shipments.
LABELS_SQL = """
SELECT sl.shipment_id, l.id, l.name, l.color, l.color_hex
  FROM shipment_labels sl JOIN labels l ON l.id = sl.label_id
 WHERE sl.shipment_id = ANY (%(ids)s)
 ORDER BY l.name, l.id
"""

# rendered_page's filters (shipment_page's), each None when not given.
FILTERS = ("shipment_id", "shipment_ids", "archived", "statuses", "created_after", "created_before",
           "eta_after", "eta_before", "starting_after", "label_ids", "q")


def _like_pattern(text):
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# Below this length a misspelling cannot be told from another word, so names match only partially.
FUZZY_MIN_LENGTH = 5


def search_params(q):
    """The parameters of the free-text search for `q` (None when there is no search)."""
    # Surrounding whitespace is not part of the query; a blank query is no search (spec: empty value).
    q = q.strip() if q else q
    if not q:
        return {"q": None, "q_like": None, "q_compact_like": None, "q_fuzzy": None, "q_alias_regex": None}
    compact = q.upper().replace(" ", "").replace("-", "")
    return {"q": q, "q_like": _like_pattern(q),
            "q_compact_like": _like_pattern(compact) if compact else None,
            "q_fuzzy": q if len(q) >= FUZZY_MIN_LENGTH else None,
            "q_alias_regex": None}


def _alias_regex(cur, params):
    """A regular expression for the produce names the query names by alias, or None."""
    if params["q"] is None:
        return None
    cur.execute(ALIASES_SQL, params)
    names = [row["produce_name"] for row in cur.fetchall()]
    return "(" + "|".join(re.escape(name) for name in names) + ")" if names else None


def rendered_page(conn, organization_id, limit, api_version, renderer, **filters):
    """Ids of up to `limit` visible shipments, newest first, each with its current stored rendering or None."""
    return [(shipment_id, body) for shipment_id, body, _md5
            in _rendered_rows(conn, RENDERED_PAGE_SQL, organization_id, limit, api_version, renderer, False, filters)]


def rendered_page_bytes(conn, organization_id, limit, api_version, renderer, **filters):
    """rendered_page's rows as (id, stored JSON or None, its MD5 or None), the JSON as the driver's bytes."""
    return _rendered_rows(conn, RENDERED_PAGE_SQL, organization_id, limit, api_version, renderer, True, filters)


def page_digests(conn, organization_id, limit, api_version, renderer, **filters):
    """rendered_page's rows as (id, None, MD5 of its current stored rendering or None): the page's one statement."""
    return _rendered_rows(conn, PAGE_DIGESTS_SQL, organization_id, limit, api_version, renderer, False, filters)


def _rendered_rows(conn, sql, organization_id, limit, api_version, renderer, as_bytes, filters):
    params = {name: None for name in FILTERS}
    params.update(filters)
    params.update(search_params(params.pop("q")))
    params.update(organization_id=organization_id, limit=limit, api_version=api_version, renderer=renderer)
    with conn.cursor() as cur:
        params["q_alias_regex"] = _alias_regex(cur, params)
        if as_bytes:   # text columns as the bytes the driver received, never decoded: they are sent as they are
            psycopg2.extensions.register_type(psycopg2.extensions.BYTES, cur)
        cur.execute(sql, params)
        return [(row["id"], row["body"], _text(row["body_md5"])) for row in cur.fetchall()]


def stored_bodies(conn, ids, api_version, renderer):
    """{id: (stored JSON as bytes, its MD5)} of the shipments `ids` that have a current stored rendering."""
    with conn.cursor() as cur:
        psycopg2.extensions.register_type(psycopg2.extensions.BYTES, cur)
        cur.execute(STORED_BODIES_SQL, {"ids": list(ids), "api_version": api_version, "renderer": renderer})
        return {row["shipment_id"]: (row["body"], row["body_md5"].decode()) for row in cur.fetchall()}


def _text(value):
    """A text column read as bytes, as text (None stays None)."""
    return value.decode() if type(value) is bytes else value


def store_renderings(conn, api_version, renderer, renderings, resource="shipment"):
    """Keep (id, revision, body) renderings of shipments (or of their packing lists) for later reads."""
    if not renderings:
        return
    # Read on a standby: stored on the request's primary (api.context sets `writer`), unless it is away.
    if getattr(getattr(conn, "target", None), "standby", False):
        try:
            conn = conn.writer()
        except (AttributeError, TypeError, DatabaseUnavailable):
            return
    ids, revisions, bodies = zip(*renderings)
    execute(conn, STORE_RENDERINGS_SQL, {"api_version": api_version, "renderer": renderer, "resource": resource,
                                         "ids": list(ids), "revisions": list(revisions), "bodies": list(bodies)})


def list_shipments(conn, organization_id, limit, shipment_id=None, shipment_ids=None):
    """Up to `limit` visible shipments (of these ids, when given), newest first, fully assembled."""
    rows = execute_all(conn, LIST_SQL, {"organization_id": organization_id, "limit": limit,
                                        "shipment_id": shipment_id, "shipment_ids": shipment_ids})
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    containers = group_rows(execute_all(conn, CONTAINERS_SQL, {"ids": ids}), "shipment_id")
    labels = group_rows(execute_all(conn, LABELS_SQL, {"ids": ids}), "shipment_id")
    return [_assemble(row, containers.get(row["id"], []), labels.get(row["id"], [])) for row in rows]


def get_shipment(conn, organization_id, shipment_id):
    """One visible shipment (archived included), or None."""
    found = list_shipments(conn, organization_id, 1, shipment_id=shipment_id)
    return found[0] if found else None


def _place(row, prefix):
    return {"location": row[prefix + "_location"], "country": row[prefix + "_country"],
            "timezone": row[prefix + "_timezone"]}


def _assemble(row, containers, labels):
    """Nest a flat row into the Shipment shape."""
    return {
        **row,
        "origin": _place(row, "origin"),
        "destination": _place(row, "destination"),
        "carrier": {"name": row["carrier_name"], "scac": row["carrier_scac"]},
        "tracking": {"state": row["tracking_state"], "status": row["tracking_status"],
                     "unavailable_reason": row["unavailable_reason"], "halted_reason": row["halted_reason"],
                     "last_tracked_at": row["last_tracked_at"], "carrier_updated_at": row["carrier_updated_at"]},
        "parties": {"consignor": row["consignor"], "consignee": row["consignee"],
                    "notify_party": row["notify_party"]},
        "cargo": {"pallets": row["cargo_pallets"], "boxes": row["cargo_boxes"],
                  "net_weight_kg": row["cargo_net_weight_kg"], "gross_weight_kg": row["cargo_gross_weight_kg"]},
        "checks": {"total": row["checks_total"], "passed": row["checks_passed"], "failed": row["checks_failed"],
                   "warnings": row["checks_warnings"], "skipped": row["checks_skipped"],
                   "pending": row["checks_pending"]},
        "containers": containers,
        "labels": labels,
    }
