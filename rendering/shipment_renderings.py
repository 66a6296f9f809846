"""Stored shipment renderings (docs/rendering.md): current ones taken as stored, the others rendered.

Shared by the views (GET /shipments, /shipments/{id}, /changes) and the delivery script's webhook
bodies; no Flask here.
"""
import hashlib
import threading

from models import db, packing_lists, shipments
from rendering.present import RENDERER, dumps, list_text, present
from rendering.schemas.packing_lists import PackingListSchema
from rendering.schemas.shipments import ShipmentSchema


# The shipment renderings this process has read by their MD5 or made, by (shipment id, MD5 of the body): a
# page whose rows the database names by their stored rendering's MD5 (models.shipments.page_digests) is
# joined from here, its bodies never read again. Never stale: a changed rendering has another MD5, so it is
# another key, and nothing has to be forgotten. Bounded in bytes: past KEPT_BYTES the oldest kept go first.
# A plain dict: a page is read with one dict.get per shipment and no lock (each get is atomic beside a
# writer); keep() takes the lock to add and drop.
KEPT_BYTES = 32 * 1024 * 1024
_kept = {}
_kept_bytes = 0
_kept_lock = threading.Lock()


def keep(renderings):
    """Keep (shipment id, JSON as bytes, its MD5) renderings; past KEPT_BYTES the oldest kept are dropped."""
    global _kept_bytes
    with _kept_lock:
        for shipment_id, body, md5 in renderings:
            if (shipment_id, md5) not in _kept:
                _kept[shipment_id, md5] = body
                _kept_bytes += len(body)
        while _kept_bytes > KEPT_BYTES:
            _kept_bytes -= len(_kept.pop(next(iter(_kept))))


def page(conn, organization_id, version, limit, **filters):
    """[(id, stored JSON or None)] of up to `limit` visible shipments, newest first (models.shipments filters)."""
    return shipments.rendered_page(conn, organization_id, limit, version, RENDERER, **filters)


def md5_list_digest(md5s):
    """The `digest` of api.conditional.stored_etag for renderings whose MD5s (hex) are `md5s`, in the body's
    order (here, not in api.conditional: the delivery script imports this module, never Flask's views)."""
    return hashlib.md5(",".join(md5s).encode()).hexdigest()


def page_bytes(conn, organization_id, version, limit, shown, **filters):
    """(bodies, digest, found) of `page` (up to `limit` shipments): the JSON of the first `shown` as bytes joined
    with commas, the digest of their MD5s (api.conditional.stored_etag), and how many were found."""
    rows = shipments.rendered_page_bytes(conn, organization_id, limit, version, RENDERER, **filters)
    return joined(conn, organization_id, version, rows, shown)


def joined(conn, organization_id, version, rows, shown):
    """page_bytes of `rows` (id, stored JSON as bytes or None, its MD5 or None), reading and rendering what is missing.

    A row with an MD5 and no body is taken from the renderings this process keeps; when one is not kept, or a
    row has neither (no current rendering), `completed` reads and renders what is missing. Stored renderings
    stay the bytes the driver read and are joined once; only those rendered now are encoded.
    """
    kept = _kept
    bodies = [body if body is not None or md5 is None else kept.get((shipment_id, md5))
              for shipment_id, body, md5 in rows]
    if None in bodies:
        rows = completed(conn, organization_id, version, rows, bodies)
        bodies = [body for _id, body, _md5 in rows]
    return b",".join(bodies[:shown]), md5_list_digest([md5 for _id, _body, md5 in rows[:shown]]), len(rows)


def completed(conn, organization_id, version, rows, bodies):
    """`rows` with the `bodies` found kept, each missing one read (one statement for all of them) or, without a
    current rendering (or one that went meanwhile), rendered and stored; all of them kept. A shipment hidden or
    deleted between the reads is left out, as a read after it would."""
    unread = [shipment_id for (shipment_id, _body, md5), body in zip(rows, bodies) if body is None and md5 is not None]
    read = shipments.stored_bodies(conn, unread, version, RENDERER) if unread else {}
    rows = [(shipment_id, *read.get(shipment_id, (None, None))) if body is None
            else (shipment_id, body, md5) for (shipment_id, _body, md5), body in zip(rows, bodies)]
    made = {}
    if any(body is None for _shipment_id, body, _md5 in rows):
        with db.one_snapshot(conn):
            made = render_missing(conn, organization_id, version, [(shipment_id, body) for shipment_id, body, _md5
                                                                   in rows])
        store(conn, version, made)
    found = []
    for shipment_id, body, md5 in rows:
        if body is None:
            if shipment_id not in made:
                continue
            body = made[shipment_id][1].encode()
            md5 = hashlib.md5(body).hexdigest()
        found.append((shipment_id, body, md5))
    keep(found)
    return found


def render_missing(conn, organization_id, version, rows):
    """{id: (revision, JSON)} for the shipments of a `page` without a current rendering, rendered now.

    Run it inside db.one_snapshot before keeping the result, so each rendering matches the revision
    stored with it; a shipment hidden or deleted meanwhile is absent.
    """
    misses = [shipment_id for shipment_id, body in rows if body is None]
    if not misses:
        return {}
    fresh = shipments.list_shipments(conn, organization_id, len(misses), shipment_ids=misses)
    return {shipment["id"]: (shipment["revision"], dumps(present("shipment", ShipmentSchema, shipment, version)))
            for shipment in fresh}


def store(conn, version, made):
    """Store what render_missing made (outside the snapshot: a store may wait for a concurrent one)."""
    shipments.store_renderings(conn, version, RENDERER,
                               [(shipment_id, *made[shipment_id]) for shipment_id in sorted(made)])


def bodies_by_id(rows, made):
    """{id: JSON} of a `page`: as stored, else as made; shipments made nowhere (hidden meanwhile) are absent."""
    by_id = {shipment_id: body for shipment_id, body in rows if body is not None}
    by_id.update((shipment_id, body) for shipment_id, (_revision, body) in made.items())
    return by_id


def packing_lists_body(conn, organization_id, version, shipment_id):
    """(JSON, its MD5) of GET /shipments/{id}/packing_lists for a visible shipment (None when not found).

    Served as stored while current (the shipment's revision grows with every change to its packing
    lists, pallets and lines); otherwise rendered from one snapshot and stored.
    """
    stored = packing_lists.stored_rendering(conn, organization_id, shipment_id, version, RENDERER)
    if stored is None or stored[1] is not None:
        return stored and stored[1:]
    with db.one_snapshot(conn):
        current = packing_lists.list_shipment_packing_lists(conn, organization_id, shipment_id)
    if current is None:
        return None                       # hidden or deleted between the two reads
    revision, items = current
    body = render_packing_lists(items, version)
    shipments.store_renderings(conn, version, RENDERER, [(shipment_id, revision, body)], resource="packing_lists")
    return body, hashlib.md5(body.encode()).hexdigest()


def render_packing_lists(items, version):
    """The list envelope of packing lists as the API writes it (responses.listing's bytes)."""
    return list_text([dumps(present("packing_list", PackingListSchema, item, version)) for item in items], False)
