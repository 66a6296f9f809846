"""GET /shipments and GET /shipments/{shipment_id}: stored renderings served as bytes, made on a miss."""
from flask import Blueprint

from rendering import shipment_renderings
from api.apidoc import get_route
from api.conditional import stored_etag
from api.context import get_conn, principal, version
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
    query = parse_query(ShipmentListQuerySchema)
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
    number = path_id(shipment_id, "shp", "shipment")
    body, digest, found = shipment_page(1, 1, shipment_id=number)
    if not found:
        raise missing("shipment", shipment_id)
    return stored_bytes(stored_etag(version(), digest), body)


def shipment_page(limit, shown, **filters):
    """(bodies, digest, found) of up to `limit` shipments at the request's version (shipment_renderings.joined).

    One statement reads the page as ids and the MD5s of their current stored renderings; the renderings
    themselves come from those the process keeps, and only those it does not are read or made.
    """
    conn, organization_id = get_conn(), principal()["organization_id"]
    rows = shipments.page_digests(conn, organization_id, limit, version(), shipment_renderings.RENDERER, **filters)
    return shipment_renderings.joined(conn, organization_id, version(), rows, shown)
