"""GET /shipments and GET /shipments/{shipment_id}: stored renderings served as bytes, made on a miss."""
from flask import Blueprint, request

from api import guard
from rendering import shipment_renderings
from api.apidoc import get_route
from api.conditional import stored_etag
from api.context import get_conn, principal, version
from api.errors import ApiError
from api.params import parse_query
from api.responses import missing, path_id, stored_bytes
from api.schemas.common import list_schema
from rendering.present import list_bytes
from api.schemas.queries import ShipmentListQuerySchema
from rendering.schemas.shipments import ShipmentSchema
from models import shipments

bp = Blueprint("shipments", __name__)

_ARCHIVED = {"false": False, "true": True, "any": None}


@get_route(bp, "/shipments", list_schema(ShipmentSchema, "ShipmentList"), query=ShipmentListQuerySchema)
def list_shipments():
    """Shipments, newest first, keyset-paged.

    Shipments waiting for approval are never listed; archived ones only with `archived=true` or `any`.
    Filters combine with AND. Page with `limit` and `starting_after`, the last id of the previous page,
    while `has_more` is true: shipments added meanwhile cause no gaps or repeats.
    """
    query = counted_first(lambda: parse_query(ShipmentListQuerySchema))
    limit = query["limit"]
    bodies, digest, found = shipment_page(
        limit + 1, limit,
        q=query.get("q"), statuses=query.get("status"), label_ids=query.get("labels"),
        archived=_ARCHIVED[query["archived"]],
        created_after=query.get("created_after"), created_before=query.get("created_before"),
        eta_after=query.get("eta_after"), eta_before=query.get("eta_before"),
        starting_after=query.get("starting_after"))
    has_more = found > limit
    return stored_bytes(stored_etag(version(), digest, has_more), *list_bytes(bodies, has_more))


@get_route(bp, "/shipments/<shipment_id>", ShipmentSchema)
def get_shipment(shipment_id):
    """One shipment (archived ones included).

    A shipment waiting for approval or of another organization is a 404, like a missing one.
    """
    number = counted_first(lambda: path_id(shipment_id, "shp", "shipment"))
    body, digest, found = shipment_page(1, 1, shipment_id=number)
    if not found:
        raise missing("shipment", shipment_id)
    return stored_bytes(stored_etag(version(), digest), body)


def counted_first(parse):
    """`parse()`, the request counted first when it refuses (a 401 or 429 comes before a 400 or 404)."""
    try:
        return parse()
    except ApiError:
        guard.complete()
        raise


def shipment_page(limit, shown, **filters):
    """shipment_renderings.page_bytes at the request's version: (bodies, digest, found).

    Read with the request's token check and count in one statement when guard left the count to this view
    (without `q`, whose alias lookup comes first); otherwise after the count.
    """
    read = None
    if guard.deferred() and not filters.get("q"):
        requested = request.headers.get("Service-Version")
        read = guard.complete(lambda conn, *count: counted(shipments.counted_page(
            conn, *count, requested, limit, shipment_renderings.RENDERER, **filters)))
    else:
        guard.complete()
    conn, organization_id = get_conn(), principal()["organization_id"]
    if read is not None and read[0] == version():
        return shipment_renderings.joined(conn, organization_id, version(), read[1], shown)
    return shipment_renderings.page_bytes(conn, organization_id, version(), limit, shown, **filters)


def counted(result):
    """counted_page's (Authentication, page version, rows) as guard.complete takes it: (Authentication, the rest)."""
    authentication, page_version, rows = result
    return authentication, (page_version, rows)
