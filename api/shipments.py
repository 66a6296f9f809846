"""GET /shipments and GET /shipments/{shipment_id}."""
from flask import Blueprint

from api.apidoc import get_route
from api.context import get_conn, principal
from api.params import parse_query
from api.render import listing, missing, path_id, resource
from api.schemas.common import list_schema
from api.schemas.queries import ShipmentListQuerySchema
from api.schemas.shipments import ShipmentSchema
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
    query = parse_query(ShipmentListQuerySchema())
    items = shipments.list_shipments(
        get_conn(), principal()["organization_id"], query["limit"] + 1,
        q=query.get("q"), statuses=query.get("status"), label_ids=query.get("labels"),
        archived=_ARCHIVED[query["archived"]],
        created_after=query.get("created_after"), created_before=query.get("created_before"),
        eta_after=query.get("eta_after"), eta_before=query.get("eta_before"),
        starting_after=query.get("starting_after"))
    return listing("shipment", ShipmentSchema(), items, query["limit"])


@get_route(bp, "/shipments/<shipment_id>", ShipmentSchema)
def get_shipment(shipment_id):
    """One shipment (archived ones included).

    A shipment waiting for approval or of another organization is a 404, like a missing one.
    """
    found = shipments.get_shipment(get_conn(), principal()["organization_id"],
                                   path_id(shipment_id, "shp", "shipment"))
    if found is None:
        raise missing("shipment", shipment_id)
    return resource("shipment", ShipmentSchema(), found)
