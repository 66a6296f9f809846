"""Shipments as the API shows them: one page (or one shipment) in a constant number of statements."""
import re

from models.db import group_rows

# list_shipments: a page of visible shipments, newest first. The checks summary, cargo, organic and
# produce are columns kept by the database on write (schema.sql shipment_derived), never aggregated here.
# Optional filters are `(%(x)s IS NULL OR ...)`; psycopg2 inlines the values, so the
# planner folds away the filters that are not used.
# Time bounds compare at the precision responses show (the second), so a bound copied from a
# response matches its item: `shown >= after` is `col >= ceil(after)` and `shown <= before` is
# `col < floor(before) + 1 s`. The bound is widened rather than the column truncated, so
# shipments_created_at_idx and shipments_effective_eta_idx still serve the filters.
# The `page` CTE is written out the same in RENDERED_PAGE_SQL (tests/database/test_statements.py holds them equal).
LIST_SQL = """
WITH page AS (
  SELECT s.*
    FROM shipments s
   WHERE s.organization_id = %(organization_id)s
     AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
     AND (%(shipment_id)s::bigint IS NULL OR s.id = %(shipment_id)s)
     AND (%(shipment_ids)s::bigint[] IS NULL OR s.id = ANY (%(shipment_ids)s::bigint[]))
     AND (%(archived)s::boolean IS NULL OR s.archived = %(archived)s)
     AND (%(statuses)s::text[] IS NULL OR s.status = ANY (%(statuses)s::text[]))
     AND (%(created_after)s::timestamptz IS NULL
          OR s.created_at >= date_trunc('second', %(created_after)s::timestamptz + interval '0.999999 s', 'UTC'))
     AND (%(created_before)s::timestamptz IS NULL
          OR s.created_at < date_trunc('second', %(created_before)s::timestamptz, 'UTC') + interval '1 s')
     AND (%(eta_after)s::timestamptz IS NULL
          OR s.effective_eta >= date_trunc('second', %(eta_after)s::timestamptz + interval '0.999999 s', 'UTC'))
     AND (%(eta_before)s::timestamptz IS NULL
          OR s.effective_eta < date_trunc('second', %(eta_before)s::timestamptz, 'UTC') + interval '1 s')
     AND (%(starting_after)s::bigint IS NULL OR s.id < %(starting_after)s)
     AND (%(label_ids)s::bigint[] IS NULL OR s.id IN (
           SELECT sl.shipment_id FROM shipment_labels sl
            WHERE sl.label_id = ANY (%(label_ids)s::bigint[])
            GROUP BY sl.shipment_id
           HAVING count(*) = cardinality(%(label_ids)s::bigint[])))
     AND (%(q)s::text IS NULL
          OR s.search_text LIKE upper(%(q_like)s)
          OR s.search_text LIKE %(q_compact_like)s
          OR s.search_text ~ upper(%(q_alias_regex)s)
          OR %(q_fuzzy)s <%% s.consignor
          OR %(q_fuzzy)s <%% s.consignee)
   ORDER BY s.id DESC
   LIMIT %(limit)s
)
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
  FROM page p
 ORDER BY p.id DESC
"""

# rendered_page: the same page (LIST_SQL's `page` CTE), with each shipment's stored rendering when it is
# current: rendered at this version, by this code (`renderer`, a digest of what shapes a shipment), at the
# shipment's revision. The freshness check is in the statement that reads, so a stale rendering is never
# returned.
RENDERED_PAGE_SQL = """
WITH page AS (
  SELECT s.*
    FROM shipments s
   WHERE s.organization_id = %(organization_id)s
     AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
     AND (%(shipment_id)s::bigint IS NULL OR s.id = %(shipment_id)s)
     AND (%(shipment_ids)s::bigint[] IS NULL OR s.id = ANY (%(shipment_ids)s::bigint[]))
     AND (%(archived)s::boolean IS NULL OR s.archived = %(archived)s)
     AND (%(statuses)s::text[] IS NULL OR s.status = ANY (%(statuses)s::text[]))
     AND (%(created_after)s::timestamptz IS NULL
          OR s.created_at >= date_trunc('second', %(created_after)s::timestamptz + interval '0.999999 s', 'UTC'))
     AND (%(created_before)s::timestamptz IS NULL
          OR s.created_at < date_trunc('second', %(created_before)s::timestamptz, 'UTC') + interval '1 s')
     AND (%(eta_after)s::timestamptz IS NULL
          OR s.effective_eta >= date_trunc('second', %(eta_after)s::timestamptz + interval '0.999999 s', 'UTC'))
     AND (%(eta_before)s::timestamptz IS NULL
          OR s.effective_eta < date_trunc('second', %(eta_before)s::timestamptz, 'UTC') + interval '1 s')
     AND (%(starting_after)s::bigint IS NULL OR s.id < %(starting_after)s)
     AND (%(label_ids)s::bigint[] IS NULL OR s.id IN (
           SELECT sl.shipment_id FROM shipment_labels sl
            WHERE sl.label_id = ANY (%(label_ids)s::bigint[])
            GROUP BY sl.shipment_id
           HAVING count(*) = cardinality(%(label_ids)s::bigint[])))
     AND (%(q)s::text IS NULL
          OR s.search_text LIKE upper(%(q_like)s)
          OR s.search_text LIKE %(q_compact_like)s
          OR s.search_text ~ upper(%(q_alias_regex)s)
          OR %(q_fuzzy)s <%% s.consignor
          OR %(q_fuzzy)s <%% s.consignee)
   ORDER BY s.id DESC
   LIMIT %(limit)s
)
SELECT p.id, r.body
  FROM page p
  LEFT JOIN shipment_renderings r
    ON r.shipment_id = p.id AND r.resource = 'shipment' AND r.api_version = %(api_version)s
   AND r.renderer = %(renderer)s
   AND r.revision = p.revision
 ORDER BY p.id DESC
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

# list_shipments?q=: produce names that a query names by one of their aliases.
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


def _page_params(cur, organization_id, limit, filters):
    params = {name: None for name in FILTERS}
    params.update(filters)
    params.update(search_params(params.pop("q")))
    params.update(organization_id=organization_id, limit=limit)
    params["q_alias_regex"] = _alias_regex(cur, params)
    return params


def rendered_page(conn, organization_id, limit, api_version, renderer, **filters):
    """Ids of up to `limit` visible shipments, newest first, each with its current stored rendering or None."""
    with conn.cursor() as cur:
        params = _page_params(cur, organization_id, limit, filters)
        params.update(api_version=api_version, renderer=renderer)
        cur.execute(RENDERED_PAGE_SQL, params)
        return [(row["id"], row["body"]) for row in cur.fetchall()]


def store_renderings(conn, api_version, renderer, renderings, resource="shipment"):
    """Keep (id, revision, body) renderings of shipments (or of their packing lists) for later reads."""
    if not renderings:
        return
    ids, revisions, bodies = zip(*renderings)
    with conn.cursor() as cur:
        cur.execute(STORE_RENDERINGS_SQL, {"api_version": api_version, "renderer": renderer, "resource": resource,
                                           "ids": list(ids), "revisions": list(revisions), "bodies": list(bodies)})


def list_shipments(conn, organization_id, limit, **filters):
    """Up to `limit` visible shipments, newest first, fully assembled."""
    with conn.cursor() as cur:
        params = _page_params(cur, organization_id, limit, filters)
        cur.execute(LIST_SQL, params)
        rows = cur.fetchall()
        if not rows:
            return []
        ids = [row["id"] for row in rows]
        cur.execute(CONTAINERS_SQL, {"ids": ids})
        containers = group_rows(cur.fetchall(), "shipment_id")
        cur.execute(LABELS_SQL, {"ids": ids})
        labels = group_rows(cur.fetchall(), "shipment_id")
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
